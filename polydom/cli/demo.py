"""``polydom demo [--out DIR] [--quick] ...``: run the demo job (:func:`polydom.demo.run_demo`)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from polydom.demo.job import (
    DEFAULT_FEATURES, DEFAULT_SIDES, FASHION_SIDES, FASHION_TIMING_SIDES, QUICK_FEATURES, TIMING_SIDES, run_demo,
)

from .text import comma_separated_ints

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="demo-out", help="output directory (default: demo-out)")
    parser.add_argument("--per-class", type=int, default=None, metavar="N",
                        help="digits per class (each rendered at every size; default 26, 4 with --quick)")
    parser.add_argument("--features", default=None,
                        help="comma-separated feature names, or 'all' for every built-in feature "
                             f"(default: {','.join(DEFAULT_FEATURES)})")
    parser.add_argument("--sides", type=comma_separated_ints, default=DEFAULT_SIDES, help="image sides (default 16,32,48,64)")
    parser.add_argument("--cv", type=int, default=3, help="cross-validation folds (default 3)")
    parser.add_argument("--n-jobs", type=int, default=-1, help="parallel workers (default -1: all cores)")
    parser.add_argument("--cache", default=None, help="cache directory (default OUT/cache)")
    parser.add_argument("--no-cache", action="store_true",
                        help="compute everything afresh and keep nothing (a scratch cache lives for the run)")
    parser.add_argument("--dataset", choices=("digits", "fashion-mnist"), default="digits",
                        help="digits (bundled with scikit-learn; default) or Fashion-MNIST from Debian's "
                             "dataset-fashion-mnist package, rendered at 28, 56, 84 and 112 pixels (slower)")
    parser.add_argument("--quick", action="store_true", help="a tiny run (4 features, few images) for smoke tests")


def run(args: argparse.Namespace) -> int:
    from polydom.featurizers import REGISTRY

    if args.quick:
        features, per_class, timing = QUICK_FEATURES, 4, (16, 24, 32, 48, 64)
    else:
        features, per_class, timing = DEFAULT_FEATURES, 26, TIMING_SIDES
    if args.features == "all":
        features = tuple(REGISTRY)
    elif args.features:
        features = tuple(f.strip() for f in args.features.split(",") if f.strip())
    if args.per_class is not None:
        per_class = args.per_class
    if per_class < 2:
        raise ValueError(f"--per-class must be >= 2, got {per_class}")
    sides = args.sides
    if args.dataset == "fashion-mnist":
        from polydom.featurizers.datasets import fashion_mnist_available

        if not fashion_mnist_available():
            raise ValueError("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist); "
                             "use --dataset digits")
        if sides == DEFAULT_SIDES:
            sides = FASHION_SIDES
        if timing == TIMING_SIDES:
            timing = FASHION_TIMING_SIDES
    with tempfile.TemporaryDirectory(prefix="polydom-demo-") as scratch:
        # Without a cache, trained sets are still shared between the backends within this run.
        cache = scratch if args.no_cache else (args.cache or os.path.join(args.out, "cache"))
        result = run_demo(args.out, features=features, per_class=per_class, sides=sides, cv=args.cv,
                          dataset=args.dataset, n_jobs=args.n_jobs, cache_dir=cache, timing_sides=timing,
                          timing_images=3 if args.quick else 8, real_items=8 if args.quick else 40)
    print(f"polydom demo: report written to {result['report']} ({result['wall_seconds']:.0f} s)", file=sys.stderr)
    return 0
