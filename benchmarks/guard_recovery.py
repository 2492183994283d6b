"""Guards after a slow spell: a band that probes its refused features against one that never does, served for real.

A guard that refuses a feature stops measuring it, so serving guards learned while the machine
was slow could refuse that feature for good once it is fast again (*probing*, ``forget_after`` in
:mod:`polydom.index.serving.guards`). This serves held-out images of a finished ``benchmarks/backends.py``
run at one budget, one after another, with two classifiers loaded from its index -- one with the
default ``forget_after``, one with ``forget_after=None`` -- interleaved per image (order flipped at
random). During the first ``--spell`` requests a busy process runs on every core; then the
machine is quiet for ``--after`` requests. Per phase (the quiet phase in thirds) it prints each
classifier's on-time accuracy (late answers count wrong) with its standard error, the share of
answers over budget, and the share that computed no feature.

Run from the project root (quiet machine; takes a few minutes)::

    python benchmarks/guard_recovery.py --out RUN [--budget 0.001] [--report benchmarks/results/guard-recovery-digits.md]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np

import polydom
# Run as ``python -P``, a script's own folder is not on sys.path; ``lab`` is the package beside it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lab.job import add_run_arguments, load_run_split, run_arguments  # noqa: E402
from polydom.demo.stats import mean_se
from polydom.index.serving.guards import ServingGuards


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(parser)
    parser.add_argument("--budget", type=float, default=0.001, help="seconds per image (default 1 ms)")
    parser.add_argument("--spell", type=int, default=3000, help="requests served while every core is busy")
    parser.add_argument("--after", type=int, default=9000, help="requests served on the quiet machine")
    parser.add_argument("--busy-throughout", action="store_true",
                        help="keep the busy processes for the quiet phase too: what probing costs on a machine that stays slow")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--report", default=None, help="also write the lines printed to this Markdown file")
    args = parser.parse_args(argv)
    dataset = run_arguments(args.out).dataset
    warnings.simplefilter("ignore")
    images, labels, _, test = load_run_split(args)
    rng = np.random.default_rng(args.seed)
    order = rng.choice(test, args.spell + args.after, replace=True)
    served = {}
    if args.spell < 1 or args.after < 3:
        raise SystemExit("--spell must be at least 1 and --after at least 3 (the quiet phase is reported in thirds)")
    for name, forget_after in (("probes", "default"), ("never probes", None)):
        clf = polydom.CostSensitiveClassifier.load(f"{args.out}/index")
        clf.planner_ = clf.server().planner  # served as a service serves: learning its guards
        guards = clf.planner_.serving_guards
        if guards is None:
            raise SystemExit("this classifier learns no serving guards (learn_guards=False or no guards)")
        if forget_after is None:
            clf.planner_.serving_guards = ServingGuards(clf.planner_.index, quantile=guards.quantile, forget_after=None)
        served[name] = clf
    default = served["probes"].planner_.serving_guards.forget_after
    rows = {name: [] for name in served}
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        for n, i in enumerate(order):
            if n == args.spell and not args.busy_throughout:
                for p in busy:
                    p.kill()
                    p.wait()
                busy = []
            for name in (list(served) if rng.random() < 0.5 else list(served)[::-1]):
                (e,) = served[name].explain([images[i]], budget=args.budget)
                rows[name].append((e.measured_cost > args.budget, e.label == labels[i], not e.features))
    finally:
        for p in busy:
            p.kill()
            p.wait()
    third = args.after // 3  # the last (after % 3) requests are left out of the thirds
    after = "still busy" if args.busy_throughout else "quiet"
    phases = [("busy cores", 0, args.spell)] + [
        (f"{after}, requests {k * third + 1}-{(k + 1) * third}", args.spell + k * third, args.spell + (k + 1) * third)
        for k in range(3)]
    lines = [
        f"# Guards after a slow spell ({dataset}, {args.budget * 1e3:g} ms per image)",
        "",
        f"{args.spell} requests with a busy process on each of {os.cpu_count()} cores, then {args.after}"
        f" {'with the busy processes still running' if args.busy_throughout else 'on the quiet machine'}; held-out images drawn with replacement (seed {args.seed}), each served by both"
        f" classifiers in random order. *probes*: `forget_after={default}` (the default); *never probes*:"
        " `forget_after=None`. On-time accuracy counts late answers wrong, ± one standard error.",
        "",
        "| phase | classifier | on-time accuracy | late | no feature |",
        "|---|---|---|---|---|",
    ]
    for label, lo, hi in phases:
        for name in served:
            late, right, empty = np.array(rows[name][lo:hi], dtype=bool).T
            on_time = (right & ~late).astype(float)
            lines.append(f"| {label} | {name} | {mean_se(on_time).text()} | {late.mean():.1%} |"
                         f" {empty.mean():.1%} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.report:
        Path(args.report).write_text(text)


if __name__ == "__main__":
    main()
