"""Anytime walk overhead: what serving spends outside the features, per walk.

``index.select`` on an anytime index walks the chosen set's chain: before each feature it checks
the time left, after each it looks for the best computed prefix and for an upgrade. None of that
is on the replayed clock the demo judges by, yet at a 0.5 ms budget every 50 us of it is a tenth
of the budget. On a saved classifier (a demo run's ``index``, for example) this times whole walks
whose features cost nothing to compute while the clock advances by each feature's predicted cost
(the walk then takes the decisions it would take on a machine that matches its curves), for a
grid of item sizes and budgets, next to one ``lookup`` for scale. With ``--against REV`` the walk
of that git revision's ``index/serving/anytime.py`` runs on the same index, interleaved round by round
with the working tree's, and the report gives both medians and their ratio.

Run from the project root::

    python benchmarks/anytime_overhead.py --index RUN/index [--against HEAD~1] [--out benchmarks/results/anytime_overhead.md]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import polydom
from polydom.index.serving import anytime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # sibling helpers, under python -P too
from revision import module_at, short_name  # noqa: E402

SIDES = (28, 89, 280)
BUDGETS_MS = (0.2, 0.5, 2.0, 10.0, 50.0)


def _replayed(index, size: float, vectors: dict):
    """``(compute, now)``: features that cost nothing while the clock ``now[0]`` advances by each
    one's predicted cost, so the walk takes the decisions it takes on a machine matching its curves."""
    position = {name: i for i, name in enumerate(index.space.names)}
    cost = [curve(size) for curve in index.costs]
    now = [0.0]

    def compute(name, deadline=None):
        now[0] += cost[position[name]]
        return vectors[name]

    return compute, now


def _walks(module, index, size: float, budget: float, vectors: dict, cascade: bool, walks: int) -> tuple[float, object]:
    """Seconds per walk, and the last walk's answer (to check both walks agree)."""
    compute, now = _replayed(index, size, vectors)
    start = time.perf_counter()
    for _ in range(walks):
        now[0] = 0.0
        answer = module.serve_anytime(index, size, budget, compute, lambda: now[0], stop_when_confident=cascade,
                                      guarded=False)
    return (time.perf_counter() - start) / walks, answer


def _single_walks(module, index, size: float, budget: float, vectors: dict, walks: int, **options) -> list[float]:
    """Seconds of each of ``walks`` single walks with the guards on (the fit's guards, its cost
    laws and the stake, as a classifier's ``predict`` walks; ``options`` go to ``serve_anytime``),
    the first of the size included: each timed on its own, around one ``serve_anytime`` call."""
    compute, now = _replayed(index, size, vectors)
    clock = lambda: now[0]  # noqa: E731 - a replayed clock
    seconds = []
    timer = time.perf_counter
    for _ in range(walks):
        now[0] = 0.0
        start = timer()
        module.serve_anytime(index, size, budget, compute, clock, **options)
        seconds.append(timer() - start)
    return seconds


def _server_walks(path, size: float, budget: float, vectors: dict, walks: int) -> list[float]:
    """:func:`_single_walks` of a learning server (``clf.server()``: guards and chances learned
    from the calls it measures, the CPU clock read around each feature), on a fresh load."""
    clf = polydom.CostSensitiveClassifier.load(path)
    guards = clf.server().planner.serving_guards
    return _single_walks(anytime, clf.planner_.index, size, budget, vectors, walks, serving_guards=guards,
                         cpu_clock=time.thread_time)


def server_walk_rows(path, walks: int, vectors: dict) -> list[str]:
    """The table of a learning server's single walks at budgets of 2 ms or less."""
    rows = ["| side | budget (ms) | median (us) | p99 (us) |", "|---|---|---|---|"]
    for side in SIDES:
        for budget_ms in (b for b in BUDGETS_MS if b <= 2.0):
            t = _server_walks(path, float(side * side), budget_ms / 1e3, vectors, walks)
            rows.append(f"| {side} | {budget_ms:g} | {1e6 * statistics.median(t):.1f} | {1e6 * _percentile(t, 0.99):.1f} |")
    return rows


def _percentile(values, q: float) -> float:
    return float(np.quantile(np.asarray(values), q))


def single_walk_rows(baseline, path, walks: int) -> tuple[list[str], list[tuple]]:
    """The table of single guarded walks: per side and budget, median, p99 and the first walk of
    the size, on a freshly loaded index (so the first walk of each size prepares what it needs),
    this tree's walk and ``baseline``'s on two separate loads."""
    rows = ["| side | budget (ms) | median (us) | p99 (us) | first walk (us) |"
            + (" baseline median (us) | baseline p99 (us) | baseline first (us) |" if baseline else ""),
            "|---|---|---|---|---|" + ("---|---|---|" if baseline else "")]
    cells = []
    loads = {"now": polydom.CostSensitiveClassifier.load(path)}
    if baseline is not None:
        loads["before"] = polydom.CostSensitiveClassifier.load(path)
        # Loading prepared it for this tree's walk: the baseline's walk prepares it its own way.
        loads["before"].planner_.index.__dict__.pop("_walk_prepared", None)
    vectors = {name: np.zeros(c.stop - c.start) for name, c in loads["now"].feature_columns_.items()}
    for side in SIDES:
        size = float(side * side)
        for budget_ms in BUDGETS_MS:
            budget = budget_ms / 1e3
            now_t = _single_walks(anytime, loads["now"].planner_.index, size, budget, vectors, walks)
            row = (f"| {side} | {budget_ms:g} | {1e6 * statistics.median(now_t):.1f} | "
                   f"{1e6 * _percentile(now_t, 0.99):.1f} | {1e6 * now_t[0]:.1f} |")
            cell = (side, budget_ms, statistics.median(now_t), _percentile(now_t, 0.99))
            if baseline is not None:
                before_t = _single_walks(baseline, loads["before"].planner_.index, size, budget, vectors, walks)
                row += (f" {1e6 * statistics.median(before_t):.1f} | {1e6 * _percentile(before_t, 0.99):.1f} |"
                        f" {1e6 * before_t[0]:.1f} |")
                cell += (statistics.median(before_t), _percentile(before_t, 0.99))
            rows.append(row)
            cells.append(cell)
    return rows, cells


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", required=True, help="a saved CostSensitiveClassifier with prefix chains")
    parser.add_argument("--against", default=None, help="a git revision whose walk to time beside this one")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--walks", type=int, default=50)
    parser.add_argument("--single-walks", type=int, default=300, help="single walks timed per cell")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    clf = polydom.CostSensitiveClassifier.load(args.index)
    index = clf.planner_.index
    if not getattr(index, "chains", None):
        raise SystemExit("this index has no prefix chains: its select is a lookup, not a walk")
    cascade = bool(index.cascades)
    vectors = {name: np.zeros(columns.stop - columns.start) for name, columns in clf.feature_columns_.items()}
    baseline = module_at(args.against, "index/serving/anytime.py") if args.against else None
    if baseline is not None:  # name the commit, not a moving name such as HEAD
        args.against = short_name(args.against)
    # The baseline walks its own copy: each walk keeps what it prepares on the index it walks.
    before_index = copy.copy(index)
    before_index.__dict__.pop("_walk_prepared", None)
    header = "| side | budget (ms) | features computed | lookup (us) | walk (us)"
    header += f" | walk at {args.against} (us) | ratio |" if baseline else " |"
    rows = [header, "|" + "---|" * (header.count("|") - 1)]
    ratios = []
    for side in SIDES:
        size = float(side * side)
        for budget_ms in BUDGETS_MS:
            budget = budget_ms / 1e3
            now_t, before_t, look_t = [], [], []
            for _ in range(args.rounds):
                t, answer = _walks(anytime, index, size, budget, vectors, cascade, args.walks)
                now_t.append(t)
                if baseline is not None:
                    t, other = _walks(baseline, before_index, size, budget, vectors, cascade, args.walks)
                    before_t.append(t)
                    if other != answer:
                        raise SystemExit(f"the walks disagree at side {side}, {budget_ms} ms: {other} vs {answer}")
                start = time.perf_counter()
                for _ in range(args.walks):
                    index.lookup(size, budget)
                look_t.append((time.perf_counter() - start) / args.walks)
            computed = sum(1 for kind, _ in answer[2] if kind == "compute")
            row = f"| {side} | {budget_ms:g} | {computed} | {1e6 * statistics.median(look_t):.1f} | {1e6 * statistics.median(now_t):.1f}"
            if baseline is not None:
                ratio = statistics.median(b / n for b, n in zip(before_t, now_t))
                ratios.append(ratio)
                row += f" | {1e6 * statistics.median(before_t):.1f} | {ratio:.2f}x |"
            else:
                row += " |"
            rows.append(row)
    lines = [
        "# Anytime walk overhead",
        "",
        f"Index: `{Path(args.index).name}` ({len(index.chains)} chains, {len(index.ranked_prefixes)} distinct prefixes"
        f"{', cascade thresholds on' if cascade else ''}). Features cost nothing; the clock advances by their"
        f" predicted costs. Medians over {args.rounds} interleaved rounds of {args.walks} walks; ratio = the"
        " median per-round ratio (baseline / working tree).",
        "",
        *rows,
    ]
    if ratios:
        lines += ["", f"Median ratio over cells: {statistics.median(ratios):.2f}x (range {min(ratios):.2f}-{max(ratios):.2f}x)."]
    single, cells = single_walk_rows(baseline, args.index, args.single_walks)
    tight = [c for c in cells if c[1] <= 2.0]
    lines += [
        "",
        "## Single walks, guards on",
        "",
        f"Each walk timed on its own ({args.single_walks} per cell), with the fit's guards, cost laws and the"
        " stake, as a classifier's `predict` walks; the index freshly loaded, so the first walk of each size"
        " (which prepares what later walks find ready) is counted.",
        "",
        *single,
        "",
        f"Cells with a budget of 2 ms or less: median at most {1e6 * max(c[2] for c in tight):.1f} us, "
        f"p99 at most {1e6 * max(c[3] for c in tight):.1f} us"
        + (f" (baseline: {1e6 * max(c[4] for c in tight):.1f} and {1e6 * max(c[5] for c in tight):.1f} us)."
           if baseline is not None else "."),
    ]
    lines += [
        "",
        "## Single walks of a learning server",
        "",
        f"`clf.server()` walks ({args.single_walks} per cell, a fresh load per cell): its guards and chances to"
        " finish are learned from the calls it measures, so its walks are not traced (`docs/decisions/"
        "walk-bookkeeping.md`); each walk also records its features' times.",
        "",
        *server_walk_rows(args.index, args.single_walks, vectors),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
