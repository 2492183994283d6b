"""Held-out accuracy within the measured budget, on real images, for every backend side by side.

One run fits, on the same training pictures, features, learners and measured feature costs (one
timing pass, shared through the cache directory):

* ``PolyDom`` -- the defaults: learners raced per set, ``e="auto"``, scores ranked by their
  monotone fit, the paper's tie rule (``tolerance=0``), finalists rescored, median cost curves,
  served anytime (``index.select``) with guards learned while serving;
* ``PolyDom plain`` -- the same index served the plain way: look up, then compute every feature;
* ``PolyDom cascade`` -- the same with confidence cascades (``cascade=True``);
* ``PolyDom α=1.2``; ``Greedy``, ``GreedyAcc``, ``GreedyCost`` (anytime walks), same learners;
* ``PolyDom (paper)`` -- the paper's choices where polydom's defaults differ: one SGD learner,
  ``e=0``, no rescoring, 0.95-quantile costs, plain serving (the scores keep the default
  monotone ranking).

Every held-out item's features are computed and timed once (serially, nothing else of ours
running); each method then serves every (item, budget) pair through its own ``select`` on a
clock that replays those times, so all methods are judged on the same measured times. A cell is
(item size, budget); its accuracy carries a binomial standard error, comparisons between two
methods a paired one (the same items), and a *violation* is a measured extraction time above
the budget.

    python -P benchmarks/realdata.py --dataset digits
    python -P benchmarks/realdata.py --dataset fashion-mnist      # apt-get install dataset-fashion-mnist

Writes ``benchmarks/results/realdata-<dataset>.md``.
"""

from __future__ import annotations

import os
import sys
import argparse
import copy
import math
import pathlib
import tempfile
import time
import warnings

import numpy as np

import polydom
from polydom.demo.evaluation import serve_grid
from polydom.classifier.extraction import extract_features
from polydom.featurizers import resolve_features
from polydom.featurizers.datasets import load_digits_images, load_fashion_mnist_images

# Run as ``python -P``, a script's own folder is not on sys.path; ``lab`` is the package beside it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

FEATURES = ("intensity_hist", "thumbnail", "fft_bands", "edge_density", "lbp", "harris", "hog", "gabor")
BUDGETS_MS = (0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200)
HERE = pathlib.Path(__file__).resolve().parent


def paper_learner():
    from sklearn.linear_model import SGDClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), SGDClassifier(loss="hinge", penalty="l1", random_state=0))


#: name -> (classifier parameters, serving mode); the first is the reference for comparisons.
METHODS = {
    "PolyDom": ({}, "select"),
    "PolyDom plain": ({}, "plain"),
    "PolyDom cascade": ({"cascade": {}}, "cascade"),
    "PolyDom α=1.2": ({"selection": {"alpha": 1.2}}, "select"),
    "Greedy": ({"selection": {"backend": "greedy"}}, "select"),
    "GreedyAcc": ({"selection": {"backend": "greedy-acc"}}, "select"),
    "GreedyCost": ({"selection": {"backend": "greedy-cost"}}, "select"),
    "PolyDom (paper)": ({"learners": "paper", "selection": {"e": 0.0, "tolerance": 0.0, "finalist_repeats": 0},
                         "timing": {"quantile": 0.95}}, "plain"),
}
#: The methods the default must match within one standard error in every cell.
RIVALS = ("PolyDom α=1.2", "Greedy", "GreedyAcc", "GreedyCost")


def load(dataset: str, sides, per_class: int, seed: int):
    if dataset == "digits":
        return load_digits_images(sides=sides, n_per_class=per_class, random_state=seed)
    return load_fashion_mnist_images(sides=sides, n_per_class=per_class, random_state=seed)


def split(n_pictures: int, n_sides: int, test_fraction: float, seed: int):
    """Train/held-out item positions; all renderings of one picture fall on one side."""
    rng = np.random.default_rng(seed)
    held = rng.permutation(n_pictures)[: int(round(n_pictures * test_fraction))]
    groups = np.repeat(np.arange(n_pictures), n_sides)
    test = np.isin(groups, held)
    return np.flatnonzero(~test), np.flatnonzero(test), groups


def fit_all(images, labels, groups, base: dict, methods, log):
    """Fit each method's classifier (the PolyDom variants that differ only in serving share one).

    One classifier is refitted per method with the same cache directory, as the demo fits its
    backends: the feature matrix and the cost fits are measured once and shared, so the methods
    differ in what they choose, not in the luck of their own timing run.
    """
    from lab.settings import variant_params

    fitted, seconds = {}, {}
    by_params = {}
    clf = polydom.CostSensitiveClassifier(**base)
    for name, (params, _) in methods.items():
        key = repr(sorted(params.items()))
        if key in by_params:
            fitted[name], seconds[name] = fitted[by_params[key]], seconds[by_params[key]]
            continue
        options = variant_params(params, base["timing"])
        options["learners"] = paper_learner() if params.get("learners") == "paper" else None
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence warnings of the paper's learner
            clf.set_params(**options).fit(images, labels, groups=groups)
        seconds[name] = time.perf_counter() - t0
        log(f"fitted {name} in {seconds[name]:.0f} s: {clf.index_!r}")
        fitted[name], by_params[key] = copy.copy(clf), name  # the next fit replaces clf's attributes
        fitted[name].planner_ = clf.server().planner  # served as a service serves: learning its guards
    return fitted, seconds


def cells(grid, sizes, sides):
    """Per (side, budget): accuracy, its standard error, violation rate, and the correct vectors."""
    out = {}
    for side in sides:
        rows = np.flatnonzero(sizes == side * side)
        for b, budget in enumerate(grid.budgets):
            c = grid.correct[b, rows].astype(float)
            p = c.mean()
            out[(side, budget)] = dict(acc=p, se=math.sqrt(max(p * (1 - p), 1e-12) / len(c)),
                                       viol=float((grid.measured[b, rows] > budget).mean()),
                                       mean_ms=1e3 * float(grid.measured[b, rows].mean()), correct=c)
    return out


def paired_se(a: np.ndarray, b: np.ndarray) -> float:
    d = a - b
    return float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else 0.0


def summarize(results, sides, budgets, reference="PolyDom"):
    """Per method: mean accuracy over cells, worst violation rate, and against the reference:
    cells within one paired SE, cells more than two paired SEs ahead or behind."""
    rows = {}
    for name, res in results.items():
        accs = [res[(s, b)]["acc"] for s in sides for b in budgets]
        viol = max(res[(s, b)]["viol"] for s in sides for b in budgets)
        diffs = [(res[(s, b)]["acc"] - results[reference][(s, b)]["acc"],
                  paired_se(res[(s, b)]["correct"], results[reference][(s, b)]["correct"])) for s in sides for b in budgets]
        rows[name] = dict(
            mean=float(np.mean(accs)), viol=viol,
            ahead=sum(d > 2 * se and d > 0 for d, se in diffs), behind=sum(-d > 2 * se and d < 0 for d, se in diffs),
        )
    return rows


def bar_check(results, sides, budgets, reference="PolyDom", rivals=RIVALS):
    """Cells where the reference is within one paired SE of (or above) the best rival."""
    ok, misses = 0, []
    for s in sides:
        for b in budgets:
            best = max(rivals, key=lambda r: results[r][(s, b)]["acc"])
            ref, top = results[reference][(s, b)], results[best][(s, b)]
            se = paired_se(ref["correct"], top["correct"])
            if ref["acc"] >= top["acc"] - se:
                ok += 1
            else:
                misses.append((s, b, best, top["acc"] - ref["acc"], se))
    return ok, misses


def report(args, results, summary, fit_seconds, ok, misses, sides, budgets, n_test, wall) -> str:
    lines = [
        f"# Real images, held out: {args.dataset}",
        "",
        f"`python -P benchmarks/realdata.py --dataset {args.dataset} --per-class {args.per_class} "
        f"--sides {','.join(map(str, sides))} --seed {args.seed}` ({wall:.0f} s on this machine)",
        "",
        f"{n_test} held-out items ({n_test // len(sides)} per size), features {', '.join(FEATURES)}; cv={args.cv}. "
        "Accuracy ± binomial standard error per cell; `v` is the share of items whose measured extraction "
        "time exceeded the budget. Comparisons use paired standard errors (same items). All methods share one "
        "feature matrix and one timing pass (the first fit measures them, the others reuse them: *fit (s)* "
        "counts that work once, in the first row).",
        "",
        "## Summary over all cells",
        "",
        "| method | mean accuracy | worst violation rate | cells > 2 SE ahead of PolyDom | cells > 2 SE behind | fit (s) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, row in summary.items():
        lines.append(f"| {name} | {row['mean']:.3f} | {100 * row['viol']:.1f}% | {row['ahead']} | {row['behind']} | "
                     f"{fit_seconds[name]:.0f} |")
    lines += ["", f"PolyDom (default) within one paired SE of the best of {', '.join(RIVALS)} in **{ok} of "
              f"{len(sides) * len(budgets)}** cells."]
    if misses:
        lines += ["", "Cells where it is not:", ""]
        lines += [f"- {s}² px, {1e3 * b:g} ms: {best} ahead by {d:.3f} (paired SE {se:.3f})" for s, b, best, d, se in misses]
    for side in sides:
        lines += ["", f"## {side}×{side} pixels", "",
                  "| budget (ms) | " + " | ".join(results) + " |", "|---:|" + "---:|" * len(results)]
        for b in budgets:
            cellrow = [f"{results[n][(side, b)]['acc']:.3f} ± {results[n][(side, b)]['se']:.3f} "
                       f"v{100 * results[n][(side, b)]['viol']:.0f}% ({results[n][(side, b)]['mean_ms']:.1f} ms)"
                       for n in results]
            lines.append(f"| {1e3 * b:g} | " + " | ".join(cellrow) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=("digits", "fashion-mnist"), default="digits")
    parser.add_argument("--sides", default="28,56,112")
    parser.add_argument("--per-class", type=int, default=50)
    parser.add_argument("--cv", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of the methods")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    started = time.perf_counter()
    log = lambda m: print(f"[{time.perf_counter() - started:6.0f} s] {m}", flush=True)  # noqa: E731
    sides = tuple(int(s) for s in args.sides.split(","))
    budgets = tuple(ms / 1e3 for ms in BUDGETS_MS)
    images, labels, item_sides = load(args.dataset, sides, args.per_class, args.seed)
    train, test, groups = split(len(images) // len(sides), len(sides), 0.3, args.seed)
    log(f"{len(images)} images: {len(train)} for training, {len(test)} held out")
    methods = {n: METHODS[n] for n in args.methods.split(",")}
    if "PolyDom" not in methods:
        raise SystemExit("the reference method PolyDom must be among --methods")
    with tempfile.TemporaryDirectory(prefix="polydom-realdata-") as cache:
        base = dict(features=list(FEATURES), cv=args.cv, random_state=args.seed, n_jobs=args.n_jobs,
                    cache_dir=cache, progress=False,
                    timing=polydom.Timing(sides=tuple(sorted({max(8, sides[0] * 3 // 4), *sides, sides[-1] * 5 // 4}))))
        fitted, fit_seconds = fit_all([images[i] for i in train], labels[train], groups[train], base, methods, log)
        # Held-out features computed and timed once, serially, with no worker of ours running.
        held = extract_features([images[i] for i in test], resolve_features(FEATURES), n_jobs=None)
        log(f"held-out features extracted in {held.seconds.sum():.1f} s of measured time")
        sizes = np.array([images[i].shape[0] * images[i].shape[1] for i in test])
        results = {}
        for name, (_, mode) in methods.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                grid = serve_grid(fitted[name], held.X, held.seconds, sizes, labels[test], budgets, mode=mode,
                                 cpu_seconds=held.cpu_seconds)
            results[name] = cells(grid, sizes, sides)
            log(f"served {name}")
    summary = summarize(results, sides, budgets)
    rivals_present = all(r in results for r in RIVALS)
    ok, misses = bar_check(results, sides, budgets) if rivals_present else (0, [])
    text = report(args, results, summary, fit_seconds, ok, misses, sides, budgets, len(test),
                  time.perf_counter() - started)
    out = pathlib.Path(args.out or HERE / "results" / f"realdata-{args.dataset}.md")
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
