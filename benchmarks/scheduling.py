"""Parallel scheduling against the ideal: a build whose black box only sleeps, per engine and workers.

The black box sleeps ``--sleep`` seconds per feature set (50 ms) and returns a fixed accuracy, so
that many workers overlap without needing cores: what remains is the engine's own scheduling --
when work is submitted, what each task carries, how results come back. ``e=1`` prunes nothing,
so all ``2**features`` sets are trained (512 for nine features).

For every engine (loky; a Dask ``LocalCluster`` of single-threaded worker processes) and number
of workers the engine is started first (a flat map of no-op calls starts its workers), then

* the build: ``polydom.build(costs, box, alpha=1, e=1, n_jobs=workers)`` (``n_jobs=-1`` on Dask,
  which uses the cluster's workers), its wall time and the sets it trained;
* the flat map: ``joblib.Parallel(n_jobs=...)`` of as many sleeping calls on the same engine as
  the build needed (sets it started on idle workers and nobody asked for are left out);
* the ideal: the larger of ``sets * sleep / workers`` and the flat map's time; the ratio is the
  build's wall time over the ideal (the bar: at most 1.5).

Each build's index is compared with the serial build's (one worker, loky: candidates, scores,
bounds, skylines, explored sets). With ``--payload-mb`` the black box also holds an array of that
size (a data set), to show what each task carries.

    python benchmarks/scheduling.py [--features 9] [--workers 1,4,16] [--engines loky,dask]
        [--out benchmarks/results/scheduling.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import sys
import time
import zlib
from pathlib import Path

import numpy as np


class SleepingBox:
    """Sleeps, then returns a fixed accuracy of the set (picklable; the same in every process)."""

    def __init__(self, names, sleep: float, payload_mb: float = 0.0, noise: float = 0.02):
        self.names = list(names)
        self.sleep = sleep
        self.noise = noise
        self.payload = np.arange(int(payload_mb * 2**20) // 8, dtype=np.float64)

    def __call__(self, features) -> float:
        time.sleep(self.sleep)
        weight = sum(1 + zlib.crc32(f.encode()) % 7 for f in features)
        noise = zlib.crc32("+".join(sorted(features)).encode()) % 1000 / 1000 * self.noise
        return 0.4 + 0.5 * weight / (7 * len(self.names)) + noise


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


def _flat_map(n_calls: int, n_jobs: int, sleep: float) -> float:
    import joblib

    began = time.perf_counter()
    joblib.Parallel(n_jobs=n_jobs)(joblib.delayed(_sleep)(sleep) for _ in range(n_calls))
    return time.perf_counter() - began


def _fingerprint(index) -> tuple:
    return (tuple(index.candidates), tuple(index.candidate_accuracy), tuple(index.bounds),
            repr(index.skylines), tuple(sorted(index.explored)))


def _measure(engine: str, workers: int, args, reference) -> list[dict]:
    """Build and flat map, ``args.repeats`` times each, on one started engine."""
    import polydom

    names = [f"f{i}" for i in range(args.features)]
    costs = {name: [1.0 + i] for i, name in enumerate(names)}
    box = SleepingBox(names, args.sleep, args.payload_mb, args.noise)
    n_jobs = -1 if engine == "dask" else workers
    _flat_map(2 * workers, n_jobs, 0.0)  # start the engine's workers
    rows = []
    repeats = 1 if workers == 1 else args.repeats
    for _ in range(repeats):
        began = time.perf_counter()
        index = polydom.build(costs, box, alpha=1.0, e=_e(args.e), n_jobs=n_jobs)
        build = time.perf_counter() - began
        # The flat map makes the calls the build needed; sets started on idle workers and never
        # asked for (``speculative``) are the build's own overhead, not part of the ideal.
        guesses = index.stats.get("speculative", 0)
        sets = index.stats["trained"] - guesses
        flat = _flat_map(sets, n_jobs, args.sleep)
        rows.append(dict(build=build, flat=flat, sets=sets, speculative=guesses, fingerprint=_fingerprint(index)))
        if reference is None:  # the first build is the serial one
            reference = rows[-1]["fingerprint"]
        rows[-1]["same"] = rows[-1]["fingerprint"] == reference
    return rows


def _e(text: str):
    return "auto" if text == "auto" else float(text)


def _run(engine: str, workers: int, args, reference):
    if engine == "loky":
        return _measure(engine, workers, args, reference)
    import distributed
    import joblib

    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=50) as cluster:
        with distributed.Client(cluster):
            with joblib.parallel_config(backend="dask"):
                return _measure(engine, workers, args, reference)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features", type=int, default=9)
    parser.add_argument("--sleep", type=float, default=0.05)
    parser.add_argument("--workers", default="1,4,16")
    parser.add_argument("--engines", default="loky,dask")
    parser.add_argument("--repeats", type=int, default=2, help="builds per cell with more than one worker")
    parser.add_argument("--payload-mb", type=float, default=0.0)
    parser.add_argument("--noise", type=float, default=0.02,
                        help="spread of each set's score around a monotone trend (0.2: far from monotone)")
    parser.add_argument("--e", default="1", help="the exploration's tolerance: 1 (every set trained, at once), 0 or "
                                                 "auto (the scores are not monotone: the explorer waits on results)")
    parser.add_argument("--label", default="", help="what code was measured, for the report")
    parser.add_argument("--note", default="", help="a line for the report (the machine's state)")
    parser.add_argument("--out", default="benchmarks/results/scheduling.md")
    args = parser.parse_args(argv)
    workers_list = [int(w) for w in args.workers.split(",")]
    engines = args.engines.split(",")

    import joblib

    import polydom

    reference = None
    if 1 not in workers_list or "loky" not in engines:  # the serial build, for the comparison
        names = [f"f{i}" for i in range(args.features)]
        costs = {name: [1.0 + i] for i, name in enumerate(names)}
        reference = _fingerprint(polydom.build(costs, SleepingBox(names, 0.0, 0.0, args.noise), alpha=1.0,
                                               e=_e(args.e)))
    lines = [
        "# polydom — parallel scheduling against the ideal\n",
        f"Python {platform.python_version()}, joblib {joblib.__version__}, {os.cpu_count()} CPUs "
        f"(load average at start {os.getloadavg()[0]:.1f}), polydom {getattr(polydom, '__version__', '')}"
        f"{f' ({args.label})' if args.label else ''}.",
        f"A black box that sleeps {args.sleep * 1000:.0f} ms per set, {args.features} features, `e={args.e}` "
        f"({'every set trained' if args.e == '1' else 'scores not monotone: the explorer waits on results'})"
        f"{f', {args.payload_mb:g} MB array in the black box' if args.payload_mb else ''}; "
        "Dask: `LocalCluster(n_workers=w, threads_per_worker=1, processes=True)`. "
        "Engine started before timing (a flat map of no-op calls); build and flat map alternate.\n",
        f"    python benchmarks/scheduling.py {shlex.join(argv if argv is not None else sys.argv[1:])}\n",
        *([args.note + "\n"] if args.note else []),
        "ideal = max(sets x sleep / workers, flat map); ratio = build / ideal (median over repeats; the bar: <= 1.5).\n",
        "*sets* are the calls the build needed (the flat map makes as many); *guesses* (median) the sets "
        "started on idle workers that nobody asked for, not counted in the ideal.\n",
        "| workers | engine | sets | guesses | build (s) | flat map (s) | ideal (s) | ratio | index as serial |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    print("\n".join(lines), flush=True)
    for workers in workers_list:
        for engine in engines:
            rows = _run(engine, workers, args, reference)
            if reference is None:
                reference = rows[0]["fingerprint"]
            build = statistics.median(r["build"] for r in rows)
            flat = statistics.median(r["flat"] for r in rows)
            sets = rows[0]["sets"]
            ideal = max(sets * args.sleep / workers, flat)
            same = "yes" if all(r["same"] for r in rows) else "NO"
            runs = ", ".join(f"{r['build']:.2f}" for r in rows)
            guesses = statistics.median(r["speculative"] for r in rows)
            line = (f"| {workers} | {engine} | {sets} | {guesses:g} | {build:.2f} ({runs}) | {flat:.2f} | {ideal:.2f} | "
                    f"{build / ideal:.2f} | {same} |")
            lines.append(line)
            print(line, flush=True)
    lines.append(f"\nLoad average at end {os.getloadavg()[0]:.1f}.")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
