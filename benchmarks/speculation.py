"""Speculation served for real: a demo run's classifier with and without ``speculate``, interleaved.

The demo judges ``speculate=True`` on a replay of recorded feature times, where an abandoned
feature costs nothing after its deadline. Served for real, the abandoned computation keeps a
worker thread busy while the next requests run. This serves held-out images of a finished
``benchmarks/backends.py`` run one after another, each once with ``speculate=True`` and once with
``speculate=False`` (two classifiers loaded from the run's index, each with its own serving
guards; the order of the two flips at random per image), with features computed now, and prints
per budget: the share of answers over budget, on-time accuracy (late answers count wrong) with its
standard error, and how often a feature was tried past its guard and abandoned.

Run from the project root (quiet machine)::

    python benchmarks/speculation.py --out RUN [--images 300] [--report benchmarks/results/speculation-digits.md]
"""

from __future__ import annotations

import os
import sys
import argparse
import warnings

import numpy as np

import polydom
# Run as ``python -P``, a script's own folder is not on sys.path; ``lab`` is the package beside it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lab.job import add_run_arguments, load_run_split, run_arguments  # noqa: E402
from polydom.demo.stats import mean_se


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(parser)
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--budgets", type=float, nargs="+", default=[0.0005, 0.002])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--report", default=None, help="also write the lines printed to this Markdown file")
    args = parser.parse_args(argv)
    dataset = run_arguments(args.out).dataset
    warnings.simplefilter("ignore")
    images, labels, _, test = load_run_split(args)
    rng = np.random.default_rng(args.seed)
    pick = rng.choice(test, min(args.images, len(test)), replace=False)
    # Two servers, each learning its own guards as a service would.
    served = {flag: polydom.CostSensitiveClassifier.load(f"{args.out}/index").set_params(
                  serving=polydom.Serving(speculate=flag)).server()
              for flag in (True, False)}
    lines = [f"{len(pick)} held-out images of {dataset}, each served with and without speculate"]
    print(lines[0])
    for budget in args.budgets:
        rows = {True: [], False: []}
        for i in pick:
            order = (True, False) if rng.random() < 0.5 else (False, True)
            for flag in order:
                (e,) = served[flag].explain([images[i]], budget=budget)
                kinds = {k for k, _ in e.steps}
                rows[flag].append((e.measured_cost > budget, e.label == labels[i], "speculate" in kinds, "abandon" in kinds))
        for flag in (True, False):
            late, right, tried, abandoned = np.array(rows[flag]).T
            on_time = mean_se(right & ~late)
            lines.append(f"{budget * 1e3:g} ms, speculate={flag}: over budget {late.mean():.1%}, on-time accuracy "
                         f"{on_time.text()}, tried past the guard {tried.mean():.1%}, "
                         f"abandoned {abandoned.mean():.1%}")
            print(lines[-1])
    if args.report:
        from pathlib import Path

        Path(args.report).parent.mkdir(parents=True, exist_ok=True)
        Path(args.report).write_text("# Speculation served for real\n\n" + "\n".join(f"* {line}" for line in lines) + "\n")


if __name__ == "__main__":
    main()
