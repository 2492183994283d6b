"""``python -P benchmarks/backends.py [--out DIR] [--quick] ...``: run the backend comparison (:func:`lab.job.run_demo`).

Ctrl-C stops it with one line saying how many trained sets the cache kept (the next run resumes
from them) and exit status 130.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from lab.job import run_demo
from lab.settings import (
    DEFAULT_FEATURES, DEFAULT_PICTURES, DEFAULT_SIDES, QUICK_FEATURES, QUICK_PICTURES, QUICK_SIDES, QUICK_TIMING_SIDES,
    TIMING_SIDES,
)

from polydom.cli import UsageError
from polydom.cli.text import comma_separated_ints

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="demo-out", help="output directory (default: demo-out)")
    parser.add_argument("--quick", action="store_true",
                        help="a small run (4 features, 3 sizes, few images) for smoke tests; the report's numbers "
                             "carry large standard errors")
    parser.add_argument("--per-class", type=int, default=None, metavar="N",
                        help=f"training pictures per class (default {DEFAULT_PICTURES[0]}, {QUICK_PICTURES[0]} with --quick)")
    parser.add_argument("--held-out-per-class", type=int, default=None, metavar="N",
                        help=f"held-out pictures per class (default {DEFAULT_PICTURES[1]}, {QUICK_PICTURES[1]} with --quick)")
    parser.add_argument("--features", default=None,
                        help="comma-separated feature names, or 'all' for every built-in feature "
                             f"(default: {','.join(DEFAULT_FEATURES)})")
    parser.add_argument("--sides", type=comma_separated_ints, default=None,
                        help=f"image sides (default {','.join(map(str, DEFAULT_SIDES))}; "
                             f"{','.join(map(str, QUICK_SIDES))} with --quick)")
    parser.add_argument("--cv", type=int, default=3, help="cross-validation folds (default 3)")
    parser.add_argument("--cv-repeats", type=int, default=1, metavar="N",
                        help="draws of the folds every feature set is scored on (default 1; each adds --cv folds)")
    parser.add_argument("--n-jobs", type=int, default=-1, help="parallel workers (default -1: all cores)")
    parser.add_argument("--cache", default=None, help="cache directory (default OUT/cache)")
    parser.add_argument("--no-cache", action="store_true",
                        help="compute everything afresh and keep nothing (a scratch cache lives for the run)")
    parser.add_argument("--compare", default=None, metavar="PATH",
                        help="compare the headline numbers with another run's (its OUT or its headline.json; "
                             "default: the previous run in OUT)")
    parser.add_argument("--dataset", choices=("digits", "fashion-mnist"), default="digits",
                        help="digits (bundled with scikit-learn; default) or Fashion-MNIST from Debian's "
                             "dataset-fashion-mnist package")
    parser.add_argument("--seed", type=int, default=0, metavar="N",
                        help="which pictures are drawn, how they are rendered and split, and the learners' seeds "
                             "(default 0); runs with other seeds are independent samples of the same experiment")


def run(args: argparse.Namespace) -> int:
    from polydom.featurizers import REGISTRY

    from polydom.cli.interrupts import interrupted

    if args.quick:
        features, (train, held_out), sides, timing = QUICK_FEATURES, QUICK_PICTURES, QUICK_SIDES, QUICK_TIMING_SIDES
    else:
        features, (train, held_out), sides, timing = DEFAULT_FEATURES, DEFAULT_PICTURES, DEFAULT_SIDES, TIMING_SIDES
    if args.features == "all":
        features = tuple(REGISTRY)
    elif args.features:
        features = tuple(f.strip() for f in args.features.split(",") if f.strip())
    train = train if args.per_class is None else args.per_class
    held_out = held_out if args.held_out_per_class is None else args.held_out_per_class
    if train < args.cv:
        raise UsageError(f"--per-class must be at least --cv = {args.cv} (each fold needs every class), got {train}")
    if held_out < 2:
        raise UsageError(f"--held-out-per-class must be >= 2 (standard errors need two pictures), got {held_out}")
    if args.sides is not None:
        sides = args.sides
        timing = tuple(sorted(set(timing) | set(sides)))
    if args.cv < 2:
        raise UsageError(f"--cv must be >= 2, got {args.cv}")
    if args.cv_repeats < 1:
        raise UsageError(f"--cv-repeats must be >= 1, got {args.cv_repeats}")
    if args.seed < 0:
        raise UsageError(f"--seed must be >= 0, got {args.seed}")
    if args.dataset == "fashion-mnist":
        from polydom.featurizers.datasets import fashion_mnist_available

        if not fashion_mnist_available():
            raise ValueError("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist); "
                             "use --dataset digits")
    with tempfile.TemporaryDirectory(prefix="polydom-demo-") as scratch:
        # Without a cache, trained sets are still shared between the backends within this run.
        cache = scratch if args.no_cache else (args.cache or os.path.join(args.out, "cache"))
        try:
            result = run_demo(args.out, features=features, train_per_class=train, held_out_per_class=held_out,
                              sides=sides, cv=args.cv, cv_repeats=args.cv_repeats, dataset=args.dataset,
                              n_jobs=args.n_jobs, cache_dir=cache,
                              timing_sides=timing, timing_images=2 if args.quick else 4,
                              timing_repeats=2 if args.quick else 5, real_items=6 if args.quick else 40,
                              compare=args.compare, random_state=args.seed)
        except KeyboardInterrupt:
            raise interrupted(os.path.join(cache, "expansions"), kept=not args.no_cache) from None
    print(f"backends: report written to {result['report']} ({result['wall_seconds']:.0f} s)", file=sys.stderr)
    return 0
