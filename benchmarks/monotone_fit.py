"""How fast is the monotone fit of a skyline search's scores, and does its solver path change them?

The bounded ranking (the default) fits the trained sets' scores isotonically on the subset order
(:func:`polydom.lattice.monotone_scores`) every time the trained sets or their scores change --
about ten times in a sixteen-feature fit. This times the two exact ways of solving that fit on
sets shaped like a skyline search's: ``centres`` random sets of ``items`` lattice items and every
set one move (add, drop, swap) from each, scored ``0.5 + 0.03 * |set|`` plus Gaussian noise with
standard errors like two-fold screening's.

- *one NNLS*: the active-set NNLS over every covering pair at once (``_project_dense``);
- *violated pairs*: the NNLS under the violated pairs alone, grown until nothing else is
  violated, each group of violations on its own (``_project_violated``, the path
  ``monotone_scores`` takes).

Each time is the median of ``--repeats`` runs, the two interleaved. Both must agree to 1e-9.

    python -P benchmarks/monotone_fit.py [--items 11,13,15,17] [--centres 12] [--repeats 5] [--out ...]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import random
import time

import numpy as np

from polydom.lattice import monotone
from polydom.lattice.featureset import popcount

HERE = pathlib.Path(__file__).resolve().parent


def search_like_sets(items: int, centres: int, seed: int) -> tuple[dict, dict]:
    """Scores and standard errors of ``centres`` random sets and everything one move from them."""
    rng = random.Random(seed)
    full = (1 << items) - 1
    masks = {0, full}
    for _ in range(centres):
        centre = rng.randrange(1 << items)
        inside = [1 << i for i in range(items) if centre >> i & 1]
        outside = [1 << i for i in range(items) if not centre >> i & 1]
        masks.add(centre)
        masks.update(centre | b for b in outside)
        masks.update(centre & ~d for d in inside)
        masks.update((centre & ~d) | b for d in inside for b in outside)
    acc = {m: min(1.0, max(0.0, 0.5 + 0.03 * popcount(m) + rng.gauss(0, 0.03))) for m in masks}
    se = {m: rng.uniform(0.015, 0.04) for m in masks}
    return acc, se


def problem(acc: dict, se: dict):
    """What ``monotone_scores`` hands its solver: scores, root weights and the covering pairs."""
    masks = np.fromiter(acc, dtype=np.int64, count=len(acc))
    y = np.array([acc[int(m)] for m in masks])
    root_w = 1.0 / np.array([se[int(m)] for m in masks])
    return (y, root_w, *monotone.cover_pairs(masks))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", default="11,13,15,17")
    parser.add_argument("--centres", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(HERE / "results" / "monotone-fit.md"))
    args = parser.parse_args(argv)
    rows = []
    for items in (int(k) for k in args.items.split(",")):
        y, root_w, lower, upper = problem(*search_like_sets(items, args.centres, args.seed + items))
        times = {"one NNLS": [], "violated pairs": []}
        for _ in range(args.repeats):
            for name, solve in (("one NNLS", monotone._project_dense), ("violated pairs", monotone._project_violated)):
                started = time.perf_counter()
                fit = solve(y, root_w, lower, upper)
                times[name].append(time.perf_counter() - started)
                if name == "one NNLS":
                    whole = fit
                elif fit is None or np.max(np.abs(fit - whole)) > 1e-9:
                    raise SystemExit(f"{items} items: the violated pairs' fit differs from one NNLS's")
        dense, violated = (float(np.median(times[n])) for n in times)
        rows.append((items, len(y), len(lower), dense, violated))
        print(f"{items} items: {len(y)} sets, {len(lower)} covering pairs; one NNLS {dense:.3f} s, "
              f"violated pairs {violated:.3f} s ({dense / violated:.1f}x)", flush=True)
    lines = [
        "# The monotone fit: one NNLS against the violated pairs", "",
        f"`python -P benchmarks/monotone_fit.py --items {args.items} --centres {args.centres} "
        f"--repeats {args.repeats}`. Load average at the end: {os.getloadavg()[0]:.1f}.", "",
        f"Sets: {args.centres} random sets of the lattice and every set one move from each (a skyline "
        "search's shape). Median of the runs, the two solvers interleaved; their fits agree to 1e-9.", "",
        "| items | sets | covering pairs | one NNLS (s) | violated pairs (s) | ratio |", "|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [f"| {i} | {n} | {p} | {d:.3f} | {v:.3f} | {d / v:.1f} |" for i, n, p, d, v in rows]
    pathlib.Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"report written to {args.out}")


if __name__ == "__main__":
    main()
