"""Guards learned while serving, against the fit's guards alone, on one demo run's index.

Serves the demo's held-out grid three times from the saved PolyDom α=1 index of a finished
``python -P benchmarks/backends.py --out OUT`` run, replaying the held-out feature times that run measured (its
feature cache), so that the three passes differ only in their guards:

* **fit only** -- the guards the fit measured (``learn_guards`` off);
* **learning** -- the default: serving learns the guards from the walks' measured times, from
  scratch, in the demo's order (budgets ascending, every item at each);
* **learned** -- a second pass with the guards the first one learned (a service that has been
  running for a while).

Prints, and writes ``benchmarks/results/serving-guards-DATASET.md``: mean accuracy over cells,
on-time accuracy (an answer over its budget counts wrong), and budget violations per cell.

Usage::

    python -P benchmarks/backends.py --out build/demo
    python -P benchmarks/serving_guards.py --out build/demo
    python -P benchmarks/backends.py --dataset fashion-mnist --out build/demo-fashion
    python -P benchmarks/serving_guards.py --out build/demo-fashion
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

# Run as ``python -P``, a script's own folder is not on sys.path; ``lab`` is the package beside it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def main(argv=None) -> int:
    from lab.job import add_run_arguments, load_run_held_out, run_arguments

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_arguments(parser)
    args = parser.parse_args(argv)
    dataset = run_arguments(args.out).dataset
    warnings.simplefilter("ignore")

    import polydom
    from lab import cells
    from polydom.demo import stats
    from polydom.demo.evaluation import serve_grid
    from lab.settings import DEFAULT_BUDGETS

    started = time.perf_counter()
    try:
        matrix, sizes, y, pictures = load_run_held_out(args)
    except ValueError as error:
        sys.exit(f"serving_guards: {error}")
    index_dir = os.path.join(args.out, "index")
    fixed = polydom.CostSensitiveClassifier.load(index_dir)  # a classifier's own predictions learn nothing
    learning = polydom.CostSensitiveClassifier.load(index_dir)
    learning.planner_ = learning.server().planner  # a server learns its guards
    if learning.planner_.serving_guards is None:
        sys.exit("serving_guards: this index learns no guards (fitted without guards or with learn_guards=False)")
    grids = {"fit only": serve_grid(fixed, matrix.X, matrix.seconds, sizes, y, DEFAULT_BUDGETS, cpu_seconds=matrix.cpu_seconds)}
    grids["learning"] = serve_grid(learning, matrix.X, matrix.seconds, sizes, y, DEFAULT_BUDGETS, cpu_seconds=matrix.cpu_seconds)
    grids["learned"] = serve_grid(learning, matrix.X, matrix.seconds, sizes, y, DEFAULT_BUDGETS, cpu_seconds=matrix.cpu_seconds)

    rows = []
    for name, grid in grids.items():
        per_cell = np.array(list(cells.violations(grid, sizes).values()))
        gap = stats.overall_difference(grid.correct, grids["fit only"].correct, pictures)
        on_time = stats.overall_difference(grid.on_time().correct, grids["fit only"].on_time().correct, pictures)
        rows.append((name, stats.overall(grid.correct, pictures).text(), stats.overall(grid.on_time().correct,
                     pictures).text(), "–" if name == "fit only" else gap.text(signed=True),
                     "–" if name == "fit only" else on_time.text(signed=True), f"{100 * per_cell.mean():.2f}",
                     f"{100 * per_cell.max():.1f}", f"{int((per_cell > 0.02).sum())} of {len(per_cell)}"))
    header = ("guards", "accuracy over cells", "on time", "minus fit only", "on time minus fit only",
              "violations mean (%)", "worst cell (%)", "cells above 2%")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    table = "\n".join(lines)
    print(table)
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, f"serving-guards-{dataset}.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"# Guards learned while serving ({dataset})\n\n"
                f"`python -P benchmarks/serving_guards.py --out {os.path.basename(os.path.normpath(args.out))}` "
                f"({dataset}, `benchmarks/backends.py` seed {run_arguments(args.out).seed}) on a demo run's saved "
                f"index and held-out times ({len(y)} images, {len(DEFAULT_BUDGETS)} budgets); accuracies ± one "
                "standard error over pictures, differences paired. On time: an answer whose measured extraction "
                "time exceeded its budget counts as wrong.\n\n" + table + "\n")
    print(f"serving_guards: report written to {path} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
