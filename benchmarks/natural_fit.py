"""A fit at natural sizes: where the time goes, how much of the lattice is trained, how well costs predict.

The data are :func:`polydom.featurizers.natural.load_natural_images` (photos and drawn graphics,
about 200 x 150 to 2400 x 1600 px, no download). ``--train`` images are fitted with the default
classifier on six built-in features; ``--held-out`` further images are extracted one by one
afterwards, and each feature's measured CPU time on them is set against its fitted cost curve.

Printed and written to the report:

* the fit's stages (extraction, timing pass, training and build) in seconds, and the timing pass
  as a share of extraction;
* the longest stretch without a progress line, as a share of the fit (``progress=True`` on a
  stream that is not a terminal, as in a build script's log);
* how many sets of the lattice were trained fully, partly, or not at all (``index_.stats``);
* per feature, the held-out median of ``|measured / predicted - 1|`` (wall time of each feature
  on each held-out image, extracted one after another, against the fitted curve at its size).

    python -P benchmarks/natural_fit.py [--train 120] [--held-out 60] [--alpha 1] [--seed 0]
        [--n-jobs 1] [--out benchmarks/results/natural-fit.md]
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np

FEATURES = ["intensity_hist", "thumbnail", "fft_bands", "edge_density", "lbp", "hog"]


class StampedStream(io.TextIOBase):
    """A stream that is not a terminal and records when each line was written."""

    def __init__(self, echo):
        self.echo, self.lines, self.clock = echo, [], time.perf_counter

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        for line in text.splitlines():
            if line.strip():
                self.lines.append((self.clock(), line))
        self.echo.write(text)
        return len(text)

    def flush(self) -> None:
        self.echo.flush()


def longest_silence(stamps, start: float, end: float) -> float:
    """The longest stretch, within ``[start, end]``, between consecutive progress lines."""
    points = [start] + [t for t in stamps if start <= t <= end] + [end]
    return max(b - a for a, b in zip(points, points[1:]))


def cost_errors(clf, images, seconds) -> dict[str, tuple[float, float, np.ndarray]]:
    """Per feature, the median of ``|measured / predicted - 1|`` over ``images``, the median of
    ``measured / predicted`` (above 1: the curve runs low), and each image's ``|ratio - 1|``."""
    from polydom.featurizers import item_size

    sizes = np.array([item_size(im) for im in images], dtype=float)
    out = {}
    for j, name in enumerate(clf.cost_fits_):  # the seconds' columns: the shared steps, then the features
        predicted = clf.cost_fits_[name].curve_values(sizes)
        ratio = seconds[:, j] / predicted
        out[name] = (float(np.median(np.abs(ratio - 1))), float(np.median(ratio)), np.abs(ratio - 1))
    return out


def median_difference_se(a: np.ndarray, b: np.ndarray, seed: int, draws: int = 2000) -> float:
    """Bootstrap standard error of ``median(a) - median(b)`` over the same items (paired: each
    draw resamples the items once for both)."""
    rng = np.random.default_rng(seed)
    rows = rng.integers(len(a), size=(draws, len(a)))
    return float(np.std(np.median(a[rows], axis=1) - np.median(b[rows], axis=1), ddof=1))


def earlier_timing_pass(train_images, held_seconds, test_images, seed):
    """The earlier timing pass's curves on the same data: ``(seconds, errors)``."""
    from polydom.costs.calibration import calibrate_fits
    from polydom.costs.measure import choose_timing_images, default_timing_sides, measure_feature_costs
    from polydom.classifier.extraction import extract_features
    from polydom.featurizers import item_size, resolve_features

    features = resolve_features(FEATURES)
    sizes = np.array([item_size(im) for im in train_images], dtype=np.int64)
    matrix = extract_features(train_images, features, progress=False)
    start = time.perf_counter()
    timed = [train_images[i] for i in choose_timing_images(train_images, 8, seed)]
    fits = measure_feature_costs(features, timed, default_timing_sides(sizes), repeats=5, progress=False)
    fits = calibrate_fits(fits, train_images, features, matrix, sizes, parallel=False, random_state=seed)
    seconds = time.perf_counter() - start

    class Fitted:  # what cost_errors reads
        cost_fits_ = fits

    return seconds, cost_errors(Fitted, test_images, held_seconds)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", type=int, default=120)
    parser.add_argument("--held-out", type=int, default=60)
    parser.add_argument("--alpha", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--against-timing-pass", action="store_true",
                        help="also time the features as the earlier timing pass did (8 largest images resized to 6 "
                             "sides, 5 repeats, calibrated on the training extraction) and set its curves against "
                             "the same held-out calls")
    parser.add_argument("--out", default="benchmarks/results/natural-fit.md")
    args = parser.parse_args(argv)

    import polydom
    from polydom import CostSensitiveClassifier
    from polydom.classifier.extraction import extract_features
    from polydom.featurizers import resolve_features
    from polydom.featurizers.natural import load_natural_images

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from revision import source_of

    images, labels = load_natural_images(args.train + args.held_out, random_state=args.seed)
    order = np.random.default_rng(args.seed).permutation(len(images))
    train, test = order[: args.train], order[args.train :]
    train_images, y = [images[i] for i in train], np.asarray(labels)[train]
    test_images, y_test = [images[i] for i in test], np.asarray(labels)[test]

    stream = StampedStream(sys.stderr)
    clf = CostSensitiveClassifier(features=FEATURES, selection=polydom.Selection(alpha=args.alpha), n_jobs=args.n_jobs,
                                  random_state=args.seed, progress=True)
    real_stderr, sys.stderr = sys.stderr, stream
    try:
        start = time.perf_counter()
        clf.fit(train_images, y)
        end = time.perf_counter()
    finally:
        sys.stderr = real_stderr
    fit_wall = end - start
    silence = longest_silence([t for t, _ in stream.lines], start, end)
    stats, istats = clf.fit_stats_, clf.index_.stats
    lattice = 2 ** len(FEATURES)

    # Held-out calls before predict computes the same features on the same images.
    held = extract_features(test_images, resolve_features(FEATURES), n_jobs=1, progress=False)
    # Wall time, one image after another: what a request pays and what the calibrated curves predict.
    measured = held.seconds
    errors = cost_errors(clf, test_images, measured)
    by_class = {name: {} for name in errors}
    for label in (0, 1):
        rows = np.flatnonzero(y_test == label)
        for name, (_, ratio, _) in cost_errors(clf, [test_images[i] for i in rows], measured[rows]).items():
            by_class[name][label] = ratio
    accuracy = float(np.mean(clf.predict(test_images) == y_test))
    earlier = None
    if args.against_timing_pass:
        earlier = earlier_timing_pass(train_images, measured, test_images, args.seed)

    fully = istats.get("fully_trained", stats.get("trained"))
    partly = istats.get("partly_trained", 0)
    source = source_of(polydom)
    lines = [
        "# polydom — a fit at natural sizes",
        "",
        f"`python -P benchmarks/natural_fit.py {shlex.join(argv if argv is not None else sys.argv[1:])}` — "
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"load average {os.getloadavg()[0]:.1f} at the end"
        + (f"; library at {source[0]}" + (" with changes" if source[1] else "") if source else "") + ".",
        "",
        f"{args.train} training and {args.held_out} held-out images of `load_natural_images` (seed {args.seed}), "
        f"features {', '.join(FEATURES)}, α={args.alpha:g}, n_jobs={args.n_jobs}, other parameters default.",
        "",
        "| stage | seconds |",
        "|---|---:|",
        f"| extraction | {stats['extract_seconds']:.1f} |",
        f"| timing pass | {stats['timing_seconds']:.1f} |",
        f"| training and build | {stats['build_seconds']:.1f} |",
        f"| whole fit | {fit_wall:.1f} |",
        "",
        f"Timing pass / extraction: **{stats['timing_seconds'] / stats['extract_seconds']:.2f}**. "
        f"Longest stretch without a progress line: {silence:.1f} s, **{silence / fit_wall:.0%}** of the fit "
        f"({len(stream.lines)} lines).",
        "",
        f"Lattice: {lattice} sets; fully trained **{fully}** ({fully / lattice:.0%}), partly {partly}, "
        f"not trained {lattice - fully - partly}. Held-out accuracy with no budget: {accuracy:.3f}.",
        "",
        "| feature | held-out median abs(measured / predicted − 1) | median measured / predicted |",
        "|---|---:|---:|",
        *[f"| {name} | {error:.3f} | {ratio:.3f} |" for name, (error, ratio, _) in errors.items()],
        "",
        "The same held-out calls by class (median measured / predicted): a feature whose cost depends on the "
        "image's content, not only its size, runs apart here, and no curve in the size alone fits both.",
        "",
        "| feature | photos | graphics |",
        "|---|---:|---:|",
        *[f"| {name} | {by_class[name][1]:.3f} | {by_class[name][0]:.3f} |" for name in errors],
        *([] if earlier is None else [
            "",
            f"The earlier timing pass on the same training images took {earlier[0]:.1f} s "
            f"({earlier[0] / stats['extract_seconds']:.2f} × this fit's extraction); its curves on the same held-out calls:",
            "",
            "| feature | held-out median abs(measured / predicted − 1) | median measured / predicted | this fit's, again | this fit's − earlier ± paired bootstrap SE |",
            "|---|---:|---:|---:|---:|",
            *[f"| {name} | {e:.3f} | {r:.3f} | {errors[name][0]:.3f} | "
              f"{errors[name][0] - e:+.3f} ± {median_difference_se(errors[name][2], each, args.seed):.3f} |"
              for name, (e, r, each) in earlier[1].items()],
        ]),
        "",
        "Progress lines (seconds from the start of the fit):",
        "",
        "```",
        *[f"{t - start:7.1f}  {line.strip()[:150]}" for t, line in stream.lines],
        "```",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
