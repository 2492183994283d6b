"""Fuzz the exact index against brute force on curves with wide dynamic ranges.

Random instances: up to 5 features, cost curves of degree <= 4 with coefficients from 1e-12 to
1e3 (a third of them zero), monotone accuracies, the default domain ``(0, inf)``. Each instance
is queried at sizes spread over ten decades and at budgets just below and above the costs of
random sets there; an answer is a mismatch when brute force over all ``2^|F|`` sets finds a more
accurate affordable set (``polydom.testing.BruteForce``, relative slack 1e-9).

    python benchmarks/fuzz_sweep.py --instances 2000 --seed 0

Prints the counts and writes ``benchmarks/results/fuzz_sweep.md``.
"""

from __future__ import annotations

import argparse
import pathlib
import time

import numpy as np

import polydom
from polydom.testing import BruteForce


def instance(rng: np.random.Generator):
    n = int(rng.integers(1, 6))
    names = [f"f{i}" for i in range(n)]
    costs = {}
    for name in names:
        degree = int(rng.integers(0, 5))
        coef = rng.uniform(1.0, 9.99, degree + 1) * 10.0 ** rng.integers(-12, 3, degree + 1)
        coef[rng.random(degree + 1) < 1 / 3] = 0.0
        costs[name] = coef.tolist()
    mono = {}
    for m in sorted(range(1 << n), key=int.bit_count):
        mono[m] = max([0.3 + 0.6 * rng.random()] + [mono[m & ~(1 << i)] for i in range(n) if m >> i & 1])
    acc = {frozenset(names[i] for i in range(n) if m >> i & 1): a for m, a in mono.items()}
    return costs, acc


def run(instances: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    counts = dict(instances=0, queries=0, mismatches=0, bad_instances=0, errors=0)
    for _ in range(instances):
        costs, acc = instance(rng)
        counts["instances"] += 1
        try:
            index = polydom.build(costs, acc.__getitem__)
        except Exception:  # noqa: BLE001 - a fuzzer counts every failure kind
            counts["errors"] += 1
            continue
        brute = BruteForce(costs, acc.__getitem__)
        bad = False
        for size in 10.0 ** rng.uniform(-5, 5, 20):
            set_costs = brute.costs_at(size)
            for budget in rng.choice(set_costs, min(6, len(set_costs)), replace=False):
                for b in (budget * 0.999, budget * 1.001):
                    counts["queries"] += 1
                    try:
                        brute.check(index.lookup(size, float(b)), size, float(b))
                    except AssertionError:
                        counts["mismatches"] += 1
                        bad = True
        counts["bad_instances"] += bad
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(pathlib.Path(__file__).parent / "results" / "fuzz_sweep.md"))
    args = parser.parse_args()
    t0 = time.perf_counter()
    counts = run(args.instances, args.seed)
    seconds = time.perf_counter() - t0
    lines = [
        "# Sweep fuzzing against brute force (wide dynamic ranges)",
        "",
        f"`python benchmarks/fuzz_sweep.py --instances {args.instances} --seed {args.seed}` ({seconds:.0f} s)",
        "",
        "| instances | queries | mismatching queries | instances with a mismatch | build errors |",
        "|---|---|---|---|---|",
        f"| {counts['instances']} | {counts['queries']} | {counts['mismatches']} | {counts['bad_instances']} | {counts['errors']} |",
    ]
    print("\n".join(lines))
    pathlib.Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
