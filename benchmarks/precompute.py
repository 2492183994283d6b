"""Precompute wall time with 1 and 2 workers, and per-expansion overhead on loky vs Dask.

The workload is a real one: scikit-learn's digits, the 64 pixels split into ``--features``
groups (each a "feature"), and a black box that cross-validates a scikit-learn classifier on
the chosen groups -- the dominant offline cost the paper describes. Overhead is measured with a
black box that does nothing, so what remains is dispatch, pickling and result transfer.

    python benchmarks/precompute.py [--features 10] [--out benchmarks/results/precompute.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

import polydom


class DigitsBlackBox:
    """CV accuracy of a classifier on the digits' pixel groups in ``features`` (picklable)."""

    def __init__(self, n_features: int, seed: int = 0):
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        self.X, self.y = X, y
        self.groups = np.array_split(np.arange(64), n_features)
        self.names = [f"block{i:02d}" for i in range(n_features)]
        self.seed = seed

    def __call__(self, features: frozenset) -> float:
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import cross_val_score
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        if not features:
            return float(np.bincount(self.y).max() / len(self.y))
        cols = np.concatenate([self.groups[self.names.index(f)] for f in sorted(features)])
        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
        return float(cross_val_score(model, self.X[:, cols], self.y, cv=3).mean())

    def costs(self) -> dict:
        # Cost = pixels read, linear in the image side squared: any non-negative curves will do.
        return {name: [0.0, float(len(g))] for name, g in zip(self.names, self.groups)}


def _noop(features: frozenset) -> float:
    return 0.5 + 0.01 * len(features)


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features", type=int, default=10)
    parser.add_argument("--alpha", type=float, default=1.05)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="benchmarks/results/precompute.md")
    args = parser.parse_args(argv)

    box = DigitsBlackBox(args.features)
    costs = box.costs()
    lines = [
        "# polydom — precompute at scale\n",
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"`python benchmarks/precompute.py --features {args.features} --alpha {args.alpha}`.\n",
    ]

    from threadpoolctl import threadpool_limits

    serial, parallel = [], []
    index = None
    for _ in range(args.repeats):
        # One worker means one core: keep BLAS from spreading the serial build over both
        # (joblib gives each of its workers a share of the cores in the same way).
        with threadpool_limits(1):
            serial.append(_timed(lambda: polydom.build(costs, box, alpha=args.alpha)))
        parallel.append(_timed(lambda: polydom.build(costs, box, alpha=args.alpha, n_jobs=2)))
    index = polydom.build(costs, box, alpha=args.alpha)
    s, p = statistics.median(serial), statistics.median(parallel)
    lines += [
        "## Real precompute (digits pixel blocks, LogisticRegression, 3-fold CV per set)\n",
        f"{index.stats['trained']} sets trained per build; medians of {args.repeats} runs, alternated.\n",
        "One worker is limited to one BLAS thread; each of the two loky workers gets one core.\n",
        "| workers | wall s | speed-up |", "|---|---|---|",
        f"| 1 | {s:.2f} | 1.00× |", f"| 2 (loky) | {p:.2f} | {s / p:.2f}× |",
    ]
    print(f"serial {s:.2f}s, 2 workers {p:.2f}s, speed-up {s / p:.2f}x ({index.stats['trained']} sets)")

    inst_costs = {f"x{i}": [1.0] for i in range(10)}
    n_sets = 2**10
    over = {}
    base = statistics.median(_timed(lambda: polydom.build(inst_costs, _noop)) for _ in range(args.repeats))
    loky = statistics.median(_timed(lambda: polydom.build(inst_costs, _noop, n_jobs=2)) for _ in range(args.repeats))
    over["loky (2 workers)"] = (loky - base) / n_sets
    try:
        import distributed
        import joblib

        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, \
                distributed.Client(cluster), joblib.parallel_config(backend="dask"):
            dask_t = statistics.median(_timed(lambda: polydom.build(inst_costs, _noop, n_jobs=-1)) for _ in range(args.repeats))
        over["dask LocalCluster (2 processes)"] = (dask_t - base) / n_sets
    except ImportError:
        lines.append("\n(dask.distributed not installed: Dask overhead not measured)\n")
    lines += [
        "\n## Per-expansion overhead (no-op black box, 10 features, 1024 sets, alpha = 1)\n",
        f"In-process build: {base * 1e3:.0f} ms ({base / n_sets * 1e6:.0f} µs per set, exploration and index included).\n",
        "| engine | extra µs per set |", "|---|---|",
    ]
    for name, value in over.items():
        lines.append(f"| {name} | {value * 1e6:.0f} |")
        print(f"{name}: {value * 1e6:.0f} us per set")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"report written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
