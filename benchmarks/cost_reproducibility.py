"""Do cost fits reproduce? The demo's features fitted twice on this machine, once as it is and once
while CPU-burning processes compete for the cores, compared size by size.

Each fit times the features as the classifier does (:func:`polydom.costs.measure.measure_feature_costs`
with the demo's features and timing sides and the classifier's default of 8 timed images (the
largest digit images; the demo itself times 4),
5 timed rounds of primed calls on the timing thread's CPU clock, the median tracked by a
quadratic). The busy fit runs while ``--burners`` subprocesses spin (``while True: pass``). For
every feature and timed size the script prints the ratio busy / quiet of the fitted curves and its
worst ``|ratio - 1|``; beside it, the same for curves fitted the same way to the unprimed (cold)
calls' CPU time, and for the per-size medians of wall time, which is what fits used to be made
of. A second quiet fit (on by default) shows how much two fits differ with no burners at all,
which on a shared machine is not nothing.

    python -P benchmarks/cost_reproducibility.py [--repeats 5] [--images 8] [--burners 2] [--runs 1]

Writes ``benchmarks/results/cost_reproducibility.md``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import subprocess
import sys
import time
import warnings

import numpy as np

from polydom.costs.measure import choose_timing_images, measure_feature_costs
# Run as ``python -P``, a script's own folder is not on sys.path; ``lab`` is the package beside it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lab.job import DEFAULT_FEATURES, DEFAULT_SIDES, TIMING_SIDES  # noqa: E402
from polydom.featurizers import resolve_features
from polydom.featurizers.datasets import load_digits_images
from polydom.index.costs.fitting import evaluate_cost_curve, fit_cost_curve

HERE = pathlib.Path(__file__).resolve().parent
BAR = 0.25


def demo_timing_images(count: int) -> list:
    """Digits rendered at the demo's sides (26 per class), and ``count`` of the largest, chosen as
    the classifier chooses its timing images."""
    images, _, _ = load_digits_images(sides=DEFAULT_SIDES, n_per_class=26, random_state=0)
    return [images[i] for i in choose_timing_images(images, count, random_state=0)]


def fit(images, repeats: int, features) -> tuple[dict, list[str], float]:
    """One fit of ``features``: the fits, the warnings it raised, and its wall time."""
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fits = measure_feature_costs(resolve_features(features), images, TIMING_SIDES,
                                     repeats=repeats, progress=False)
    return fits, [str(w.message) for w in caught], time.perf_counter() - started


def start_burners(count: int) -> list[subprocess.Popen]:
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    time.sleep(0.5)  # let them reach the cores before timing starts
    return burners


def stop_burners(burners: list[subprocess.Popen]) -> None:
    for p in burners:
        p.kill()
    for p in burners:
        p.wait()


def compare(first: dict, second: dict) -> dict[str, dict]:
    """Per feature: curve ratios second / first at each timed size and their worst deviation; the
    worst deviation of curves fitted to the cold calls, and of the per-size median wall times."""
    sizes = np.array(sorted({s * s for s in TIMING_SIDES}), dtype=float)
    out = {}
    for name in first:
        a, b = first[name], second[name]
        ratio = b.curve_values(sizes) / a.curve_values(sizes)
        wall_a = np.array([np.median(a.wall_seconds[a.sizes == s]) for s in sizes])
        wall_b = np.array([np.median(b.wall_seconds[b.sizes == s]) for s in sizes])
        cold_a, cold_b = (evaluate_cost_curve(fit_cost_curve(f.sizes, f.cold_seconds, items=f.items), sizes)
                          for f in (a, b))
        out[name] = {
            "ratio": ratio,
            "worst": float(np.max(np.abs(ratio - 1))),
            "cold_worst": float(np.max(np.abs(cold_b / cold_a - 1))),
            "wall_worst": float(np.max(np.abs(wall_b / wall_a - 1))),
            "ms": a.curve_values(sizes) * 1e3,
        }
    return out


def table(rows: dict[str, dict], title: str) -> list[str]:
    lines = [
        title, "",
        "| feature | " + " | ".join(f"{s}²" for s in TIMING_SIDES)
        + " | worst \\|ratio − 1\\| | cold calls' fit | wall-time medians |",
        "|---|" + "---:|" * (len(TIMING_SIDES) + 3),
    ]
    for name, row in rows.items():
        lines.append(f"| {name} | " + " | ".join(f"{r:.2f}" for r in row["ratio"])
                     + f" | **{row['worst']:.2f}** | {row['cold_worst']:.2f} | {row['wall_worst']:.2f} |")
    worst = max(rows.items(), key=lambda item: item[1]["worst"])
    lines += ["", f"Worst over all features and sizes: **{worst[1]['worst']:.2f}** ({worst[0]}); "
                  f"the bar is {BAR}. Fitted to the cold calls instead: "
                  f"{max(r['cold_worst'] for r in rows.values()):.2f}; wall-time medians: "
                  f"{max(r['wall_worst'] for r in rows.values()):.2f}.", ""]
    return lines


def one_run(images, args) -> dict:
    """Quiet, busy and (with the baseline) quiet again; their comparisons and the check's words."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    quiet, quiet_warnings, quiet_s = fit(images, args.repeats, args.features)
    burners = start_burners(args.burners)
    try:
        busy, busy_warnings, busy_s = fit(images, args.repeats, args.features)
    finally:
        stop_burners(burners)
    run = {"load": load, "quiet": quiet, "busy": compare(quiet, busy),
           "checks": [("quiet", quiet_warnings, quiet_s), (f"{args.burners} burners", busy_warnings, busy_s)]}
    if args.baseline:
        again, again_warnings, again_s = fit(images, args.repeats, args.features)
        run["again"] = compare(quiet, again)
        run["checks"].append(("quiet again", again_warnings, again_s))
    return run


def worst(rows: dict, key: str = "worst") -> str:
    name, row = max(rows.items(), key=lambda item: item[1][key])
    return f"{row[key]:.2f} ({name})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds per fit (the demo's 5)")
    parser.add_argument("--images", type=int, default=8, help="timed images (default 8, the classifier's default)")
    parser.add_argument("--burners", type=int, default=2, help="CPU-burning subprocesses in the busy fit")
    parser.add_argument("--runs", type=int, default=1, help="repeat the whole comparison (default 1)")
    parser.add_argument("--features", nargs="+", default=list(DEFAULT_FEATURES),
                        help="feature names (default: the demo's)")
    parser.add_argument("--no-baseline", dest="baseline", action="store_false",
                        help="skip the second quiet fit")
    parser.add_argument("--out", default=str(HERE / "results" / "cost_reproducibility.md"))
    args = parser.parse_args()

    images = demo_timing_images(args.images)
    started = time.perf_counter()
    runs = [one_run(images, args) for _ in range(args.runs)]

    defaults = dict(repeats=5, images=8, burners=2, runs=1, features=list(DEFAULT_FEATURES))
    flags = [f"--{k} {' '.join(v) if isinstance(v, list) else v}" for k, v in vars(args).items()
             if k in defaults and v != defaults[k]]
    lines = [
        "# Cost fits, quiet vs contended",
        "",
        "`python -P benchmarks/cost_reproducibility.py" + "".join(" " + f for f in flags) + "`"
        f" ({time.perf_counter() - started:.0f} s)",
        "",
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}. Features: "
        f"{', '.join(args.features)}; sides {', '.join(map(str, TIMING_SIDES))}; {len(images)} images, "
        f"{args.repeats} timed rounds of primed calls; the median tracked by a quadratic on [0, inf).",
        "",
        "## Every run", "",
        "| run | load average at start | busy / quiet | quiet again / quiet | cold calls' fit, busy / quiet "
        "| wall-time medians, busy / quiet |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for k, run in enumerate(runs, 1):
        again = worst(run["again"]) if "again" in run else "-"
        lines.append(f"| {k} | {' / '.join(f'{v:.1f}' for v in run['load'])} | **{worst(run['busy'])}** | {again} "
                     f"| {worst(run['busy'], 'cold_worst')} | {worst(run['busy'], 'wall_worst')} |")
    lines += ["", f"Each cell: the worst |ratio − 1| over every feature and timed size (the feature). The bar: "
                  f"{BAR}.", ""]
    last = runs[-1]
    lines += table(last["busy"], f"## Run {len(runs)}, busy / quiet: fitted curve ratio at each timed size "
                                 f"({args.burners} burners in the busy fit)")
    if "again" in last:
        lines += table(last["again"], f"## Run {len(runs)}, quiet again / quiet: the same with no burners")
    quiet = last["quiet"]
    lines += [f"## Run {len(runs)}, the quiet fit (ms at each timed size)", "",
              "| feature | " + " | ".join(f"{s}²" for s in TIMING_SIDES) + " | curve | cold / primed |",
              "|---|" + "---:|" * len(TIMING_SIDES) + "---|---:|"]
    sizes = np.array(sorted({s * s for s in TIMING_SIDES}), dtype=float)
    for name in args.features:
        values = quiet[name].curve_values(sizes) * 1e3
        lines.append(f"| {name} | " + " | ".join(f"{v:.3f}" for v in values)
                     + f" | `{quiet[name].expression()}` | {quiet[name].samples().cold_ratio():.2f} |")
    lines += ["", "## What the timing check said", ""]
    for k, run in enumerate(runs, 1):
        for label, caught, seconds in run["checks"]:
            lines.append(f"- run {k}, {label} ({seconds:.0f} s): " + ("; ".join(caught) if caught else "no warning"))
    text = "\n".join(lines) + "\n"
    pathlib.Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
