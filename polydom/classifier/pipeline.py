"""The classifier's fit pipeline: extract, time, learn, build.

1. **Extract** every feature of every training image once (:func:`polydom.classifier.extraction.extract_features`).
2. **Time** the features on this machine across sizes and fit one cost curve per feature
   (:func:`polydom.costs.measure.measure_feature_costs`).
3. **Learn**: the cross-validated black box over the feature matrix
   (:class:`polydom.classifier.blackbox.FeatureSetLearner`), on folds shared by every set.
4. **Build** the index with :func:`polydom.build`; sets already in the expansion cache are not
   trained again.

:func:`run_fit` runs the four steps on validated parameters (:class:`FitSettings`) and returns a
:class:`FitResult`. With a cache directory, the feature matrix, the cost fits and the trained
sets are reused when their inputs are unchanged, so a refit with another ``alpha`` or backend only builds.

Progress (:class:`TrainingProgress`): bars on a terminal; with ``progress=True`` and no terminal,
plain lines -- one per step, and the sets trained with their rate and the time left at that rate.
The learner's warnings are counted per fit and reported once, after the build
(:class:`polydom.classifier.warntally.WarningTally`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from polydom.backends import backend_spec
from polydom.costs.calibration import (
    CALIBRATION_IMAGES,
    DEFAULT_GUARD_QUANTILE,
    calibrate_fits,
    guard_table,
    law_table,
    serving_sample,
)
from polydom.costs.measure import TIMING_SHARE, CostFit, bin_sizes, costs_from_extraction, plan_timing
from polydom.featurizers import Feature, default_features, item_size, resolve_features, with_steps
from polydom.lattice.featureset import MAX_FEATURES

from .policies import Cascade, Selection, Serving, Timing
from .progress import ProgressLog, TrainingProgress, sets_in_cache

__all__ = ["FitSettings", "FitResult", "TrainingProgress", "sets_in_cache", "run_fit", "expansion_cache_key",
           "learner_estimator", "MAX_FEATURES"]



def learner_estimator(estimator, random_state):
    """The black box's learners as ``[(name, estimator), ...]``: clones of ``estimator`` (one
    classifier, a list of them or of named pairs; ``None``: :func:`polydom.classifier.blackbox.default_learners`)
    with every unset ``random_state`` -- nested ones included -- filled with ours."""
    from sklearn.base import clone

    from .blackbox import as_learners

    out = []
    for name, est in as_learners(estimator):
        est = clone(est)
        if random_state is not None:
            updates = {k: random_state for k, v in est.get_params(deep=True).items()
                       if (k == "random_state" or k.endswith("__random_state")) and v is None}
            est = est.set_params(**updates) if updates else est
        out.append((name, est))
    return out


def _feature_list(features) -> list[Feature]:
    resolved = default_features() if features is None else resolve_features(features)
    if not resolved:
        raise ValueError("features is empty: give at least one feature")
    if len(resolved) > MAX_FEATURES:
        raise ValueError(f"at most {MAX_FEATURES} features are supported, got {len(resolved)}")
    return resolved


@dataclass(frozen=True)
class FitSettings:
    """What the pipeline needs from the classifier's parameters, already checked: the top-level
    ones, and the four settings groups as objects, read where they are used.

    Build one with :meth:`from_classifier`. ``features`` are resolved to :class:`Feature`
    objects, ``estimator`` is the seeded clone the black box trains, ``cascade`` is None where
    the classifier trains no cascade, and ``scoring`` is the score sets are ranked by
    (``selection.scoring``; for several labels, the label-weighted accuracy).
    """

    features: list
    estimator: Any
    cv: Any
    cache_dir: Any
    n_jobs: Any
    random_state: Any
    progress: Any
    selection: Selection
    timing: Timing
    serving: Serving
    cascade: Cascade | None
    scoring: Any

    @classmethod
    def from_classifier(cls, clf) -> "FitSettings":
        """Settings from a validated ``CostSensitiveClassifier``: its groups, defaults where None."""
        selection, timing, cascade, serving = clf._policies()
        return cls(features=_feature_list(clf.features), estimator=learner_estimator(clf.learners, clf.random_state),
                   cv=clf.cv, cache_dir=clf.cache_dir, n_jobs=clf.n_jobs, random_state=clf.random_state,
                   progress=clf.progress, selection=selection, timing=timing, serving=serving, cascade=cascade,
                   scoring=selection.scoring)

    def cache_path(self, part: str) -> str | None:
        """``cache_dir/part``, or None without a cache directory."""
        return None if self.cache_dir is None else os.path.join(os.fspath(self.cache_dir), part)


@dataclass(frozen=True)
class FitResult:
    """Everything a fit produces; the classifier copies it into its fitted attributes."""

    index: Any
    classes: np.ndarray
    features: list
    columns: dict
    fits: dict[str, CostFit]
    n0: float
    timing_sides: tuple
    stats: dict
    cascade: bool = False


def expansion_cache_key(matrix, y, splits, estimator, scoring) -> str:
    """What trained sets depend on: data, features' columns, folds, learner, scoring, scikit-learn."""
    import sklearn

    h = hashlib.sha256(b"polydom-expansions-v1")
    h.update(np.ascontiguousarray(matrix.X).tobytes())
    h.update(repr((list(matrix.columns.items()), np.asarray(y).tolist())).encode())
    for train, test in splits:
        h.update(np.asarray(train).tobytes())
        h.update(np.asarray(test).tobytes())
    learners = [(name, est, est.get_params(deep=True)) for name, est in estimator]
    h.update(repr((learners, scoring, sklearn.__version__)).encode())
    return h.hexdigest()


def _folds(s: FitSettings, y, groups):
    """The folds every set is scored on, and the further folds that rescore the finalists.

    Both come from one draw of ``cv_repeats + finalist_repeats`` repeated k-folds, so the
    finalists' second opinion never reuses a split of the first.
    """
    from .blackbox import make_splits

    if not isinstance(s.cv, int) or s.selection.finalist_repeats == 0:
        return make_splits(s.cv, y, groups, s.random_state, repeats=s.selection.cv_repeats if isinstance(s.cv, int) else 1), []
    every = make_splits(s.cv, y, groups, s.random_state, repeats=s.selection.cv_repeats + s.selection.finalist_repeats)
    first = s.cv * s.selection.cv_repeats
    return every[:first], every[first:]


#: Fewest features for which a PolyDom build screens sets before training them fully: below
#: it the lattice is small enough (8 sets) that screening would cost more than it saves.
SCREEN_FROM_FEATURES = 4


def _screen_folds(s: FitSettings, y, groups):
    """The screening draw (a grouped, stratified 2-fold split), or None where sets are trained
    fully at once: another backend (Greedy walks every set it trains), a splitter of the
    caller's own (its folds are the ones to use), or a small lattice."""
    from .blackbox import make_splits

    if s.selection.backend != "polydom" or not isinstance(s.cv, int) or len(s.features) < SCREEN_FROM_FEATURES:
        return None
    # Another draw than the scoring folds', from the same seed.
    seed = s.random_state + 1 if isinstance(s.random_state, (int, np.integer)) else s.random_state
    try:
        return make_splits(2, y, groups, seed)
    except ValueError:  # a class (or its groups) too small to split in two: train fully
        return None


def _cascade_folds(y, groups, random_state):
    """:data:`~polydom.classifier.cascades.CASCADE_FOLDS` grouped, stratified folds for the cascade's
    out-of-fold probabilities, fewer when the smallest class (or the groups) cannot fill them."""
    from .blackbox import make_splits
    from .cascades import CASCADE_FOLDS

    _, counts = np.unique(y, return_counts=True)
    units = counts.min() if groups is None else min(len(np.unique(np.asarray(groups)[np.asarray(y) == c]))
                                                     for c in np.unique(y))
    return make_splits(int(max(2, min(CASCADE_FOLDS, units))), y, groups, random_state)


def _measure_costs(images, sizes, matrix, items, s: FitSettings, say, counter=None) -> dict[str, CostFit]:
    """The timing pass: cost curves from the extraction's own calls, plus what they lack.

    Sequential calls are the samples (a parallel extraction's calls shared the machine: a
    sample of images is computed again one by one, :func:`polydom.costs.calibration.serving_sample`).
    Sizes the training images lack are timed on resized copies within what is left of
    :data:`~polydom.costs.measure.TIMING_SHARE` of the extraction's compute time (all of
    ``timing_sides`` when the caller named them); then the curves are calibrated. ``items`` are
    the matrix's: the steps the features share, then the features.
    """
    started = time.perf_counter()
    budget = TIMING_SHARE * float(np.nansum(matrix.seconds))
    # Whether the extraction's calls shared the machine: as the matrix records it (a cached one
    # may come from a fit with other workers), else as this fit would have computed it.
    parallel = s.n_jobs not in (None, 1) if matrix.workers is None else matrix.workers > 1
    sample = None
    if parallel:
        # Half the budget for the sequential sample: at the extraction's mean time per image.
        count = int(min(CALIBRATION_IMAGES, len(images), max(24, TIMING_SHARE / 2 * len(images))))
        say(f"computing the features of {count} images one after another (the workers shared the machine)")
        sample = serving_sample(images, items, sizes, count, s.random_state)
    serial, serial_sizes = sample if sample is not None else (matrix, sizes)
    per_image = np.nansum(serial.cpu_seconds if serial.cpu_seconds is not None else serial.seconds, axis=1)
    plan = plan_timing(serial_sizes, per_image, sides=s.timing.sides, degree=s.timing.degree, images=s.timing.images,
                       repeats=s.timing.repeats, budget=max(0.0, budget - (time.perf_counter() - started)))
    say(f"timing {len(s.features)} features: the training images' own calls, and {plan.describe()}")
    fits = costs_from_extraction(items, images, serial, serial_sizes, plan=plan, quantile=s.timing.quantile,
                                 degree=s.timing.degree, random_state=s.random_state,
                                 progress=None if counter is None else counter("timing resized copies", 0, "copies"))
    if s.timing.calibrate:
        fits = calibrate_fits(fits, images, items, matrix, sizes, parallel=parallel, quantile=guard_quantile(s),
                              random_state=s.random_state, sample=sample)
    return fits


def guard_quantile(s) -> float:
    """The quantile the fit takes each feature's guard at: ``Serving(guard=q)``'s ``q`` where the
    user asked for a per-start cap, else :data:`DEFAULT_GUARD_QUANTILE` (the guards then serve the
    walk's room reservations and the server's learned guards, not a cap)."""
    return DEFAULT_GUARD_QUANTILE if s.serving.guard is None else float(s.serving.guard)


class _CostCache:
    """Cost fits kept in the cache directory under a digest of what they were measured from
    (images, features, timing settings, this machine): a refit that changes only how sets are
    chosen reuses them, as it reuses the feature matrix."""

    def __init__(self, path: str):
        self.path = path

    def read(self) -> dict | None:
        import json

        try:
            with open(self.path, encoding="utf-8") as fh:
                data = json.load(fh)
            return {name: CostFit.from_json(name, fit) for name, fit in data.items()}
        except (OSError, ValueError, KeyError, TypeError):
            return None  # absent or unreadable: measure again

    def write(self, fits: dict) -> None:
        import json

        from .extraction import write_atomically

        text = json.dumps({name: fit.to_json() for name, fit in fits.items()}, allow_nan=False)
        write_atomically(self.path, lambda fh: fh.write(text.encode("utf-8")))


def _cost_cache(s: FitSettings, timing_key: tuple) -> _CostCache | None:
    from .extraction import machine_fingerprint

    directory = s.cache_path("costs")
    if directory is None:
        return None
    digest = hashlib.sha256(repr((timing_key, machine_fingerprint())).encode()).hexdigest()[:32]
    return _CostCache(os.path.join(directory, f"costs-{digest}.json"))


def _measured_range(fits: dict) -> tuple[float, float]:
    """The smallest and largest item size any feature was timed at."""
    ranges = [fit.measured_range for fit in fits.values()]
    return min(lo for lo, _ in ranges), max(hi for _, hi in ranges)


def _timed_sides(fits: dict) -> tuple[int, ...]:
    """The square sides equivalent to the sizes the curves rest on (binned, :func:`polydom.costs.measure.bin_sizes`)."""
    sizes = np.unique(np.concatenate([bin_sizes(fit.sizes) for fit in fits.values()]))
    return tuple(sorted({int(round(float(np.sqrt(n)))) for n in sizes}))


def run_fit(images: list, y: np.ndarray, groups, settings: FitSettings, labels: np.ndarray | None = None) -> FitResult:
    """Run extract -> time -> learn -> build on validated images and labels.

    ``labels``: the label names, where ``y`` is an indicator matrix (several labels per image,
    :mod:`polydom.classifier.multilabel`).

    With a cache directory, the feature matrix, the cost fits and the trained sets are read from
    it when their inputs are unchanged (a refit with another ``alpha`` or backend only builds).
    """
    from .extraction import extract_features, feature_fingerprint, images_fingerprint

    s = settings
    # tqdm bars need a terminal; elsewhere, progress=True means plain lines: one per step, and
    # within a long step one at an interval that grows with the fit (polydom.classifier.progress).
    plain = s.progress is True and not sys.stderr.isatty()
    bars = None if plain else s.progress
    log = ProgressLog(plain)
    say = log.say
    t0 = time.perf_counter()
    sizes = np.array([item_size(im) for im in images], dtype=np.int64)
    # The steps the features share are items of their own where they do work on the training
    # images (greyscale of colour ones): computed once per image, timed, fitted and costed once
    # per set (polydom.steps). On grey images each feature casts the image itself, which costs
    # less than a timed call of its own (docs/decisions/shared-steps.md).
    items = with_steps(s.features, images)
    shared = {item.name for item in items} - {f.name for f in s.features}
    requires = {f.name: tuple(n for n in f.requires if n in shared) for f in s.features}
    requires = {name: steps for name, steps in requires.items() if steps}
    data_key = (images_fingerprint(images), feature_fingerprint(items))
    say(f"computing {len(s.features)} features of {len(images)} images")
    matrix = extract_features(images, items, steps=False, n_jobs=s.n_jobs, cache_dir=s.cache_path("features"),
                              progress=log.counter("computing features", len(images), "images") if plain else bars)

    t1 = time.perf_counter()
    fits = _cost_fits(images, sizes, matrix, items, s, say, data_key, log.counter if plain else None)
    t2 = time.perf_counter()
    s, learner = _learner(s, matrix, y, groups, labels)
    n0 = float(np.median(sizes))
    serving = _serving_params([item.name for item in items], fits, s)
    index, bar = _build_index(s, items, fits, learner, matrix, y, learner.splits, requires, n0, log, serving)
    lattice = 2 ** len(items)
    fully, partly = index.stats.get("fully_trained", len(index.trained)), index.stats.get("partly_trained", 0)
    if partly:
        say(f"{fully} of {lattice} feature sets trained fully, {partly} screened only "
            f"(their bounds could not reach the skyline), {lattice - fully - partly} not at all")
    if s.cascade is not None and index.chains:
        from .cascades import train_cascades

        # Folds close in size to the whole training set, so that fold models are as sure of
        # themselves as the served ones (see CASCADE_FOLDS); fewer where the groups are fewer.
        folds = _cascade_folds(y, groups, s.random_state)
        index = index.with_cascades(train_cascades(index, learner, sizes, allowed_loss=s.cascade.loss,
                                                   price=s.cascade.price, relative_price=s.cascade.relative_price,
                                                   saving=s.cascade.saving,
                                                   mean_cost=s.cascade.mean_cost,
                                                   per_class=s.cascade.per_class, splits=folds))
    t3 = time.perf_counter()
    # One warning for all the fits' warnings, pointing at the caller of ``fit``.
    learner.warnings.report(stacklevel=3)

    # Sets this build used ({} included), and how many of them were trained now rather than
    # served from the expansion cache (the recorder reports fresh trainings only).
    expanded = len(index.trained)
    stats = {
        "images": len(images), "extract_seconds": t1 - t0, "features_cached": matrix.cached,
        "timing_seconds": t2 - t1, "build_seconds": t3 - t2,
        "expanded": expanded, "trained": bar.trained, "reused": index.stats.get("reused", expanded - bar.trained),
        "fully_trained": fully, "partly_trained": partly,
        "learners": [name for name, _ in s.estimator], "learner_race": dict(learner.race),
        "learner_chosen": {name: sum(1 for v in learner.chosen.values() if v == name) for name, _ in s.estimator},
        "learner_warnings": learner.warnings.items(),
    }
    return FitResult(
        index=index, classes=np.unique(y) if labels is None else np.asarray(labels), features=list(s.features), columns=dict(matrix.columns), fits=fits,
        n0=n0, timing_sides=_timed_sides(fits), stats=stats,
        cascade=s.cascade is not None,
    )


def _learner(s: FitSettings, matrix, y, groups, labels):
    """``(settings, black box)``: the learners, scoring and folds of this fit (per label where
    ``labels`` is given) over the feature matrix."""
    from .blackbox import FeatureSetLearner

    s, strata, empty = _multilabel_settings(s, y, labels)
    splits, rescore_splits = _folds(s, strata, groups)
    learner = FeatureSetLearner(matrix.X, y, matrix.columns, s.estimator, splits, scoring=s.scoring,
                                rescore_splits=rescore_splits, screen_splits=_screen_folds(s, strata, groups),
                                finish_jobs=s.n_jobs, empty_model=empty)
    return s, learner


def _multilabel_settings(s: FitSettings, Y: np.ndarray, labels: np.ndarray | None):
    """``(settings, strata, empty-set model)``: as they are for one label per image (``labels``
    None); for several, each learner as one binary model per label, the default score the
    label-weighted accuracy, folds stratified by label combination and an empty-set model that
    answers each label by its prior (:mod:`polydom.classifier.multilabel`)."""
    if labels is None:
        return s, Y, None
    from .multilabel import LabelWeightedAccuracy, empty_set_model, fold_strata, label_weight_vector, per_label_learners

    weights = label_weight_vector(s.selection.label_weights, np.asarray(labels))
    scoring = s.scoring
    if scoring in (None, "accuracy"):
        scoring = LabelWeightedAccuracy(weights)
    elif s.selection.label_weights is not None:
        raise ValueError(f"label_weights weigh the default accuracy; scoring={scoring!r} weighs labels its own way")
    folds = s.cv if isinstance(s.cv, int) else 2
    s = dataclasses.replace(s, estimator=per_label_learners(s.estimator), scoring=scoring)
    return s, fold_strata(Y, folds), empty_set_model()


def _cost_fits(images, sizes, matrix, items, s: FitSettings, say, data_key, counter=None) -> dict:
    """Each item's cost fit: read from the cache where the timing inputs are unchanged, else
    measured now (and cached)."""
    timing_key = (data_key, None if s.timing.sides is None else tuple(s.timing.sides), s.timing.repeats,
                  s.timing.images, s.timing.quantile, s.timing.degree, s.timing.calibrate, guard_quantile(s),
                  repr(s.random_state), "cost-law")
    cached = _cost_cache(s, timing_key)
    fits = cached.read() if cached is not None else None
    if fits is None:
        fits = _measure_costs(images, sizes, matrix, items, s, say, counter)
        if cached is not None:
            cached.write(fits)
    else:
        say("reusing the cost fits cached for these images, features and timing settings")
    return fits


def _build_index(s: FitSettings, items, fits, learner, matrix, y, splits, requires, n0: float, log, serving):
    """Build the chosen backend over the fitted cost curves with ``learner`` as the black box and
    ``serving`` as what its walks read: ``(index, the training progress)``."""
    from polydom.api import build

    spec = backend_spec(s.selection.backend)
    offered = {
        "n0": n0,  # backends that compare costs at one size compare them at the median item
        "reference_size": n0,  # and PolyDom orders its prefix chains by the costs there
        "tolerance": s.selection.tolerance,
        "scores": s.selection.scores,
        "measured_range": _measured_range(fits),
        "extrapolate": s.serving.extrapolate,
        "search": s.selection.search,  # PolyDom's lattice or skyline search (polydom.index.search)
    }
    options: dict[str, Any] = {k: v for k, v in offered.items() if k in spec.options}
    if s.selection.lambdas is not None:
        options["lambdas"] = list(s.selection.lambdas)
    cache = s.cache_path("expansions")
    cache_key = None
    if cache is not None:
        cache_key = expansion_cache_key(matrix, y, splits + (learner.screen_splits or []), s.estimator, s.scoring)
        options.update(cache=cache, cache_key=cache_key)
    if requires:
        options["requires"] = requires
    bar = TrainingProgress(s.progress, 2 ** len(items) - sets_in_cache(cache, cache_key), log=log)
    try:
        index = build({item.name: fits[item.name].curve for item in items}, learner, alpha=s.selection.alpha, e=s.selection.e,
                      backend=s.selection.backend, n_jobs=s.n_jobs, progress=bar, serving=serving, **options)
    except BaseException:
        bar.close(done=False)
        raise
    bar.close()
    return index, bar


def _serving_params(names, fits, s: FitSettings):
    """What the index's walks will read, per item in ``names`` order
    (:class:`~polydom.index.serving.params.ServingParams`): the fit's guard ratios and the quantile
    they were taken at, whether a server learns its own, the cost laws, and whether each start is
    capped (``Serving(guard=...)`` given)."""
    from polydom.index.serving.params import ServingParams

    return ServingParams.from_tables(
        [fits[name].guard_ratio for name in names], guard_quantile(s), learn_guards=s.serving.learn_guards,
        guard_table=guard_table({name: fits[name].guard_ratio_by_size for name in names}, names),
        law_table=law_table({name: (fits[name].law, fits[name].law_by_size) for name in names}, names),
        start_cap=s.serving.guard is not None)
