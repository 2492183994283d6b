"""Whether the walk's chance to finish matches how often features finish.

The start rule (``docs/decisions/start-rule.md``) starts a feature when ``p * a(target)`` beats
what is served, ``p`` the chance that the feature finishes in the room left. A ``p`` that runs
high makes late answers; one that runs low refuses starts that pay. This replays a fit kept by
``benchmarks/peers.py --keep DIR`` through a learning server (``clf.server()``), budget after
budget as the peers benchmark serves it, and records every start decision whose target is more
accurate than what is served: the chance the walk computed, and whether the feature would have
finished in the room on that item's measured time (known for refused starts too). It prints, per
band of chances, the decisions, their mean chance and the share that would have finished.

Run from the project root::

    python -P benchmarks/peers.py --dataset digits --realdata --keep KEEP
    python -P benchmarks/stake_calibration.py --keep KEEP [--out benchmarks/results/stake-calibration.md]
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

import numpy as np

import polydom.demo.evaluation as evaluation
from polydom.index.serving import stake

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # sibling helpers, under python -P too
from peers import load_kept  # noqa: E402
from realdata import BUDGETS_MS  # noqa: E402

BUDGETS = tuple(ms / 1e3 for ms in BUDGETS_MS)
BANDS = (0.0, 0.5, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 0.999, 1.0 + 1e-9)


def record_decisions(keep: str, budgets) -> np.ndarray:
    """Replay the kept fit at every budget; rows ``(chance, would finish, started)`` of every
    start decision with something at stake."""
    clf, held = load_kept(keep)  # served as peers.py serves it: a server that learns
    rows, item = [], {}
    replay, pays, chance = evaluation._replayed_select, stake._Stake.pays, stake._Stake.chance

    def replayed(index, positions, seconds, *args, **kwargs):
        item["seconds"] = seconds
        return replay(index, positions, seconds, *args, **kwargs)

    def asked(self, feature, ratio):
        p = chance(self, feature, ratio)
        item["asked"] = (ratio, p)
        return p

    def recorded(self, feature, pending, cost, remaining, target, served):
        # The rule asks for the chance only where something is at stake; what it asked is recorded.
        item["asked"] = None
        started = pays(self, feature, pending, cost, remaining, target, served)
        if item["asked"] is not None:
            ratio, p = item["asked"]
            rows.append((p, float(item["seconds"][feature] <= ratio * cost[feature]), float(started)))
        return started

    evaluation._replayed_select, stake._Stake.pays, stake._Stake.chance = replayed, recorded, asked
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            evaluation.serve_grid(clf, held["X"], held["seconds"], held["sizes"], held["y"], list(budgets),
                                  cpu_seconds=held["cpu_seconds"])
    finally:
        evaluation._replayed_select, stake._Stake.pays, stake._Stake.chance = replay, pays, chance
    return np.array(rows)


def table(rows: np.ndarray) -> list[str]:
    lines = ["| chance the walk computed | decisions | mean chance | would have finished ± SE | started |",
             "|---|---:|---:|---:|---:|"]
    for lo, hi in zip(BANDS, BANDS[1:]):
        band = rows[(rows[:, 0] >= lo) & (rows[:, 0] < hi)]
        if len(band) == 0:
            continue
        share = band[:, 1].mean()
        se = np.sqrt(share * (1.0 - share) / len(band))
        lines.append(f"| [{lo:.3f}, {min(hi, 1.0):.3f}{']' if hi > 1.0 else ')'} | {len(band)} | {band[:, 0].mean():.3f} | "
                     f"{share:.3f} ± {se:.3f} | {band[:, 2].mean():.0%} |")
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", required=True, help="a directory written by benchmarks/peers.py --keep")
    parser.add_argument("--label", default="", help="what fit this is, for the report")
    parser.add_argument("--out", default=None, help="write a markdown report here")
    args = parser.parse_args(argv)
    rows = record_decisions(args.keep, BUDGETS)
    refused = rows[rows[:, 2] == 0]
    lines = ["# The walk's chance to finish against how often features finished", "",
             f"`python -P benchmarks/stake_calibration.py --keep KEEP`{f' ({args.label})' if args.label else ''}: "
             f"budgets {', '.join(f'{b * 1e3:g}' for b in BUDGETS)} ms, one learning server as `peers.py` serves; "
             "every start decision with a more accurate target, its chance, and whether the feature would have "
             "finished in the room on that item's measured time.", "", *table(rows), "",
             f"{len(rows)} decisions; {len(refused)} refused, of which "
             f"{refused[:, 1].mean() if len(refused) else float('nan'):.3f} would have finished."]
    print("\n".join(lines))
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
        print(f"report written to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
