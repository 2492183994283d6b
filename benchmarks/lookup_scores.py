"""Lookup speed of one demo run's index ranked by measured scores and by their monotone fit.

The monotone ranking keeps more candidates (sets the fit pools are ranked by size, so a larger
one is served where it is affordable), and with them more ranges and skyline entries. This
script loads a finished run's PolyDom α=1 index, sweeps it both ways (nothing retrained), and
times ``lookup`` and ``lookup_many`` on the same random (size, budget) queries of the demo's grid,
the two indexes alternating pass by pass in one process.

Usage::

    python -P benchmarks/backends.py --out build/demo
    python -P benchmarks/lookup_scores.py build/demo
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

# Run as ``python -P``, a script's own folder is not on sys.path; ``lab`` is the package beside it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def per_query(call, queries, repeat: int) -> float:
    """Microseconds per query of ``call(queries)``, best of ``repeat`` (the machine's noise only adds)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        call(queries)
        best = min(best, time.perf_counter() - started)
    return best / len(queries[0]) * 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a finished `python -P benchmarks/backends.py --out DIR` directory")
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--passes", type=int, default=9, help="alternating passes per index (default 9)")
    parser.add_argument("--results", default=RESULTS, help="where the report goes (default benchmarks/results)")
    args = parser.parse_args(argv)
    if args.queries < 1 or args.passes < 1:
        sys.exit("lookup_scores: --queries and --passes must be >= 1")
    if not os.path.isdir(os.path.join(args.run, "index")):
        sys.exit(f"lookup_scores: {args.run} holds no index/; run `python -P benchmarks/backends.py --out {args.run}` first")

    import polydom
    from lab.job import run_arguments, with_scores
    from polydom.demo.markdown import table

    clf = polydom.CostSensitiveClassifier.load(os.path.join(args.run, "index"))
    where = run_arguments(args.run)
    indexes = {scores: with_scores(clf, scores).index_ for scores in ("measured", "monotone")}
    rng = np.random.default_rng(0)
    sizes = rng.choice([float(s * s) for s in where.sides or (28, 50, 89, 158, 280)], args.queries)
    budgets = rng.choice(np.asarray(where.budgets, dtype=float), args.queries)

    def one_by_one(index):
        return lambda q: [index.lookup(s, b) for s, b in zip(q[0].tolist(), q[1].tolist())]

    timings = {name: {"lookup": [], "lookup_many": []} for name in indexes}
    for p in range(args.passes):
        for name in (list(indexes) if p % 2 == 0 else list(indexes)[::-1]):
            index = indexes[name]
            timings[name]["lookup"].append(per_query(one_by_one(index), (sizes, budgets), 3))
            timings[name]["lookup_many"].append(per_query(lambda q: index.lookup_many(*q), (sizes, budgets), 3))
    rows = []
    for name, index in indexes.items():
        t = timings[name]
        rows.append((name, str(len(index.candidates)), str(len(index.bounds)), str(sum(map(len, index.skylines))),
                     f"{np.median(t['lookup']):.3f} ({min(t['lookup']):.3f}–{max(t['lookup']):.3f})",
                     f"{np.median(t['lookup_many']):.4f} ({min(t['lookup_many']):.4f}–{max(t['lookup_many']):.4f})"))
    ratio = {k: float(np.median(np.array(timings["monotone"][k]) / np.array(timings["measured"][k])))
             for k in ("lookup", "lookup_many")}
    header = ("ranking", "candidates", "ranges", "skyline entries", "lookup µs/query, median (range)",
              "lookup_many µs/query, median (range)")
    text = (f"# Lookup speed by ranking\n\n`python -P benchmarks/lookup_scores.py {os.path.basename(args.run.rstrip('/'))}`: "
            f"{args.queries} random queries of the run's grid, best of 3 per pass, {args.passes} passes per index "
            "alternating in one process.\n\n" + table(header, rows) + "\n\n"
            f"Monotone over measured, median of the paired passes: lookup ×{ratio['lookup']:.2f}, "
            f"lookup_many ×{ratio['lookup_many']:.2f}.\n")
    print(text)
    os.makedirs(args.results, exist_ok=True)
    with open(os.path.join(args.results, "lookup-scores.md"), "w", encoding="utf-8") as fh:
        fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
