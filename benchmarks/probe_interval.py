"""How often serving guards should probe a feature they refuse, replayed on finished demo runs.

A guard learned while serving (:mod:`polydom.index.serving.guards`) that refuses a feature stops
learning from it; after ``forget_after`` walks in its size band without a call of the feature the
band probes it again. This script serves each run's saved PolyDom α=1 index on the run's
recorded held-out times once per ``forget_after`` value (everything else equal, guards learned
from scratch in the demo's order) and reports, per value: the on-time accuracy over cells (an
answer over its budget counts wrong), its paired difference with the first value, and the late
answers per cell.

Usage::

    python -P benchmarks/probe_interval.py build/d0 build/d1 --values 1024,256
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


def probe_values(text: str) -> list[int]:
    """``--values``: two or more distinct positive whole numbers of walks, comma-separated."""
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected whole numbers separated by commas, got {text!r}") from None
    if len(values) < 2 or min(values) < 1 or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"expected two or more distinct positive values, got {text!r}")
    return values


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="finished `python -P benchmarks/backends.py --out DIR` directories")
    parser.add_argument("--values", type=probe_values, default="1024,256",
                        help="forget_after values, the first the reference (default 1024,256)")
    parser.add_argument("--results", default=RESULTS, help="where the report goes (default benchmarks/results)")
    args = parser.parse_args(argv)
    values = args.values
    for path in args.runs:
        missing = [part for part in ("headline.json", "index") if not os.path.exists(os.path.join(path, part))]
        if missing:
            sys.exit(f"probe_interval: {path} is not a finished demo run (no {' or '.join(missing)})")
    # The replays retrain nothing; the learners' and the cost fits' notes would only repeat the run's.
    warnings.simplefilter("ignore", UserWarning)

    import polydom
    from lab import cells
    from polydom.demo import stats
    from polydom.demo.evaluation import serve_grid
    from lab.job import load_run_held_out, run_arguments
    from polydom.demo.markdown import table

    started = time.perf_counter()
    rows = []
    for path in args.runs:
        where = run_arguments(path)
        try:
            matrix, sizes, y, pictures = load_run_held_out(where)
        except ValueError as error:
            sys.exit(f"probe_interval: {error}")
        reference = None
        for value in values:
            clf = polydom.CostSensitiveClassifier.load(os.path.join(path, "index"))
            clf.planner_ = clf.server().planner  # served as a service serves: learning its guards
            if clf.planner_.serving_guards is None:
                sys.exit(f"probe_interval: {path}'s index learns no guards")
            clf.planner_.serving_guards.forget_after = value
            on_time = serve_grid(clf, matrix.X, matrix.seconds, sizes, y, where.budgets,
                                 cpu_seconds=matrix.cpu_seconds).on_time()
            per_cell = np.array(list(cells.violations(on_time, sizes).values()))
            gap = "–" if reference is None else stats.overall_difference(on_time.correct, reference, pictures).text(signed=True)
            reference = on_time.correct if reference is None else reference
            rows.append((os.path.basename(path.rstrip("/")), where.dataset, str(value),
                         stats.overall(on_time.correct, pictures).text(), gap, f"{100 * per_cell.mean():.2f}",
                         f"{100 * per_cell.max():.1f}", str(int((per_cell > 0.02).sum()))))
            print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    header = ("run", "data", "forget_after", "on-time accuracy over cells", f"minus forget_after={values[0]}",
              "late answers, mean over cells (%)", "worst cell (%)", "cells above 2%")
    text = (f"# Probe interval of the serving guards\n\n`python -P benchmarks/probe_interval.py "
            f"{' '.join(os.path.basename(p.rstrip('/')) for p in args.runs)} --values {','.join(map(str, values))}` "
            f"({time.perf_counter() - started:.0f} s): each run's PolyDom α=1 index served on its recorded held-out "
            "times once per value, guards learned from scratch in the demo's order; ± one standard error over "
            "pictures, differences paired.\n\n" + table(header, rows) + "\n")
    print(text)
    os.makedirs(args.results, exist_ok=True)
    with open(os.path.join(args.results, "probe-interval.md"), "w", encoding="utf-8") as fh:
        fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
