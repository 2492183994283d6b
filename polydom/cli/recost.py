"""``polydom recost PATH``: re-measure a saved classifier's feature costs on this machine and
republish it, without training anything.

The features are timed on images from ``--images DIR`` (PNG, JPEG, BMP, TIFF, WebP; read with Pillow)
or, by default, on a few of the embedded digits, resized to the sides used at fit time (or
``--sides``). The index is rebuilt from its stored accuracies and models
(:meth:`CostSensitiveClassifier.recost`) and published as a new version at ``PATH`` (or
``--out``): processes serving ``PATH`` pick it up with ``index.refresh()``.
"""

from __future__ import annotations

import argparse
import sys

from .text import comma_separated_ints

__all__ = ["configure", "run"]

def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="a classifier saved with CostSensitiveClassifier.save (or polydom demo's OUT/index)")
    parser.add_argument("--images", default=None, metavar="DIR", help="time the features on the images in DIR")
    parser.add_argument("--sides", type=comma_separated_ints, default=None,
                        help="square sides to time at (default: those of the fit)")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per feature, image and side")
    parser.add_argument("--out", default=None, help="publish here instead of back to PATH")
    parser.add_argument("--feature-modules", default="", metavar="M1,M2",
                        help="modules trusted to define the index's custom features (imported to find them)")


def run(args: argparse.Namespace) -> int:
    from polydom.featurizers.datasets import load_digits_images

    from polydom.classifier.estimator import CostSensitiveClassifier

    modules = [m.strip() for m in args.feature_modules.split(",") if m.strip()]
    clf = CostSensitiveClassifier.load(args.path, feature_modules=modules)
    clf.set_params(progress=None)
    if args.images is not None:
        from polydom.featurizers.sources import read_image_folder

        images = read_image_folder(args.images)
    else:
        side = max(clf.timing_sides_)
        images, _, _ = load_digits_images(sides=(side,), n_per_class=1)
        images = images[: max(1, clf._policies()[1].images)]
    before = {n: fit.expression() for n, fit in clf.cost_fits_.items()}
    clf.recost(images, sides=args.sides, repeats=args.repeats)
    target = args.out or args.path
    version = clf.save(target)
    width = max(len(n) for n in before)
    print(f"recosted {len(clf.feature_names_)} features on {len(images)} images, sides {list(clf.timing_sides_)}; "
          f"nothing was trained", file=sys.stderr)
    for name, fit in clf.cost_fits_.items():
        print(f"  {name:<{width}}  {before[name]}  ->  {fit.expression()}")
    print(f"published {target} ({version})", file=sys.stderr)
    return 0
