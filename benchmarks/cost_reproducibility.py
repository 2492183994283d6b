"""Do cost fits reproduce? Two fits of the demo's features, one of them while CPU-bound processes
compete for every core, compared size by size.

Each fit times the features on the same images and sides the way the classifier does
(:func:`polydom.costs.measure_feature_costs`: CPU clock, wall time beside it, sizes interleaved,
median curves tracked). The second fit runs while one busy-looping process per core competes.
For every feature and timed size the script prints the ratio of the two fitted curves (and of
the two raw medians), and the worst deviation from 1; the same for wall-clock medians, to show
what CPU time protects against.

    python benchmarks/cost_reproducibility.py [--repeats 5] [--images 8]

Writes ``benchmarks/results/cost_reproducibility.md``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import pathlib
import time
import warnings

import numpy as np

from polydom.costs import measure_feature_costs
from polydom.featurizers import resolve_features
from polydom.featurizers.datasets import load_digits_images

FEATURES = ("intensity_hist", "thumbnail", "fft_bands", "edge_density", "lbp", "harris", "hog", "gabor")
SIDES = (16, 24, 32, 48, 64, 80)
HERE = pathlib.Path(__file__).resolve().parent


def _burn(stop) -> None:
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


def fit(images, repeats):
    features = resolve_features(FEATURES)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fits = measure_feature_costs(features, images, SIDES, repeats=repeats, progress=False)
    return fits, [str(w.message) for w in caught]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--out", default=str(HERE / "results" / "cost_reproducibility.md"))
    args = parser.parse_args()
    images, _, _ = load_digits_images(sides=(32,), n_per_class=1, random_state=0)
    images = images[: args.images]
    t0 = time.perf_counter()
    quiet, quiet_warnings = fit(images, args.repeats)
    stop = multiprocessing.Event()
    burners = [multiprocessing.Process(target=_burn, args=(stop,)) for _ in range(os.cpu_count() or 2)]
    for p in burners:
        p.start()
    try:
        time.sleep(0.5)
        busy, busy_warnings = fit(images, args.repeats)
    finally:
        stop.set()
        for p in burners:
            p.join()
    lines = [
        "# Cost fits, quiet vs contended",
        "",
        f"`python benchmarks/cost_reproducibility.py --repeats {args.repeats} --images {args.images}` "
        f"({time.perf_counter() - t0:.0f} s; {os.cpu_count()} CPUs; the second fit ran beside "
        f"{len(burners)} busy-looping processes)",
        "",
        "Ratio busy / quiet of the fitted curves at each timed size (CPU-time fits, median tracked).",
        "",
        "| feature | " + " | ".join(f"{s}²" for s in SIDES) + " | worst |curve ratio − 1| | worst |median ratio − 1| |",
        "|---|" + "---:|" * (len(SIDES) + 2),
    ]
    worst_all = 0.0
    for name in FEATURES:
        q, b = quiet[name], busy[name]
        sizes = np.array(sorted({s * s for s in SIDES}), dtype=float)
        ratio = b.curve_values(sizes) / q.curve_values(sizes)
        worst = float(np.max(np.abs(ratio - 1)))
        worst_all = max(worst_all, worst)
        med_q = np.array([np.median(q.seconds[q.sizes == s]) for s in sizes])
        med_b = np.array([np.median(b.seconds[b.sizes == s]) for s in sizes])
        lines.append(f"| {name} | " + " | ".join(f"{r:.2f}" for r in ratio) + f" | {worst:.2f} | "
                     f"{float(np.max(np.abs(med_b / med_q - 1))):.2f} |")
    lines += ["", f"Worst deviation over all features and sizes: **{worst_all:.2f}** (the bar: 0.25).", "",
              "Warnings raised while timing:", "",
              f"- quiet run: {quiet_warnings or 'none'}", f"- contended run: {busy_warnings or 'none'}"]
    text = "\n".join(lines) + "\n"
    pathlib.Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
