"""Reproduce the paper's synthetic experiments (Figs. 6-9) and print them beside the paper's numbers.

Metric 1  feature sets expanded vs number of features (cf_1: 1..15, cf_inf: 1..12), PolyDom at
          alpha in {1, 1.2}, Greedy, against NaiveExpandAll (2**|F|).
Metric 2  index entries: PolyDom vs PolyDomIndexAll vs NaiveLookup.
Metric 3  lookup time (median us): PolyDom vs NaiveLookup as the paper's Python scan and as a
          numpy scan, plus index construction time against candidates and crossings.
Metric 4  accuracy vs budget at item size 50, 12 features (Fig. 9), for every backend.

Means over ``--seeds`` seeds of :func:`polydom.make_synthetic`. Usage::

    python benchmarks/paper_synthetic.py                 # full run, a few minutes
    python benchmarks/paper_synthetic.py --quick         # fewer feature counts and seeds

Writes a markdown report (default ``benchmarks/results/paper_synthetic.md``).
"""

from __future__ import annotations

import argparse
import gc
import platform
import random
import statistics
import time
from pathlib import Path

import polydom

# The paper's Fig. 6 (read off the plot): expansions at 1/4/8/10/12 features.
PAPER_FIG6 = {
    ("cf1", 1.0): {1: 2, 4: 11, 8: 30, 10: 48, 12: 167},
    ("cf1", 1.2): {1: 2, 4: 10, 8: 18, 10: 21, 12: 86},
    ("cfinf", 1.0): {1: 2, 4: 16, 8: 256, 10: 1024, 12: 4096},
    ("cfinf", 1.2): {1: 2, 4: 16, 8: 76, 10: 113, 12: 159},
    ("cf1", "greedy"): {1: 1, 4: 11, 8: 34, 10: 57, 12: 86},
    ("cfinf", "greedy"): {1: 1, 4: 10, 8: 51, 10: 80, 12: 132},
}
# The paper's Fig. 7: index sizes at alpha = 1.2 (IndexAll, PolyDom a=1, PolyDom a=1.2, Naive).
PAPER_FIG7 = {
    "cf1": {8: (590, 190, 180, 20), 10: (1040, 290, 250, 25), 12: (6450, 440, 340, 85)},
    "cfinf": {8: (10300, 1400, 370, 100), 10: (29000, 4000, 880, 150), 12: (46500, 6100, 735, 150)},
}
# The paper's Fig. 9: accuracy at item size 50, 12 features.
FIG9_BUDGETS = [1, 50, 100, 250, 500, 1000, 3000, 10000]
PAPER_FIG9 = {
    ("cf1", "polydom a=1"): [.50, .50, .50, .758, .758, .758, .775, .775],
    ("cf1", "polydom a=1.2"): [.50, .50, .50, .758, .758, .758, .775, .775],
    ("cf1", "greedy"): [.50, .50, .50, .50, .50, .50, .775, .775],
    ("cf1", "greedy-acc"): [.50, .50, .50, .50, .50, .50, .775, .775],
    ("cf1", "greedy-cost"): [.50, .50, .50, .50, .50, .50, .50, .775],
    ("cfinf", "polydom a=1"): [.50, .50, .50, .758, .90, .965, .997, 1.0],
    ("cfinf", "polydom a=1.2"): [.50, .50, .50, .758, .90, .915, .945, .948],
    ("cfinf", "greedy"): [.50, .50, .50, .50, .50, .50, .78, 1.0],
    ("cfinf", "greedy-acc"): [.50, .50, .50, .50, .50, .50, .78, 1.0],
    ("cfinf", "greedy-cost"): [.50, .50, .50, .50, .50, .50, .50, 1.0],
}
K = {"cf1": 1, "cfinf": None}


def _has_greedy() -> bool:
    try:
        import polydom.greedy as greedy

        return hasattr(greedy, "build_greedy")
    except ImportError:
        return False


def metric1(seeds: list[int], counts: dict[str, list[int]], lines: list[str]) -> None:
    lines.append("## Metric 1 — feature sets expanded (Fig. 6)\n")
    lines.append("Mean over seeds; the paper's value (read off the plot) in parentheses.\n")
    greedy = _has_greedy()
    cols = ["PolyDom α=1", "PolyDom α=1.2"] + (["Greedy"] if greedy else [])
    for comb in ("cf1", "cfinf"):
        lines.append(f"\n### {comb}\n")
        lines.append("| features | NaiveExpandAll | " + " | ".join(cols) + " |")
        lines.append("|---|---|" + "---|" * len(cols))
        for nf in counts[comb]:
            cells = [str(2**nf)]
            for alpha in (1.0, 1.2):
                vals = []
                for seed in seeds:
                    inst = polydom.make_synthetic(nf, k=K[comb], seed=seed)
                    vals.append(polydom.build(inst.costs, inst.expand, alpha=alpha).stats["trained"])
                paper = PAPER_FIG6[(comb, alpha)].get(nf)
                cells.append(f"{statistics.mean(vals):.1f}" + (f" ({paper})" if paper else ""))
            if greedy:
                vals = []
                for seed in seeds:
                    inst = polydom.make_synthetic(nf, k=K[comb], seed=seed)
                    idx = polydom.build(inst.costs, inst.expand, backend="greedy", n0=1.0)
                    vals.append(idx.stats["expanded"])
                paper = PAPER_FIG6[(comb, "greedy")].get(nf)
                cells.append(f"{statistics.mean(vals):.1f}" + (f" ({paper})" if paper else ""))
            lines.append(f"| {nf} | " + " | ".join(cells) + " |")
            print(comb, nf, cells, flush=True)


def metric2(seeds: list[int], counts: list[int], lines: list[str]) -> None:
    lines.append("\n## Metric 2 — index entries (Fig. 7)\n")
    lines.append("Entries = stored feature-set references (sum of skyline lengths); NaiveLookup = candidates. "
                 "Paper values (α = 1.2 for IndexAll and NaiveLookup) in parentheses.\n")
    lines.append("| comb | features | IndexAll α=1.2 | PolyDom α=1 | PolyDom α=1.2 | NaiveLookup α=1.2 | crossings α=1 | interesting points α=1 |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for comb in ("cf1", "cfinf"):
        for nf in counts:
            every, pd1, pd12, naive, cross, inter = [], [], [], [], [], []
            for seed in seeds:
                inst = polydom.make_synthetic(nf, k=K[comb], seed=seed)
                a1 = polydom.build(inst.costs, inst.expand, alpha=1.0)
                a12 = polydom.build(inst.costs, inst.expand, alpha=1.2)
                every.append(polydom.PolyDomIndexAll.from_index(a12).stats["index_entries"])
                pd1.append(a1.stats["index_entries"])
                pd12.append(a12.stats["index_entries"])
                naive.append(a12.stats["candidates"])
                cross.append(a1.stats["crossings"])
                inter.append(a1.stats["interesting_points"])
            paper = PAPER_FIG7[comb].get(nf)
            p = [f" ({v})" for v in paper] if paper else [""] * 4
            m = statistics.mean
            lines.append(f"| {comb} | {nf} | {m(every):.0f}{p[0]} | {m(pd1):.0f}{p[1]} | {m(pd12):.0f}{p[2]} | "
                         f"{m(naive):.0f}{p[3]} | {m(cross):.0f} | {m(inter):.1f} |")
            print(comb, nf, m(every), m(pd1), m(pd12), m(naive), flush=True)


def _median_us(fn, queries, repeats: int = 3) -> float:
    """Median per-call time over ``queries``, best of ``repeats`` passes (GC off while timing)."""
    best = []
    clock = time.perf_counter_ns
    for _ in range(repeats):
        times = []
        gc.disable()
        try:
            for s, b in queries:
                t0 = clock()
                fn(s, b)
                times.append(clock() - t0)
        finally:
            gc.enable()
        best.append(statistics.median(times))
    return min(best) / 1000.0


def metric3(lines: list[str], configs: list[tuple[str, int, float]], n_queries: int) -> None:
    lines.append("\n## Metric 3 — lookup time and build time (Fig. 8)\n")
    lines.append(f"Median µs per lookup over {n_queries} random (size ∈ [1, 500], budget ∈ [0, max cost]) queries, "
                 "measured side by side in one process; ratio = scan / PolyDom.\n")
    lines.append("| instance | candidates | crossings | build s (explore / candidates / sweep) | PolyDom µs | "
                 "Naive Python µs | Naive numpy µs | × Python | × numpy |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for comb, nf, alpha in configs:
        inst = polydom.make_synthetic(nf, k=K[comb], seed=0)
        t0 = time.perf_counter()
        index = polydom.build(inst.costs, inst.expand, alpha=alpha)
        total = time.perf_counter() - t0
        naive = polydom.NaiveLookup(index)
        rng = random.Random(1)
        top = sum(c(500.0) for c in inst.costs.values())
        queries = [(rng.uniform(1, 500), rng.uniform(0, top)) for _ in range(n_queries)]
        pd = _median_us(index.lookup, queries)
        py = _median_us(naive.lookup, queries[: max(200, n_queries // 10)])
        npy = _median_us(naive.lookup_numpy, queries[: max(200, n_queries // 10)])
        st = index.stats
        lines.append(
            f"| {comb}, {nf} f, α={alpha} | {st['candidates']} | {st['crossings']} | {total:.2f} "
            f"({st['explore_seconds']:.2f} / {st['candidate_seconds']:.2f} / {st['sweep_seconds']:.2f}) | "
            f"{pd:.2f} | {py:.1f} | {npy:.1f} | {py / pd:.0f}× | {npy / pd:.1f}× |"
        )
        print(comb, nf, alpha, st["candidates"], st["crossings"], f"{total:.2f}s", pd, py, npy, flush=True)


def metric4(seeds: list[int], lines: list[str], size: float = 50.0, n_features: int = 12) -> None:
    greedy = _has_greedy()
    lines.append(f"\n## Metric 4 — accuracy vs budget at item size {size:g}, {n_features} features (Fig. 9)\n")
    lines.append("Mean accuracy of the chosen set over seeds; the paper's value in parentheses. "
                 "Greedy backends expand at n0 = 1 (the training size) and serve with the anytime walk.\n")
    methods = [("polydom a=1", dict(alpha=1.0)), ("polydom a=1.2", dict(alpha=1.2))]
    if greedy:
        methods += [(b, dict(backend=b, n0=1.0)) for b in ("greedy", "greedy-acc", "greedy-cost")]
    for comb in ("cf1", "cfinf"):
        lines.append(f"\n### {comb}\n")
        lines.append("| method | " + " | ".join(str(b) for b in FIG9_BUDGETS) + " |")
        lines.append("|---|" + "---|" * len(FIG9_BUDGETS))
        for name, kwargs in methods:
            per_budget = [[] for _ in FIG9_BUDGETS]
            for seed in seeds:
                inst = polydom.make_synthetic(n_features, k=K[comb], seed=seed)
                index = polydom.build(inst.costs, inst.expand, **kwargs)
                for i, b in enumerate(FIG9_BUDGETS):
                    per_budget[i].append(index.lookup(size, float(b)).accuracy)
            paper = PAPER_FIG9.get((comb, name))
            cells = [f"{statistics.mean(v):.3f}" + (f" ({paper[i]:.3f})" if paper else "") for i, v in enumerate(per_budget)]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
            print(comb, name, [f"{statistics.mean(v):.3f}" for v in per_budget], flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds per configuration (default 5)")
    parser.add_argument("--quick", action="store_true", help="fewer feature counts, 3 seeds")
    parser.add_argument("--queries", type=int, default=20000, help="lookups per timing (default 20000)")
    parser.add_argument("--out", default="benchmarks/results/paper_synthetic.md")
    args = parser.parse_args(argv)
    seeds = list(range(3 if args.quick else args.seeds))
    if args.quick:
        counts = {"cf1": [1, 4, 8, 10, 12], "cfinf": [1, 4, 8, 10]}
        m2 = [4, 8, 10]
        m3 = [("cf1", 12, 1.0), ("cfinf", 10, 1.0), ("cfinf", 12, 1.2)]
    else:
        counts = {"cf1": list(range(1, 16)), "cfinf": list(range(1, 13))}
        m2 = [4, 8, 10, 12]
        m3 = [("cf1", 12, 1.0), ("cf1", 12, 1.2), ("cfinf", 10, 1.0), ("cfinf", 12, 1.2), ("cfinf", 12, 1.0), ("cfinf", 14, 1.0)]
    lines = [
        "# polydom — the paper's synthetic experiments\n",
        f"Python {platform.python_version()} on {platform.machine()}, {len(seeds)} seeds, "
        f"`python benchmarks/paper_synthetic.py{' --quick' if args.quick else ''}`.\n",
    ]
    t0 = time.perf_counter()
    metric1(seeds, counts, lines)
    metric2(seeds, m2, lines)
    metric3(lines, m3, args.queries)
    metric4(seeds, lines)
    lines.append(f"\nTotal wall time {time.perf_counter() - t0:.0f} s.\n")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"report written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
