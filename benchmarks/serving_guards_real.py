"""Serving guards on a real request path: the working tree's against a git revision's, interleaved.

``benchmarks/serving_guards.py`` judges guards on replayed feature times, where a call never
takes longer than it did when the demo measured it. A real process has calls far above any
curve (a pause, a cold cache), and a guard that then refuses a feature also stops learning from
it. This serves held-out images of a finished ``benchmarks/backends.py`` run one after another with two
classifiers loaded from its index: one learns its serving guards with the working tree's
``polydom.index.serving.guards``, the other with that module as of ``--against`` (the order of the
two flips at random per image; features computed now, on this machine). Per seed and budget it
prints the share of answers over budget, of answers that computed no feature, on-time accuracy
(late answers count wrong) and the paired difference, each accuracy with its standard error.

Run from the project root (quiet machine)::

    python benchmarks/serving_guards_real.py --out RUN --against REV [--report benchmarks/results/serving-guards-real-digits.md]
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

import numpy as np

import polydom
from polydom.demo.stats import mean_se

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # sibling helpers, under python -P too
from lab.job import add_run_arguments, load_run_split, run_arguments  # noqa: E402
from revision import module_at, short_name  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(parser)
    parser.add_argument("--against", required=True, help="the git revision whose serving guards to compare with")
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--budgets", type=float, nargs="+", default=[0.0005, 0.002])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--report", default=None, help="also write the lines printed to this Markdown file")
    args = parser.parse_args(argv)
    dataset = run_arguments(args.out).dataset
    warnings.simplefilter("ignore")
    revision = short_name(args.against)
    other = module_at(revision, "index/serving/guards.py")
    images, labels, _, test = load_run_split(args)
    lines = [
        f"# Serving guards served for real: working tree against {revision} ({dataset})",
        "",
        f"{args.images} held-out images per seed, each served by both classifiers (fresh per seed, learning from"
        " scratch), budgets in turn; late = measured extraction time over budget; accuracies on time, ± one"
        " standard error; the gain is paired (same images).",
        "",
        "| seed | budget (ms) | late (tree / rev) | no feature (tree / rev) | on-time accuracy, tree | on-time accuracy, rev | gain |",
        "|---|---|---|---|---|---|---|",
    ]
    print("\n".join(lines))
    for seed in args.seeds:
        rng = np.random.default_rng(seed)
        pick = rng.choice(test, min(args.images, len(test)), replace=False)
        served = {}
        for which in ("tree", "rev"):
            clf = polydom.CostSensitiveClassifier.load(f"{args.out}/index")
            clf.planner_ = clf.server().planner  # served as a service serves: learning its guards
            guards = clf.planner_.serving_guards
            if guards is None:
                raise SystemExit("this classifier learns no serving guards (learn_guards=False or no guards)")
            if which == "rev":
                clf.planner_.serving_guards = other.ServingGuards(clf.planner_.index, quantile=guards.quantile)
            served[which] = clf
        for budget in args.budgets:
            rows = {"tree": [], "rev": []}
            for i in pick:
                for which in (("tree", "rev") if rng.random() < 0.5 else ("rev", "tree")):
                    (e,) = served[which].explain([images[i]], budget=budget)
                    rows[which].append((e.measured_cost > budget, e.label == labels[i], not e.features))
            late, right, empty = {}, {}, {}
            for which, r in rows.items():
                late[which], right[which], empty[which] = np.array(r, dtype=bool).T
            on_time = {w: (right[w] & ~late[w]).astype(float) for w in rows}
            gain = on_time["tree"] - on_time["rev"]
            line = (f"| {seed} | {budget * 1e3:g} | {late['tree'].mean():.1%} / {late['rev'].mean():.1%} | "
                    f"{empty['tree'].mean():.1%} / {empty['rev'].mean():.1%} | "
                    f"{mean_se(on_time['tree']).text()} | {mean_se(on_time['rev']).text()} | "
                    f"{mean_se(gain).text(signed=True)} |")
            print(line)
            lines.append(line)
    if args.report:
        Path(args.report).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
