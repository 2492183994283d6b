"""The demo's job: load the images, fit every backend, serve the held-out images, write the report.

:func:`run_demo` is what ``polydom demo`` runs (see :mod:`polydom.demo` for the steps); the
command's options live in :mod:`polydom.cli.demo`.
"""

from __future__ import annotations

import copy
import os
import platform
import sys
import time
from collections.abc import Sequence

import numpy as np

__all__ = ["run_demo", "DEFAULT_FEATURES", "QUICK_FEATURES", "DEFAULT_SIDES", "TIMING_SIDES", "FASHION_SIDES",
           "FASHION_TIMING_SIDES", "DEFAULT_BUDGETS", "BACKENDS", "PRIMARY"]

#: The demo's feature lattice: the built-in features minus ``size_meta`` (all classes share the
#: same sizes, so it is chance-level) and ``glcm`` (the weakest of the rest); 2^8 sets keep the
#: exact alpha = 1 exploration within the demo's time limit on two cores.
DEFAULT_FEATURES = ("intensity_hist", "thumbnail", "fft_bands", "edge_density", "lbp", "harris", "hog", "gabor")
QUICK_FEATURES = ("intensity_hist", "thumbnail", "edge_density", "hog")
DEFAULT_SIDES = (16, 32, 48, 64)
TIMING_SIDES = (16, 24, 32, 48, 64, 80)
FASHION_SIDES = (28, 56, 84, 112)
FASHION_TIMING_SIDES = (20, 28, 40, 56, 84, 112, 140)
#: Seconds of feature extraction per image.
DEFAULT_BUDGETS = (0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
BACKENDS = (
    ("PolyDom α=1", {"backend": "polydom", "alpha": 1.0}),
    ("PolyDom α=1.2", {"backend": "polydom", "alpha": 1.2}),
    ("Greedy", {"backend": "greedy"}),
    ("GreedyAcc", {"backend": "greedy-acc"}),
    ("GreedyCost", {"backend": "greedy-cost"}),
)
PRIMARY = "PolyDom α=1"


def _log(message: str) -> None:
    print(f"polydom demo: {message}", file=sys.stderr, flush=True)


def _split(labels: np.ndarray, n_sides: int, test_fraction: float, random_state: int):
    """Training and held-out image indices, whole pictures at a time, stratified by class."""
    pictures = labels[::n_sides]
    rng = np.random.default_rng(random_state)
    test = []
    for label in np.unique(pictures):
        members = rng.permutation(np.flatnonzero(pictures == label))
        test.extend(members[: max(1, int(round(len(members) * test_fraction)))].tolist())
    is_test = np.zeros(len(pictures), dtype=bool)
    is_test[test] = True
    expand = np.repeat(is_test, n_sides)
    return np.flatnonzero(~expand), np.flatnonzero(expand)


def _index_bytes(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            if f == "data.mdb":
                total += os.path.getsize(os.path.join(root, f))
    return total


def run_demo(
    out,
    *,
    features: Sequence[str] = DEFAULT_FEATURES,
    per_class: int = 26,
    sides: Sequence[int] = DEFAULT_SIDES,
    cv: int = 3,
    dataset: str = "digits",
    n_jobs: int | None = -1,
    cache_dir=None,
    timing_sides: Sequence[int] = TIMING_SIDES,
    timing_images: int = 8,
    budgets: Sequence[float] = DEFAULT_BUDGETS,
    real_items: int = 40,
    random_state: int = 0,
) -> dict:
    """Run the demo and write ``out/report.md``; returns the numbers it reports.

    Parameters
    ----------
    out : path
        Output directory: ``report.md``, PNG plots, ``index/`` (the PolyDom α=1 classifier as an
        LMDB index), ``indexes/`` (one per backend) and, by default, ``cache/``.
    features : sequence of str
        Feature names from the registry.
    per_class : int
        Digits per class; each is rendered at every side.
    sides : sequence of int
        Image sides.
    cv : int
        Folds per feature set.
    dataset : {"digits", "fashion-mnist"}
        scikit-learn's digits, or Fashion-MNIST when Debian's ``dataset-fashion-mnist`` is installed.
    n_jobs : int
        Parallel workers for extraction and training.
    cache_dir : path, optional
        Feature and expansion cache (``None``: none).
    timing_sides, timing_images
        Cost measurement: square sides and how many training images are timed.
    budgets : sequence of float
        Seconds of extraction per image to serve at.
    real_items : int
        Held-out images served for real (features computed and timed) per budget in the real pass.
    random_state : int

    Returns
    -------
    dict
    """
    import polydom
    from polydom.featurizers import resolve_features
    from polydom.featurizers.datasets import load_digits_images, load_fashion_mnist_images

    from . import plots, report
    from .evaluation import lookup_latency, serve_grid, serving_overhead
    from polydom.extraction import extract_features

    started = time.perf_counter()
    stages: dict[str, float] = {}
    out = os.fspath(out)
    os.makedirs(out, exist_ok=True)
    features = tuple(features)
    resolve_features(features)  # unknown names fail before any work
    sides = tuple(int(s) for s in sides)

    t = time.perf_counter()
    if dataset not in ("digits", "fashion-mnist"):
        raise ValueError(f"dataset must be 'digits' or 'fashion-mnist', got {dataset!r}")
    load = load_digits_images if dataset == "digits" else load_fashion_mnist_images
    images, labels, _ = load(sides=sides, n_per_class=per_class, random_state=random_state)
    train, test = _split(labels, len(sides), 0.3, random_state)
    groups = np.arange(len(images)) // len(sides)
    train_images = [images[i] for i in train]
    test_images = [images[i] for i in test]
    y_train, y_test = labels[train], labels[test]
    test_sizes = np.array([im.shape[0] * im.shape[1] for im in test_images])
    stages["load data"] = time.perf_counter() - t
    _log(f"{len(images)} images ({len(images) // len(sides)} {dataset} pictures x sides {sides}): "
         f"{len(train)} for training, {len(test)} held out; {len(features)} features")

    clf = polydom.CostSensitiveClassifier(
        features=list(features), cv=cv, cost_quantile=0.95, timing_sides=tuple(timing_sides),
        timing_repeats=5, timing_images=timing_images, cache_dir=cache_dir, warm_start=True,
        n_jobs=n_jobs, random_state=random_state,
    )
    fitted = {}
    for name, params in BACKENDS:
        t = time.perf_counter()
        clf.set_params(**params).fit(train_images, y_train, groups=groups[train])
        fitted[name] = copy.copy(clf)  # the next fit replaces clf's fitted attributes, not this copy's
        stages[f"fit {name}"] = time.perf_counter() - t
        s = clf.fit_stats_
        _log(f"{name}: {s['trained']} sets trained, {s['reused']} reused from the cache, "
             f"{time.perf_counter() - t:.1f} s")
    primary = fitted[PRIMARY]

    t = time.perf_counter()
    index_dir = os.path.join(out, "index")
    primary.save(index_dir)
    loaded = polydom.CostSensitiveClassifier.load(index_dir)
    sizes_bytes = {PRIMARY: _index_bytes(index_dir)}
    for name, model in fitted.items():
        if name != PRIMARY:
            path = os.path.join(out, "indexes", name.replace(" ", "-").replace("α=", "alpha"))
            model.save(path)
            sizes_bytes[name] = _index_bytes(path)
    stages["save + load LMDB"] = time.perf_counter() - t
    _log(f"saved {index_dir} and loaded it back ({stages['save + load LMDB']:.1f} s)")

    t = time.perf_counter()
    # Sequential, so that each feature's time on each held-out image is taken on a quiet machine.
    held_cache = None if cache_dir is None else os.path.join(cache_dir, "features")
    held_out = extract_features(test_images, resolve_features(features), n_jobs=None, cache_dir=held_cache)
    stages["held-out features (sequential, timed)"] = time.perf_counter() - t

    t = time.perf_counter()
    grids = {name: serve_grid(model, held_out.X, held_out.seconds, test_sizes, y_test, budgets)
             for name, model in fitted.items()}
    loaded_grid = serve_grid(loaded, held_out.X, held_out.seconds, test_sizes, y_test, budgets)
    round_trip = bool(np.array_equal(loaded_grid.correct, grids[PRIMARY].correct)
                      and np.array_equal(loaded_grid.n_features, grids[PRIMARY].n_features))
    stages["serve held-out grid"] = time.perf_counter() - t

    t = time.perf_counter()
    rng = np.random.default_rng(random_state)
    q_sizes = rng.choice(test_sizes, 2000)
    q_budgets = rng.choice(np.asarray(budgets), 2000)
    latency = {name: lookup_latency(model.index_, q_sizes, q_budgets) for name, model in fitted.items()}
    overhead = serving_overhead(loaded, held_out.X[: min(len(test_sizes), 200)],
                                test_sizes[: min(len(test_sizes), 200)], budgets)
    stages["latency"] = time.perf_counter() - t

    t = time.perf_counter()
    real = _real_pass(loaded, fitted["GreedyCost"], test_images, test_sizes, y_test, real_items, random_state)
    stages["real serving pass"] = time.perf_counter() - t

    t = time.perf_counter()
    unique_sizes = sorted(set(test_sizes.tolist()))
    figures = {
        "cost_curves": plots.plot_cost_curves(primary.cost_fits_, os.path.join(out, "cost_curves.png")),
        "accuracy_vs_budget": plots.plot_accuracy_vs_budget(
            budgets, {n: g.accuracy() for n, g in grids.items()}, os.path.join(out, "accuracy_vs_budget.png")),
        "violations_by_size": plots.plot_violations_by_size(
            unique_sizes,
            {n: [float((g.measured[:, test_sizes == s] > g.budgets[:, None]).mean()) for s in unique_sizes]
             for n, g in grids.items()},
            os.path.join(out, "violations_by_size.png")),
        "accuracy_by_size": plots.plot_accuracy_by_size(
            budgets, {s: grids[PRIMARY].correct[:, test_sizes == s].mean(axis=1) for s in unique_sizes},
            os.path.join(out, "accuracy_by_size.png"), title=f"{PRIMARY}: held-out accuracy vs budget per size"),
        "expansions": plots.plot_expansions(
            {n: m.fit_stats_["trained"] + m.fit_stats_["reused"] for n, m in fitted.items()}, 2 ** len(features),
            os.path.join(out, "expansions.png")),
    }
    stages["plots"] = time.perf_counter() - t

    results = {
        "out": out, "dataset": dataset, "features": features, "sides": sides, "per_class": per_class, "cv": cv, "n_jobs": n_jobs,
        "n_train": len(train), "n_test": len(test), "budgets": list(budgets), "test_sizes": test_sizes,
        "unique_sizes": unique_sizes, "fitted": fitted, "grids": grids, "round_trip": round_trip,
        "index_dir": index_dir, "index_bytes": sizes_bytes, "latency": latency, "overhead": overhead,
        "real": real, "figures": figures, "stages": stages, "cache_dir": cache_dir,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "held_out_cached": held_out.cached,
    }
    results["wall_seconds"] = time.perf_counter() - started
    results["report"] = report.write_report(os.path.join(out, "report.md"), results)
    return results


def _real_pass(polydom_clf, greedy_clf, images, sizes, y, per_budget: int, random_state: int) -> dict:
    """Serve some held-out images for real -- features computed now -- through the loaded index
    and through GreedyCost's anytime walk, at a few budgets."""
    rng = np.random.default_rng(random_state + 1)
    unique = sorted(set(sizes.tolist()))
    per_size = max(1, per_budget // len(unique))
    chosen = np.concatenate([rng.permutation(np.flatnonzero(sizes == s))[:per_size] for s in unique])
    subset = [images[i] for i in chosen]
    out = {}
    for name, clf in (("PolyDom α=1 (loaded from LMDB)", polydom_clf), ("GreedyCost (anytime, measured)", greedy_clf)):
        rows = []
        for budget in (0.001, 0.005, 0.05):
            for i, image in enumerate(subset):
                start = time.perf_counter()
                (exp,) = clf.explain([image], budget=budget)
                wall = time.perf_counter() - start
                rows.append((budget, int(sizes[chosen[i]]), exp.predicted_cost, exp.measured_cost, wall,
                             exp.label == y[chosen[i]], len(exp.features)))
        out[name] = np.array(rows, dtype=float)
    return out
