"""The demo's job: load the images, fit every backend, serve the held-out images, write the report.

:func:`run_demo` is what ``python -P benchmarks/backends.py`` runs (see :mod:`lab` for the steps); the
command's options live in :mod:`lab.cli`.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import platform
import sys
import time
import warnings
from collections.abc import Iterator, Sequence

import numpy as np
from sklearn.base import clone

from polydom.classifier.policies import Timing
from polydom.serving.planner import ServingPlanner
from polydom.demo.data import load_split, split_pictures

from .settings import (
    BACKENDS, CASCADE, CASCADE_PAIR, DEFAULT_BUDGETS, DEFAULT_FEATURES, DEFAULT_PICTURES, DEFAULT_SIDES,
    SPECULATIVE, PLAIN, PRIMARY, REAL_PASS_BUDGETS, SERVING, TIES, TIMING_SIDES, variant_params,
)

__all__ = ["run_demo", "with_tolerance", "with_scores", "with_speculation", "split_pictures", "load_split", "load_run_split",
           "load_run_held_out", "run_arguments", "add_run_arguments", "finished_run"]

def _log(message: str) -> None:
    print(f"backends: {message}", file=sys.stderr, flush=True)


def with_tolerance(clf, tolerance: float | None):
    """A fitted PolyDom classifier with another tie rule: its trained sets, scores and models swept
    again with ``tolerance``, training nothing.

    A refit with ``tolerance`` would explore, train and rescore the same sets on the same folds
    (the learners are deterministic) and differ only in this sweep; it would also retrain the
    finalists in this process for their rescoring, which is what this saves.
    """
    out = _reswept(clf, clf.index_.explored, {"tolerance": tolerance})
    out.selection = clone(clf._policies()[0]).set_params(tolerance=tolerance)
    return out


def with_scores(clf, scores: str):
    """A fitted PolyDom classifier ranking its trained sets by ``scores`` (``"measured"`` or
    ``"monotone"``): the same sets, measured scores and models, swept again, training nothing.

    Unlike a refit, the finalists are not rescored again: a set the other ranking makes servable
    keeps the score it was trained with.
    """
    index = clf.index_.with_scores(scores)
    out = _reswept(clf, index.explored, {"scores": scores}, measured=index.measured,
                   stats={k: index.stats[k] for k in ("score_largest_rise", "score_largest_fall", "scores_moved")
                          if k in index.stats})
    out.selection = clone(clf._policies()[0]).set_params(scores=scores)
    return out


def _reswept(clf, explored: dict, params: dict, measured: dict | None = None, stats: dict | None = None):
    """``clf`` with its index swept again over ``explored`` (mask -> score) with ``params`` (and
    ``stats``) changed."""
    from polydom.serving.planner import ServingPlanner

    old = clf.index_
    index = type(old).from_trained(
        old.space, old.costs, explored, domain=old.domain, candidate_alpha=old.params.get("candidate_alpha", 1.0),
        models=old.models, stats={**old.stats, **(stats or {})}, params={**old.params, **params},
        std_error=old.std_error, chains=old.chains, cascades=old.cascades,
        measured=old.measured if measured is None else measured,
    )
    out = copy.copy(clf)
    out.index_ = index
    out.planner_ = ServingPlanner(index, clf.planner_.features, cascade=clf.planner_.cascade)
    expanded = clf.fit_stats_["expanded"]
    out.fit_stats_ = {**clf.fit_stats_, "extract_seconds": 0.0, "timing_seconds": 0.0, "build_seconds": 0.0,
                      "trained": 0, "reused": expanded}
    return out


def with_speculation(clf):
    """``clf`` walked trying features past their guards (``speculate=True``), with serving guards
    of its own, so that neither walk learns from the other's calls."""
    from polydom.serving.planner import ServingPlanner

    out = copy.copy(clf)
    out.serving = clone(clf._policies()[3]).set_params(speculate=True)
    out.planner_ = ServingPlanner(clf.index_, clf.planner_.features, cascade=clf.planner_.cascade, speculate=True)
    return out


def load_run_split(args):
    """:func:`load_split` for the finished run in ``args.out``, with the dataset, per-class counts,
    sides and seed it recorded (:func:`run_arguments`): ``(images, labels, train, test)``.

    Raises
    ------
    ValueError
        ``args.dataset`` is given and is not the run's dataset.
    """
    return _split_of(_run_of(args))


def _run_of(args) -> argparse.Namespace:
    """:func:`run_arguments` of ``args.out``, refused when ``args.dataset`` names another dataset."""
    run = run_arguments(args.out)
    asked = getattr(args, "dataset", None)
    if asked is not None and asked != run.dataset:
        raise ValueError(f"{args.out} is a {run.dataset} run, not {asked}")
    return run


def _split_of(run) -> tuple:
    """:func:`load_split` with a run's recorded settings."""
    return load_split(run.dataset, _run_sides(run), run.train_per_class, run.held_out_per_class, run.seed)


def _run_sides(args) -> tuple:
    """The sides a run rendered its pictures at: ``args.sides`` when given, else the demo's."""
    return tuple(getattr(args, "sides", None) or DEFAULT_SIDES)


def load_run_held_out(args):
    """The held-out images of the finished run in ``args.out``, as it measured
    them (its feature cache): ``(matrix, sizes, labels, pictures)``, with every feature's
    recorded time per image in ``matrix.seconds``.

    Raises
    ------
    ValueError
        The run's directory holds no cached features of this split.
    """
    from polydom.classifier.extraction import extract_features
    from polydom.featurizers import resolve_features

    run = _run_of(args)
    images, labels, _, test = _split_of(run)
    features = resolve_features(tuple(run.features or DEFAULT_FEATURES))
    matrix = extract_features([images[i] for i in test], features, n_jobs=None,
                              cache_dir=os.path.join(run.out, "cache", "features"))
    if not matrix.cached:
        raise ValueError(f"{run.out} holds no cached held-out features of this split; run the demo there first")
    sizes = np.array([images[i].shape[0] * images[i].shape[1] for i in test], dtype=float)
    return matrix, sizes, labels[test], test // len(_run_sides(run))


def run_arguments(out) -> argparse.Namespace:
    """The settings of the finished run in ``out``: ``out``, ``dataset``, ``train_per_class``,
    ``held_out_per_class``, ``features``, ``sides``, ``budgets`` and ``seed`` (from its
    ``headline.json``; the demo's defaults, and seed 0, for a run that recorded none)."""
    from . import headline

    settings = (headline.read(out) or {}).get("settings") or {}
    return argparse.Namespace(out=os.fspath(out), dataset=settings.get("dataset", "digits"),
                              train_per_class=settings.get("train_per_class", DEFAULT_PICTURES[0]),
                              held_out_per_class=settings.get("held_out_per_class", DEFAULT_PICTURES[1]),
                              features=settings.get("features"), sides=settings.get("sides"),
                              budgets=tuple(settings.get("budgets") or DEFAULT_BUDGETS),
                              seed=int(settings.get("random_state", 0)))


def add_run_arguments(parser) -> None:
    """The options of a benchmark that judges a finished demo run: ``--out``, the run's directory,
    and ``--dataset``, optional, which :func:`load_run_split` refuses unless it is the run's own.
    Everything else about the run (split, sides, seed, budgets) comes from the settings it
    recorded (:func:`run_arguments`), so that a benchmark cannot rebuild another split than the
    one the run measured."""
    parser.add_argument("--out", required=True, type=finished_run, help="a finished `python -P benchmarks/backends.py --out` directory")
    parser.add_argument("--dataset", choices=("digits", "fashion-mnist"), default=None,
                        help="optional: refused unless it is the run's own dataset")


def finished_run(out: str) -> str:
    """``out`` when it holds a finished demo run (its ``headline.json``), else a usage error."""
    from . import headline

    if headline.read(out) is None:
        raise argparse.ArgumentTypeError(f"{out} holds no finished demo run (no headline); run `python -P benchmarks/backends.py --out {out}` first")
    return out


@contextlib.contextmanager
def _noting(notes: list) -> Iterator[None]:
    """Warnings the report should carry (the learner's summary, a contended timing pass) become
    one log line each and a note in ``notes``; any other warning is shown as Python shows it."""
    with warnings.catch_warnings(record=True) as caught:
        yield
    for w in caught:
        if w.category.__name__ in ("LearnerWarning", "CostMeasurementWarning"):
            notes.append(f"{w.category.__name__}: {w.message}")
            _log(f"note: {w.message}")
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def _load_average() -> str:
    """The one-minute load average, as text ("?" where the system does not report it)."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except (AttributeError, OSError):
        return "?"


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
    train_per_class: int = DEFAULT_PICTURES[0],
    held_out_per_class: int = DEFAULT_PICTURES[1],
    sides: Sequence[int] = DEFAULT_SIDES,
    cv: int = 3,
    cv_repeats: int = 1,
    dataset: str = "digits",
    n_jobs: int | None = -1,
    cache_dir=None,
    timing_sides: Sequence[int] = TIMING_SIDES,
    timing_images: int = 4,
    timing_repeats: int = 5,
    budgets: Sequence[float] = DEFAULT_BUDGETS,
    real_items: int = 40,
    random_state: int = 0,
    compare=None,
    progress: bool | None = True,
) -> dict:
    """Run the demo and write ``out/report.md``; returns the numbers it reports.

    Parameters
    ----------
    out : path
        Output directory: ``report.md``, PNG plots, ``headline.json`` (the numbers a later run
        compares itself with), ``index/`` (the PolyDom α=1 classifier as an LMDB index),
        ``indexes/`` (one per backend) and, by default, ``cache/``.
    features : sequence of str
        Feature names from the registry.
    train_per_class, held_out_per_class : int
        Pictures per class for training and held out; each is rendered at every side.
    sides : sequence of int
        Image sides.
    cv : int
        Folds per feature set.
    cv_repeats : int
        Draws of those folds (the classifier's ``cv_repeats``).
    dataset : {"digits", "fashion-mnist"}
        scikit-learn's digits, or Fashion-MNIST when Debian's ``dataset-fashion-mnist`` is installed.
    n_jobs : int
        Parallel workers for extraction and training.
    cache_dir : path, optional
        Feature and expansion cache (``None``: none).
    timing_sides, timing_images, timing_repeats
        Cost measurement: square sides, how many training images are timed, passes over them.
    budgets : sequence of float
        Seconds of extraction per image to serve at.
    real_items : int
        Held-out images served for real (features computed and timed) per budget in the real pass.
    random_state : int
    compare : path, optional
        A ``headline.json`` (or the output directory of another run) to compare the headline
        numbers with; default: the one a previous run left in ``out``.
    progress : bool or None, default True
        The classifier's progress reporting (plain lines when stderr is not a terminal).

    Returns
    -------
    dict
    """
    from threadpoolctl import threadpool_limits

    # The demo's parallelism is over images and feature sets (joblib workers). BLAS threads on
    # top of them oversubscribe the cores, and on a loaded two-core machine a spinning BLAS
    # thread made a 15 ms logistic regression take over a second; one thread each avoids it.
    with threadpool_limits(1):
        return _run(out, features=tuple(features), train_per_class=train_per_class,
                    held_out_per_class=held_out_per_class, sides=tuple(int(s) for s in sides), cv=cv,
                    cv_repeats=cv_repeats, dataset=dataset,
                    n_jobs=n_jobs, cache_dir=cache_dir, timing_sides=tuple(int(s) for s in timing_sides),
                    timing_images=timing_images, timing_repeats=timing_repeats, budgets=tuple(budgets),
                    real_items=real_items, random_state=random_state, compare=compare, progress=progress)


def _run(out, *, features, train_per_class, held_out_per_class, sides, cv, cv_repeats, dataset, n_jobs, cache_dir,
         timing_sides, timing_images, timing_repeats, budgets, real_items, random_state, compare, progress) -> dict:
    import polydom
    from polydom.classifier.extraction import extract_features
    from polydom.featurizers import resolve_features

    from . import headline, plots, report
    from polydom.demo.evaluation import lookup_latency, serve_grid, serving_overhead

    from .answers import ANSWERS_FILE, save_answers

    started = time.perf_counter()
    load_at_start = _load_average()
    stages: dict[str, float] = {}
    out = os.fspath(out)
    os.makedirs(out, exist_ok=True)
    resolve_features(features)  # unknown names fail before any work
    if dataset not in ("digits", "fashion-mnist"):
        raise ValueError(f"dataset must be 'digits' or 'fashion-mnist', got {dataset!r}")
    # Read now: this run overwrites the file when it is done.
    previous = headline.read(compare if compare is not None else out)

    t = time.perf_counter()
    images, labels, train, test = load_split(dataset, sides, train_per_class, held_out_per_class, random_state)
    groups = np.arange(len(images)) // len(sides)
    train_images = [images[i] for i in train]
    test_images = [images[i] for i in test]
    y_train, y_test = labels[train], labels[test]
    test_sizes = np.array([im.shape[0] * im.shape[1] for im in test_images])
    test_pictures = test // len(sides)  # the picture each held-out image was rendered from
    majority = np.bincount(y_train).argmax()
    stages["load and render images"] = time.perf_counter() - t
    _log(f"{len(images)} images ({len(images) // len(sides)} {dataset} pictures x sides {sides}): "
         f"{len(train)} for training, {len(test)} held out; {len(features)} features")

    timing = Timing(sides=timing_sides, repeats=timing_repeats, images=timing_images)
    # Every variant's fit reuses the features the first one extracted: a cache directory, the
    # run's own when none was given.
    features_cache = cache_dir if cache_dir is not None else os.path.join(out, "cache")
    clf = polydom.CostSensitiveClassifier(
        features=list(features), cv=cv, timing=timing, cache_dir=features_cache,
        n_jobs=n_jobs, random_state=random_state, progress=progress,
    )
    fitted, fit_seconds, notes = {}, {}, []
    for name, params in BACKENDS:
        _log(f"fitting {name}")
        t = time.perf_counter()
        with _noting(notes):
            settings = variant_params(params, timing)
            settings["selection"].set_params(cv_repeats=cv_repeats)
            clf.set_params(**settings).fit(train_images, y_train, groups=groups[train])
        fitted[name] = copy.copy(clf)  # the next fit replaces clf's fitted attributes, not this copy's
        # Served as a service serves it: a planner that learns its guards from the replayed times.
        fitted[name].planner_ = ServingPlanner(clf.index_, clf.planner_.features, cascade=clf.planner_.cascade)
        fit_seconds[name] = time.perf_counter() - t
        s = clf.fit_stats_
        _log(f"{name}: {s['trained']} sets trained, {s['reused']} reused from the cache, {fit_seconds[name]:.1f} s")
        if name == PRIMARY:
            t = time.perf_counter()
            fitted[TIES] = with_tolerance(clf, None)
            fit_seconds[TIES] = time.perf_counter() - t
            fitted[TIES].fit_stats_["build_seconds"] = fit_seconds[TIES]
            _log(f"{TIES}: {PRIMARY}'s sets swept again with the tie rule, {fit_seconds[TIES]:.1f} s")
            fitted[PLAIN], fit_seconds[PLAIN] = fitted[PRIMARY], 0.0  # the same index, served without the walk
            fitted[SPECULATIVE], fit_seconds[SPECULATIVE] = with_speculation(fitted[PRIMARY]), 0.0
    stages["fit the backends"] = sum(fit_seconds.values())
    primary = fitted[PRIMARY]

    t = time.perf_counter()
    index_dir = os.path.join(out, "index")
    primary.save(index_dir)
    loaded = polydom.CostSensitiveClassifier.load(index_dir)
    loaded.planner_ = loaded.server().planner  # served as the primary is: learning its guards afresh
    sizes_bytes = {PRIMARY: _index_bytes(index_dir)}
    for name, model in fitted.items():
        if name not in (PRIMARY, PLAIN, SPECULATIVE):
            path = os.path.join(out, "indexes", name.replace(" ", "-").replace("α=", "alpha"))
            model.save(path)
            sizes_bytes[name] = _index_bytes(path)
    sizes_bytes[PLAIN] = sizes_bytes[SPECULATIVE] = sizes_bytes[PRIMARY]
    stages["save and load the indexes"] = time.perf_counter() - t

    t = time.perf_counter()
    _log(f"computing and timing every feature of the {len(test)} held-out images, one at a time")
    # Sequential, so that each feature's time on each held-out image is not shared with a worker.
    held_cache = None if cache_dir is None else os.path.join(cache_dir, "features")
    held_out = extract_features(test_images, resolve_features(features), n_jobs=None, cache_dir=held_cache)
    stages["held-out features (sequential, timed)"] = time.perf_counter() - t

    t = time.perf_counter()
    grids = {name: serve_grid(model, held_out.X, held_out.seconds, test_sizes, y_test, budgets,
                              mode=SERVING.get(name, "select"), cpu_seconds=held_out.cpu_seconds)
             for name, model in fitted.items()}
    cascade_pair = _cascade_pair(fitted.get(CASCADE), held_out, test_sizes, y_test, budgets)
    loaded_grid = serve_grid(loaded, held_out.X, held_out.seconds, test_sizes, y_test, budgets,
                             cpu_seconds=held_out.cpu_seconds)
    round_trip = bool(np.array_equal(loaded_grid.correct, grids[PRIMARY].correct)
                      and np.array_equal(loaded_grid.keys, grids[PRIMARY].keys))
    kept = dict(grids)
    if cascade_pair is not None:
        kept.update({f"{CASCADE_PAIR}/{mode}": grid for mode, grid in cascade_pair.items()})
    save_answers(os.path.join(out, ANSWERS_FILE), kept, test_sizes, test_pictures, y_test)
    stages["serve the held-out grid"] = time.perf_counter() - t

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

    results = {
        "out": out, "dataset": dataset, "features": features, "sides": sides, "train_per_class": train_per_class,
        "held_out_per_class": held_out_per_class, "cv": cv, "cv_repeats": cv_repeats, "n_jobs": n_jobs,
        "n_train": len(train),
        "n_test": len(test), "n_test_pictures": len(test) // len(sides), "budgets": list(budgets),
        "test_sizes": test_sizes, "test_pictures": test_pictures, "y_test": y_test,
        "chance": float(np.mean(y_test == majority)), "unique_sizes": sorted(set(test_sizes.tolist())),
        "fitted": fitted, "fit_seconds": fit_seconds, "grids": grids, "cascade_pair": cascade_pair,
        "round_trip": round_trip,
        "index_dir": index_dir, "index_bytes": sizes_bytes, "latency": latency, "overhead": overhead, "real": real,
        "stages": stages, "cache_dir": cache_dir, "random_state": random_state,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "held_out_cached": held_out.cached, "held_out_seconds": held_out.seconds, "previous": previous,
        "notes": notes,
    }

    t = time.perf_counter()
    results["figures"] = plots.draw_all(results, out)
    stages["plots"] = time.perf_counter() - t

    results["load"] = (load_at_start, _load_average())
    results["headline"] = headline.make(results)
    # Stages so far, and the report written last: its own few milliseconds are not in the total.
    results["wall_seconds"] = time.perf_counter() - started
    results["headline"]["wall_seconds"] = results["wall_seconds"]
    results["report"] = report.write_report(os.path.join(out, "report.md"), results)
    headline.write(out, results["headline"])
    return results


def _cascade_pair(clf, held_out, sizes, y, budgets):
    """The cascade's index served twice, walking plainly and stopping when confident, each from a
    snapshot of the guards its own grid learned: the two differ only in the early stops. (The
    cascade backend and the primary learn their guards apart, so at tight budgets they can serve
    other sets for reasons that are not the cascade's.) None without a cascade backend."""
    from polydom.demo.evaluation import serve_grid

    if clf is None:
        return None
    planner = clf.planner_
    learned = planner.serving_guards
    pair = {}
    try:
        for mode in ("select", "cascade"):
            planner.serving_guards = None if learned is None else learned.snapshot()
            pair[mode] = serve_grid(clf, held_out.X, held_out.seconds, sizes, y, budgets, mode=mode,
                                    cpu_seconds=held_out.cpu_seconds)
    finally:
        planner.serving_guards = learned
    return pair


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
        for budget in REAL_PASS_BUDGETS:
            for i, image in enumerate(subset):
                start = time.perf_counter()
                (exp,) = clf.explain([image], budget=budget)
                wall = time.perf_counter() - start
                rows.append((budget, int(sizes[chosen[i]]), exp.predicted_cost, exp.measured_cost, wall,
                             exp.label == y[chosen[i]], len(exp.features)))
        out[name] = np.array(rows, dtype=float)
    return out
