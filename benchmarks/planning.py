"""Planning benchmark: one total budget over a batch, and a mean budget over a stream.

On one synthetic instance (``make_synthetic(5, k=None, seed=1)``: about 12 options per item at
sizes 1..100) and a batch of 10,000 item sizes drawn uniformly from that range:

* **batch**: for a few total budgets (fractions of what serving every item its most accurate
  set would cost), the greedy LP-hull plan against the integer program
  (``plan_batch(..., exact=True)``, HiGHS through :func:`scipy.optimize.milp`): wall time of
  ``plan_batch`` (median over runs; the shared ``options_at`` gathering is timed on its own),
  mean accuracy of both, the LP bound, and the gain over an equal per-item split (each item
  looked up with ``total_budget / N``, i.e. per-item PolyDom);
* **stream**: ``StreamBudget`` fitted on 2,000 sampled sizes, replayed on 100,000 fresh ones,
  against per-item lookup at the mean budget: realised mean cost and accuracy.

Run from the project root::

    python benchmarks/planning.py [--items 10000] [--runs 3] [--out benchmarks/results/planning.md]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import scipy

import polydom
from polydom.index.planning import option_table, solve

HERE = Path(__file__).resolve().parent
FRACTIONS = (0.02, 0.05, 0.1, 0.2, 0.4)
#: Budgets at which the integer program is also timed (it takes seconds to minutes each).
MILP_FRACTIONS = (0.02, 0.05, 0.2)


def timed(call, runs: int):
    """``(median seconds, last result)`` over ``runs`` calls."""
    seconds, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = call()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), result


def batch_rows(index, sizes, runs: int, time_limit: float):
    n = len(sizes)
    gather, table = timed(lambda: option_table(index, sizes), runs)
    most = float(table.costs[np.arange(n), table.counts - 1].sum())
    rows = []
    for fraction in FRACTIONS:
        budget = fraction * most
        greedy_s, greedy = timed(lambda: index.plan_batch(sizes, budget), max(runs, 5))
        solve_s, _ = timed(lambda: solve(table, budget), max(runs, 5))
        equal = index.lookup_many(sizes, np.full(n, budget / n))
        row = {
            "fraction": fraction, "budget": budget, "greedy_s": greedy_s, "solve_s": solve_s,
            "greedy": greedy.mean_accuracy,
            "bound": greedy.accuracy_bound, "equal": float(equal.accuracy.mean()),
            "within": greedy.total_cost <= budget, "milp_s": None, "milp_solve_s": None, "milp": None,
            "milp_optimal": None,
        }
        if fraction in MILP_FRACTIONS:
            milp_s, milp = timed(lambda: index.plan_batch(sizes, budget, exact=True, time_limit=time_limit), runs)
            milp_solve_s, _ = timed(lambda: solve(table, budget, exact=True, time_limit=time_limit), runs)
            row.update(milp_s=milp_s, milp_solve_s=milp_solve_s, milp=milp.mean_accuracy, milp_optimal=milp.optimal,
                       within=row["within"] and milp.total_cost <= budget)
        rows.append(row)
        print(f"budget {fraction:>4.0%}: greedy {greedy_s * 1e3:7.1f} ms acc {row['greedy']:.6f}"
              + (f" | milp {row['milp_s']:6.2f} s acc {row['milp']:.6f}" if row["milp"] is not None else "")
              + f" | equal split {row['equal']:.6f}", file=sys.stderr, flush=True)
    return gather, table, rows


def stream_rows(index, seed: int):
    rng = np.random.default_rng(seed + 1)
    sample, replay = rng.uniform(1, 100, 2_000), rng.uniform(1, 100, 100_000)
    costs = option_table(index, sample).costs
    typical = float(np.nanmedian(np.where(np.isfinite(costs), costs, np.nan)))
    rows = []
    for scale in (0.25, 0.5, 1.0, 2.0):
        mean_budget = scale * typical
        stream = polydom.StreamBudget(index, mean_budget, sizes=sample)
        start = time.perf_counter()
        served = stream.choose_many(replay)
        seconds = time.perf_counter() - start
        per_item = index.lookup_many(replay, np.full(len(replay), mean_budget))
        guarded = polydom.StreamBudget(index, mean_budget, sizes=sample, horizon=len(replay))
        kept = guarded.choose_many(np.sort(replay)[::-1])  # largest items first
        rows.append({
            "budget": mean_budget, "price": stream.price_, "fraction": stream.tie_fraction_,
            "cost": float(served.cost.mean()), "acc": float(served.accuracy.mean()),
            "per_item_cost": float(per_item.cost.mean()), "per_item_acc": float(per_item.accuracy.mean()),
            "guarded_cost": math.fsum(kept.cost.tolist()) / len(replay), "guarded_acc": float(kept.accuracy.mean()),
            "us_per_item": seconds / len(replay) * 1e6,
        })
    return rows


def report(args, instance, gather, table, rows, stream) -> str:
    n = len(table)
    lines = [
        "# Planning benchmark",
        "",
        f"Instance: `make_synthetic(5, k=None, seed={args.seed})`, PolyDom backend; {n:,} item sizes uniform in "
        f"[1, 100]; {table.counts.mean():.1f} options per item on average (max {table.counts.max()}). "
        f"Python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs. Command: `python benchmarks/planning.py --items {n} "
        f"--runs {args.runs}`.",
        "",
        "## Batch: one total budget",
        "",
        f"Budget = fraction of what the most accurate set for every item would cost together. Times are "
        f"`plan_batch` wall time, medians (greedy over {max(args.runs, 5)} runs, milp over {args.runs}); both "
        f"include gathering the options ({gather * 1e3:.0f} ms of `options_at` calls, one per distinct size); "
        f"the *solve* columns time `polydom.index.planning.solve` on the gathered options alone. milp runs at its "
        f"default gap (`mip_rel_gap=1e-4`) with `time_limit={args.time_limit:g}`. "
        f"Accuracies are the plans' mean accuracy; *LP bound* is the relaxation's value (no plan does better); "
        f"*equal split* looks each item up with `total_budget / N`.",
        "",
        "| budget | greedy (ms) | greedy solve (ms) | milp (s) | milp solve (s) | speed-up | speed-up of the solve | "
        "greedy acc | milp acc | greedy - milp | LP bound | equal split | gain over equal (points) | within budget |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        milp = r["milp"] is not None
        lines.append(
            f"| {r['fraction']:.0%} | {r['greedy_s'] * 1e3:.1f} | {r['solve_s'] * 1e3:.1f} | "
            + (f"{r['milp_s']:.2f}{'' if r['milp_optimal'] else ' (limit)'} | {r['milp_solve_s']:.2f} | "
               f"{r['milp_s'] / r['greedy_s']:.0f}x | {r['milp_solve_s'] / r['solve_s']:.0f}x | "
               if milp else " |  |  |  | ")
            + f"{r['greedy']:.6f} | " + (f"{r['milp']:.6f} | {r['greedy'] - r['milp']:+.1e} | " if milp else " |  | ")
            + f"{r['bound']:.6f} | {r['equal']:.4f} | {100 * (r['greedy'] - r['equal']):+.2f} | "
            f"{'yes' if r['within'] else 'NO'} |"
        )
    lines += [
        "",
        "## Stream: a mean budget per item",
        "",
        "`StreamBudget` fitted on 2,000 sampled sizes, replayed on 100,000 fresh sizes from the same "
        "distribution (deterministic tie alternation), against per-item lookup at the mean budget. *Guarded*: "
        "the same replay sorted largest first with `horizon=100000`, so the guard has to act; its total "
        "never exceeds `horizon * mean_budget`.",
        "",
        "| mean budget | price | tie fraction | realised mean cost | cost / budget | accuracy | per-item accuracy | "
        "per-item mean cost | guarded cost / budget | guarded accuracy | us per item |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in stream:
        lines.append(
            f"| {r['budget']:.1f} | {r['price']:.3g} | {r['fraction']:.3f} | {r['cost']:.1f} | "
            f"{r['cost'] / r['budget']:.4f} | {r['acc']:.4f} | {r['per_item_acc']:.4f} | {r['per_item_cost']:.1f} | "
            f"{r['guarded_cost'] / r['budget']:.4f} | {r['guarded_acc']:.4f} | {r['us_per_item']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=300.0)
    parser.add_argument("--out", default=str(HERE / "results" / "planning.md"))
    args = parser.parse_args(argv)
    instance = polydom.make_synthetic(5, k=None, seed=args.seed)
    index = polydom.build(instance.costs, instance.expand)
    sizes = np.random.default_rng(args.seed).uniform(1, 100, args.items)
    gather, table, rows = batch_rows(index, sizes, args.runs, args.time_limit)
    stream = stream_rows(index, args.seed)
    text = report(args, instance, gather, table, rows, stream)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
