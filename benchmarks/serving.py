"""Serving benchmark: lookup latency of a stored index, batch throughput, open time, bytes on disk.

Measures, side by side in one run on one synthetic instance (``cf_inf``, 14 features, seed 2:
about 1000 candidates):

* ``lookup`` p50 / p99 per call for the index loaded from LMDB (``polydom.load``), the same index
  in memory (as ``polydom.build`` returned it) and ``NaiveLookup`` (a scan of every candidate),
  on the same queries, interleaved in rounds so drift hits all three alike; targets: loaded
  p50 <= 5 us, in memory <= 3 us;
* ``lookup_many`` microseconds per query on 10^5 queries (target <= 0.3 us);
* open time of ``polydom.load`` (median; each load opens the environment afresh);
* bytes on disk of PolyDom versus PolyDomIndexAll (a skyline at every crossing).

Answers are checked equal across the three before anything is timed. Per-call times include
one ``perf_counter_ns`` pair, whose own cost is reported.

Run from the project root::

    python benchmarks/serving.py [--features 14] [--seed 2] [--out benchmarks/results/serving.md]
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

import polydom

TARGETS = {"loaded p50": 5.0, "memory p50": 3.0, "lookup_many": 0.3}


def make_queries(index, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Sizes across every range (and past the last bound), budgets up to the full set's cost."""
    rng = np.random.default_rng(seed)
    sizes = rng.uniform(0.0, 1.2 * max(index.bounds[-1], 1.0), count)
    full = np.zeros(max(len(c.coefficients) for c in index.costs))
    for curve in index.costs:
        full[: len(curve.coefficients)] += curve.coefficients
    full_cost = np.polynomial.polynomial.polyval(sizes, full)
    return sizes, rng.uniform(0.0, 1.0, count) * full_cost


def per_call_ns(lookup, sizes, budgets) -> list[int]:
    clock, out = time.perf_counter_ns, []
    append = out.append
    for n, c in zip(sizes, budgets):
        t = clock()
        lookup(n, c)
        append(clock() - t)
    return out


def timer_overhead_ns() -> float:
    clock = time.perf_counter_ns
    samples = []
    for _ in range(20000):
        t = clock()
        samples.append(clock() - t)
    return statistics.median(samples)


def percentile(samples, q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]


def directory_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def run(args) -> dict:
    k = None if args.k in ("inf", "none", "None") else int(args.k)
    inst = polydom.make_synthetic(args.features, k=k, seed=args.seed)
    t0 = time.perf_counter()
    memory = polydom.build(inst.costs, inst.expand)
    build_s = time.perf_counter() - t0
    print(f"built {memory!r} in {build_s:.1f} s", flush=True)
    if len(memory.candidates) < 1000:
        print(f"warning: only {len(memory.candidates)} candidates (< 1000); try --features 14 --seed 2", flush=True)

    work = Path(args.workdir or tempfile.mkdtemp(prefix="polydom-serving-"))
    path = work / "polydom"
    t0 = time.perf_counter()
    memory.save(path)
    save_s = time.perf_counter() - t0

    gc.collect()
    opens = []
    for _ in range(args.opens):
        t0 = time.perf_counter()
        loaded = polydom.load(path)
        opens.append(time.perf_counter() - t0)
        del loaded  # unpins the version: the next load opens the environment again
    loaded = polydom.load(path)
    naive = polydom.NaiveLookup(memory)

    sizes, budgets = make_queries(memory, args.queries, args.seed)
    few = slice(0, args.naive_queries)
    for n, c in zip(sizes[few], budgets[few]):
        want = memory.lookup(n, c)
        assert loaded.lookup(n, c) == want and naive.lookup(n, c) == want, (n, c)
    for n, c in zip(sizes, budgets):
        assert loaded.lookup(n, c) == memory.lookup(n, c), (n, c)
    print("answers identical (loaded = in memory = NaiveLookup)", flush=True)

    samples = {"loaded (LMDB)": [], "in memory": [], "NaiveLookup": []}
    chunks = np.array_split(np.arange(args.queries), args.rounds)
    naive_chunks = np.array_split(np.arange(args.naive_queries), args.rounds)
    gc.disable()
    try:
        for chunk, naive_chunk in zip(chunks, naive_chunks):
            samples["loaded (LMDB)"] += per_call_ns(loaded.lookup, sizes[chunk].tolist(), budgets[chunk].tolist())
            samples["in memory"] += per_call_ns(memory.lookup, sizes[chunk].tolist(), budgets[chunk].tolist())
            samples["NaiveLookup"] += per_call_ns(naive.lookup, sizes[naive_chunk].tolist(), budgets[naive_chunk].tolist())
    finally:
        gc.enable()
    overhead = timer_overhead_ns()

    batch_sizes, batch_budgets = make_queries(memory, args.batch, args.seed + 1)
    batch = {}
    for name, index in (("loaded (LMDB)", loaded), ("in memory", memory)):
        index.lookup_many(batch_sizes[:1000], batch_budgets[:1000])  # warm up
        times = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            index.lookup_many(batch_sizes, batch_budgets)
            times.append(time.perf_counter() - t0)
        batch[name] = statistics.median(times) / args.batch * 1e6
    one = loaded.lookup_many(batch_sizes[:2000], batch_budgets[:2000])
    assert all(one[i] == loaded.lookup(batch_sizes[i], batch_budgets[i]) for i in range(2000))

    disk = {"PolyDom": (directory_bytes(path / os.readlink(path / "current")), sum(map(len, memory.skylines)))}
    if not args.no_index_all:
        t0 = time.perf_counter()
        every = polydom.PolyDomIndexAll.from_index(memory)
        every.save(work / "index-all")
        disk["PolyDomIndexAll"] = (
            directory_bytes(work / "index-all" / os.readlink(work / "index-all" / "current")),
            sum(map(len, every.skylines)),
        )
        print(f"PolyDomIndexAll built and saved in {time.perf_counter() - t0:.1f} s", flush=True)

    return {
        "instance": f"make_synthetic({args.features}, k={k}, seed={args.seed})",
        "index": repr(memory),
        "candidates": len(memory.candidates),
        "build_s": build_s,
        "save_s": save_s,
        "open_ms": (statistics.median(opens) * 1e3, min(opens) * 1e3, max(opens) * 1e3),
        "latency": {
            name: (percentile(s, 0.5) / 1e3, percentile(s, 0.99) / 1e3, len(s)) for name, s in samples.items()
        },
        "timer_overhead_us": overhead / 1e3,
        "batch_us": batch,
        "disk": disk,
        "platform": f"Python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}, {os.cpu_count()} CPUs",
    }


def report(r: dict) -> str:
    def mark(ok: bool) -> str:
        return "yes" if ok else "**no**"

    lines = [
        "# Serving benchmark",
        "",
        f"Instance: `{r['instance']}` -> `{r['index']}` ({r['candidates']} candidates); built in "
        f"{r['build_s']:.1f} s, saved in {r['save_s'] * 1e3:.0f} ms. {r['platform']}.",
        "",
        "## lookup latency (per call, same queries, interleaved)",
        "",
        "| index | p50 (us) | p99 (us) | calls | target p50 | met |",
        "|---|---:|---:|---:|---:|---|",
    ]
    targets = {"loaded (LMDB)": TARGETS["loaded p50"], "in memory": TARGETS["memory p50"]}
    for name, (p50, p99, calls) in r["latency"].items():
        target = targets.get(name)
        lines.append(
            f"| {name} | {p50:.2f} | {p99:.2f} | {calls} | {'' if target is None else f'<= {target:g}'} | "
            f"{'' if target is None else mark(p50 <= target)} |"
        )
    lines += [
        "",
        f"Each call's time includes one `perf_counter_ns` pair ({r['timer_overhead_us']:.3f} us).",
        "",
        "## lookup_many (10^5 queries, median of rounds)",
        "",
        "| index | us per query | target | met |",
        "|---|---:|---:|---|",
    ]
    for name, us in r["batch_us"].items():
        lines.append(f"| {name} | {us:.3f} | <= {TARGETS['lookup_many']:g} | {mark(us <= TARGETS['lookup_many'])} |")
    median, lo, hi = r["open_ms"]
    lines += [
        "",
        "## open",
        "",
        f"`polydom.load`: median {median:.1f} ms (min {lo:.1f}, max {hi:.1f}); metadata checks and LMDB open are a "
        "few ms, the rest is rebuilding the in-memory lookup structures.",
        "",
        "## bytes on disk",
        "",
        "| index | bytes | skyline entries |",
        "|---|---:|---:|",
    ]
    for name, (size, entries) in r["disk"].items():
        lines.append(f"| {name} | {size:,} | {entries:,} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--features", type=int, default=14)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--k", default="inf", help="combiner cf_k; 'inf' for cf_inf (default)")
    parser.add_argument("--queries", type=int, default=20000, help="single lookups per index")
    parser.add_argument("--naive-queries", type=int, default=2000, help="single lookups for NaiveLookup (slow)")
    parser.add_argument("--batch", type=int, default=100_000, help="queries per lookup_many call")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--opens", type=int, default=15)
    parser.add_argument("--no-index-all", action="store_true", help="skip building PolyDomIndexAll (slow)")
    parser.add_argument("--workdir", default=None, help="where to save the indexes (default: a temp dir)")
    parser.add_argument("--out", default=str(HERE / "results" / "serving.md"))
    args = parser.parse_args(argv)
    result = run(args)
    text = report(result)
    print()
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
