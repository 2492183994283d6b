"""How much the fit's chance should weigh beside a server's own calls.

A learning server (``clf.server()``) reads the chance that a feature finishes from its recent
calls in the item's size band, with the fit's cost law as a prior weighed as ``prior_calls``
calls (``polydom.index.serving.guards``, *few calls*). This replays fits kept by
``benchmarks/peers.py --keep DIR`` through such a server, budget after budget as the peers
benchmark serves them, once per weight, and prints on-time accuracy and late share per fit and
the cells where a weight moved on-time accuracy, against the first weight, with paired SEs.

Run from the project root::

    python -P benchmarks/peers.py --dataset fashion-mnist --realdata --keep KEEP
    python -P benchmarks/chance_prior.py --keep KEEP [KEEP ...] [--weights 0 10 20 50]
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

import numpy as np

from polydom.demo.evaluation import serve_grid
from polydom.index.serving.guards import ServingGuards

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # sibling helpers, under python -P too
from peers import load_kept  # noqa: E402
from realdata import BUDGETS_MS  # noqa: E402

BUDGETS = tuple(ms / 1e3 for ms in BUDGETS_MS)


def replay(keep: str, prior_calls: int) -> dict:
    """Per (side, budget) cell of the kept fit: the per-item (on time and correct, late) arrays
    of a learning server whose fit's chance weighs ``prior_calls`` calls."""
    clf, held = load_kept(keep)
    planner = clf.planner_
    planner.serving_guards = ServingGuards(planner.index, quantile=planner.serving_guards.quantile,
                                           prior_calls=prior_calls)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grid = serve_grid(clf, held["X"], held["seconds"], held["sizes"], held["y"], list(BUDGETS),
                          cpu_seconds=held["cpu_seconds"])
    sizes = held["sizes"]
    late = grid.measured > np.asarray(BUDGETS)[:, None] * (1.0 + 1e-9)
    on_time = grid.correct & ~late
    return {(int(round(n ** 0.5)), budget): (on_time[i, sizes == n], late[i, sizes == n])
            for n in np.unique(sizes) for i, budget in enumerate(BUDGETS)}


def compare(keep: str, weights) -> list[str]:
    """Report lines for one kept fit: each weight's means, then the cells it moved."""
    runs = {w: replay(keep, w) for w in weights}
    first = runs[weights[0]]
    lines = [f"## {Path(keep).name}", "", "| prior calls | on time (mean over cells) | late (mean over cells) |",
             "|---:|---:|---:|"]
    for w, cells in runs.items():
        lines.append(f"| {w} | {np.mean([c[0].mean() for c in cells.values()]):.4f} | "
                     f"{np.mean([c[1].mean() for c in cells.values()]):.2%} |")
    lines += ["", f"Cells where on time moved by more than 0.002 against {weights[0]} prior calls:", ""]
    for w in weights[1:]:
        for cell, (ok, late) in runs[w].items():
            diff = ok.astype(float) - first[cell][0].astype(float)
            if abs(diff.mean()) > 0.002:
                se = diff.std(ddof=1) / np.sqrt(len(diff))
                lines.append(f"- {w} calls, {cell[0]}² px at {cell[1] * 1e3:g} ms: {first[cell][0].mean():.3f} → "
                             f"{ok.mean():.3f} on time ({diff.mean():+.3f} ± {se:.3f}), late "
                             f"{first[cell][1].mean():.1%} → {late.mean():.1%}")
    return lines + [""]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", nargs="+", required=True, help="directories written by benchmarks/peers.py --keep")
    parser.add_argument("--weights", nargs="+", type=int, default=[0, 10, 20, 50],
                        help="prior calls to replay; the first is the baseline")
    parser.add_argument("--out", default=None, help="write a markdown report here")
    args = parser.parse_args(argv)
    lines = ["# The fit's chance as a prior: replays of kept fits", "",
             f"`python -P benchmarks/chance_prior.py --keep KEEP ... --weights {' '.join(map(str, args.weights))}`: "
             f"budgets {', '.join(f'{b * 1e3:g}' for b in BUDGETS)} ms, one learning server per fit and weight, "
             "on the held-out items' measured times; a late answer counts as wrong.", ""]
    print("\n".join(lines), flush=True)
    for keep in args.keep:
        section = compare(keep, args.weights)
        print("\n".join(section), flush=True)
        lines += section
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
        print(f"report written to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
