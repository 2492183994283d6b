"""What the built-in features save by sharing their greyscale step, at natural sizes.

Every built-in feature but ``size_meta`` works on grey levels. Before the features shared the
``grey`` step (``polydom.featurizers.STEPS``), each converted the image on its own, so a set of
``k`` features paid for ``k`` conversions. Now a set pays for one, and its cost is the union of
its features and their steps (``docs/decisions/shared-steps.md``).

On the natural-size photos and graphics (:func:`polydom.featurizers.natural.load_natural_images`,
colour, about 0.03 to 3.8 megapixels), each image is timed one call after another on this thread's
CPU clock, the fastest of ``--repeats`` rounds:

* the ``grey`` step alone;
* each feature on its own, converting the image itself (what a feature cost before);
* each feature given the converted image (what it costs now).

Printed and written to the report, per size range (median over its images): the six features
computed apart against the step plus the six features sharing it, and the same for the cheapest
pair; the step's share of the shared set.

    python -P benchmarks/shared_steps.py [--images 60] [--repeats 3] [--seed 0]
        [--out benchmarks/results/shared-steps.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time

import numpy as np

FEATURES = ["intensity_hist", "thumbnail", "fft_bands", "edge_density", "lbp", "hog"]
PAIR = ["intensity_hist", "thumbnail"]
#: Size ranges in pixels, as the photos demo reports them.
RANGES = ((0, 170_000), (170_000, 820_000), (820_000, 10**9))


def time_image(image, features, step, repeats: int) -> dict:
    """The fastest of ``repeats`` CPU times of the step, each feature apart and each feature given
    the step's output, on one image (seconds)."""
    from polydom.featurizers import validate_image

    array = validate_image(image)
    clock = time.thread_time
    best = {}

    def keep(name, seconds):
        best[name] = min(best.get(name, np.inf), seconds)

    for _ in range(repeats):
        start = clock()
        grey = step.prepare(array)
        keep("grey", clock() - start)
        for feature in features:
            start = clock()
            feature.evaluate(array)  # converts the image itself
            keep(f"{feature.name} apart", clock() - start)
            start = clock()
            feature.evaluate(array, prepared={"grey": grey})
            keep(f"{feature.name} shared", clock() - start)
    return best


def summarize(times: list[dict], sizes: np.ndarray) -> list[dict]:
    rows = []
    for lo, hi in RANGES:
        chosen = [t for t, n in zip(times, sizes) if lo <= n < hi]
        if not chosen:
            continue

        def median(f):
            return float(np.median([f(t) for t in chosen]))

        def apart(names):
            return lambda t: sum(t[f"{n} apart"] for n in names)

        def shared(names):
            return lambda t: t["grey"] + sum(t[f"{n} shared"] for n in names)

        rows.append({
            "range": (lo, hi), "images": len(chosen),
            "megapixels": float(np.median([n for n in sizes if lo <= n < hi])) / 1e6,
            "grey": median(lambda t: t["grey"]),
            "all apart": median(apart(FEATURES)), "all shared": median(shared(FEATURES)),
            "pair apart": median(apart(PAIR)), "pair shared": median(shared(PAIR)),
            "saving all": median(lambda t: 1 - shared(FEATURES)(t) / apart(FEATURES)(t)),
            "saving pair": median(lambda t: 1 - shared(PAIR)(t) / apart(PAIR)(t)),
            "grey share": median(lambda t: t["grey"] / shared(FEATURES)(t)),
        })
    return rows


def report(rows, args, seconds) -> str:
    def label(lo, hi):
        return f"{lo / 1e6:.2f}–{hi / 1e6:.2f} MP" if hi < 10**9 else f"{lo / 1e6:.2f} MP and up"

    command = "python -P benchmarks/shared_steps.py " + shlex.join(sys.argv[1:])
    lines = [
        "# Shared steps: what the greyscale step saves the built-in features",
        "",
        f"`{command.strip()}` — {seconds:.0f} s on this machine ({platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}).",
        "",
        f"{args.images} natural-size images (photos and graphics, colour); each timed one call after another on "
        f"the thread's CPU clock, the fastest of {args.repeats} rounds. *Apart*: each feature converts the image to "
        "grey levels itself, as before the step was shared. *Shared*: the `grey` step once, then the features on "
        "its output. Medians over the images of each size range.",
        "",
        f"| size range | images | median MP | grey (ms) | six features apart (ms) | shared (ms) | saved | "
        f"{' + '.join(PAIR)} apart (ms) | shared (ms) | saved | grey's share of the six |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {label(*r['range'])} | {r['images']} | {r['megapixels']:.2f} | {1e3 * r['grey']:.2f} | "
            f"{1e3 * r['all apart']:.1f} | {1e3 * r['all shared']:.1f} | {r['saving all']:.0%} | "
            f"{1e3 * r['pair apart']:.2f} | {1e3 * r['pair shared']:.2f} | {r['saving pair']:.0%} | "
            f"{r['grey share']:.0%} |")
    lines += ["", f"Features: {', '.join(FEATURES)}.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/results/shared-steps.md")
    args = parser.parse_args(argv)

    from polydom.featurizers import STEPS, resolve_features
    from polydom.featurizers.natural import load_natural_images

    started = time.perf_counter()
    images, _ = load_natural_images(args.images, random_state=args.seed)
    features = resolve_features(FEATURES)
    sizes = np.array([im.shape[0] * im.shape[1] for im in images])
    times = []
    for i, image in enumerate(images):
        times.append(time_image(image, features, STEPS["grey"], args.repeats))
        print(f"[{time.perf_counter() - started:5.0f} s] image {i + 1} of {len(images)}", file=sys.stderr)
    rows = summarize(times, sizes)
    text = report(rows, args, time.perf_counter() - started)
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
