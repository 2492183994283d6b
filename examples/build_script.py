"""The precompute step of a build: train a cost-sensitive image classifier and publish its index.

Run it where the service will run (feature costs are measured on this machine), e.g. as a step of
a deployment pipeline::

    python examples/build_script.py --out build/moderation-index

It measures every feature's extraction time across image sizes, fits the cost curves, trains one
model per explored feature set and publishes everything -- index, models, parameters -- as an
LMDB index at ``--out``. Publication is atomic: a server reading ``--out`` sees the previous
version or the new one, never a mix, and picks the new one up with ``index.refresh()``. The exit
status is 0 only when the index was published.

The data here are scikit-learn's digits rendered at several sizes: the digit stands in for an
image's content category, and the moderation policy (``FLAGGED``) maps categories to actions.
Replace ``training_data`` with your own labelled images.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import polydom
from polydom.featurizers.datasets import load_digits_images

FEATURES = ["intensity_hist", "thumbnail", "edge_density", "hog"]
#: The policy: content categories (here digits) whose images are flagged for review.
FLAGGED = frozenset({3, 8})


def training_data(per_class: int, sides=(16, 32, 48), random_state: int = 0):
    """Images, their content category and groups (one per source picture)."""
    images, categories, _ = load_digits_images(sides=sides, n_per_class=per_class, random_state=random_state)
    groups = np.arange(len(images)) // len(sides)
    return images, categories, groups


def build(out: str, *, per_class: int = 6, features=FEATURES, alpha: float = 1.0, cache_dir=None,
          n_jobs=None, quiet: bool = False) -> polydom.CostSensitiveClassifier:
    """Train on the example data and publish the classifier's index at ``out``."""
    images, labels, groups = training_data(per_class)
    clf = polydom.CostSensitiveClassifier(
        features=list(features), cv=2, selection=polydom.Selection(alpha=alpha),
        timing=polydom.Timing(images=3, repeats=2),
        cache_dir=cache_dir, n_jobs=n_jobs, random_state=0, progress=None if not quiet else False,
    )
    clf.fit(images, labels, groups=groups)
    version = clf.save(out)
    if not quiet:
        s = clf.fit_stats_
        print(f"trained on {len(images)} images: {s['expanded']} feature sets expanded "
              f"({s['trained']} trained now), {s['build_seconds']:.1f} s")
        print("measured cost curves (seconds, n = pixel count):")
        for name, fit in clf.cost_fits_.items():
            print(f"  {name:<15} {fit.expression()}")
        print(f"published {out} ({version})")
    return clf


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="build/moderation-index", help="where to publish the index")
    parser.add_argument("--per-class", type=int, default=6, help="training pictures per digit")
    parser.add_argument("--alpha", type=float, default=1.0, help="approximation factor (1 = exact)")
    parser.add_argument("--cache", default=None, help="feature and expansion cache directory")
    parser.add_argument("--n-jobs", type=int, default=None, help="parallel workers (-1: all cores)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        build(args.out, per_class=args.per_class, alpha=args.alpha, cache_dir=args.cache, n_jobs=args.n_jobs)
    except (ValueError, TypeError, OSError, polydom.StoreError) as exc:
        print(f"build failed, nothing published: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"done in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
