"""``CostSensitiveClassifier``: a scikit-learn classifier that predicts within a time budget.

``fit`` measures every feature's extraction time on this machine across image sizes, fits one
cost polynomial per feature, trains and cross-validates one model per explored feature set, and
builds a polydom index. ``predict`` looks up, for each image's size and the budget, the most
accurate model whose features fit, computes **only** those features, and predicts.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import numbers
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from polydom.featurizers import Feature, default_features, item_size, resolve_features, validate_image

from .costs import CostFit, choose_timing_images, default_timing_sides, measure_feature_costs
from .lean import lean_model

__all__ = ["CostSensitiveClassifier", "Explanation"]

_FLOAT_MAX = sys.float_info.max
_META_KEY = "classifier"
_META_FORMAT = 1
_BACKENDS = ("polydom", "greedy", "greedy-acc", "greedy-cost")
_EMPTY = np.zeros(0)


@dataclass(frozen=True)
class Explanation:
    """What the classifier did for one item.

    Attributes
    ----------
    item : int
        Position of the image in the input.
    size : int
        Its item size (pixel count).
    budget : float
        Seconds allowed for feature extraction (``inf``: no limit).
    features : tuple of str
        The features computed, in the index's feature order.
    estimated_accuracy : float
        The cross-validated score of the model used.
    predicted_cost : float
        Seconds the fitted cost curves predict for those features at ``size``.
    measured_cost : float
        Seconds the extraction took.
    label : object
        The prediction.
    """

    item: int
    size: int
    budget: float
    features: tuple
    estimated_accuracy: float
    predicted_cost: float
    measured_cost: float
    label: Any

    @property
    def within_budget(self) -> bool:
        """Whether the measured extraction time stayed within the budget."""
        return self.measured_cost <= self.budget


class _Plan:
    """How to serve one feature set: its features in column order and a lean predictor."""

    __slots__ = ("features", "names", "predictor", "model")

    def __init__(self, features: tuple, model):
        self.features = features
        self.names = tuple(f.name for f in features)
        self.model = model
        self.predictor = lean_model(model)


def _check_int(name: str, value, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def _check_real(name: str, value, low: float, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < low:
        raise ValueError(f"{name} must be a finite number >= {low}{' or None' if allow_none else ''}, got {value!r}")


def _check_budgets(budget, n: int) -> Sequence[float]:
    """Per-item budgets as floats (``None`` -> unlimited); one clear error otherwise."""
    if budget is None:
        return [math.inf] * n
    if type(budget) in (float, int) and budget >= 0:  # the common case, without numpy's overhead
        return [float(budget)] * n
    if isinstance(budget, bool) or isinstance(budget, (str, bytes)):
        raise TypeError(f"budget must be a number of seconds or one per image, got {budget!r}")
    try:
        arr = np.asarray(budget, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"budget must be a number of seconds or one per image, got {budget!r}") from None
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    elif arr.ndim != 1 or len(arr) != n:
        raise ValueError(f"budget must be one number or one per image ({n}), got shape {arr.shape}")
    bad = np.isnan(arr) | (arr < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        what = "NaN" if np.isnan(arr[i]) else f"negative ({arr[i]!r})"
        raise ValueError(f"budget is {what}{f' for item {i}' if n > 1 and np.ndim(budget) else ''}; it must be >= 0 seconds")
    return arr


def _as_image_list(images) -> Sequence:
    """``images`` if it is a sequence of images (or an ``(n, H, W[, C])`` array); one clear error otherwise."""
    if isinstance(images, np.ndarray):
        if images.ndim == 2:
            raise ValueError(
                f"images must be a sequence of images, got one 2-D array of shape {images.shape}; "
                f"wrap a single image in a list"
            )
        return images
    if isinstance(images, (str, bytes)) or not isinstance(images, Sequence):
        raise TypeError(f"images must be a sequence of images (e.g. a list of arrays), got {type(images).__name__}")
    return images


def _check_images(images) -> list[np.ndarray]:
    """Every image validated, the first bad one named by its position."""
    return [validate_image(image, index=i) for i, image in enumerate(_as_image_list(images))]


def _estimator_has(attr: str):
    def check(self) -> bool:
        est = self.estimator if self.estimator is not None else _default_estimator(None)
        return hasattr(est, attr)

    return check


def _default_estimator(random_state):
    from .blackbox import default_estimator

    return default_estimator(random_state)


def _seed_estimator(estimator, random_state):
    """Fill every unset ``random_state`` of ``estimator`` (nested ones included) with ours."""
    if random_state is None:
        return estimator
    updates = {k: random_state for k, v in estimator.get_params(deep=True).items()
               if (k == "random_state" or k.endswith("__random_state")) and v is None}
    return estimator.set_params(**updates) if updates else estimator


def _json_params(params: dict) -> tuple[dict, dict]:
    """``(saved, unsaved)``: parameters as JSON, and the reprs of those JSON cannot hold."""
    saved, unsaved = {}, {}
    for key, value in params.items():
        if isinstance(value, tuple):
            saved.setdefault("__tuples__", []).append(key)  # JSON has lists only
        if isinstance(value, (list, tuple)):
            value = [v.name if isinstance(v, Feature) else v for v in value]
        if isinstance(value, np.generic):
            value = value.item()
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            saved[key], unsaved[key] = None, repr(value)
        else:
            saved[key] = value
    return saved, unsaved


class CostSensitiveClassifier(ClassifierMixin, BaseEstimator):
    """The most accurate classifier whose image features can be computed within a time budget.

    Parameters
    ----------
    features : list of str or Feature, optional
        The candidate features, by registry name (see :mod:`featurizers`) or as
        :class:`featurizers.Feature` objects; their order is the index's feature order. ``None``:
        polydom's built-in image features.
    estimator : scikit-learn classifier, optional
        The black-box learner, cloned for every feature set. ``None``: the paper's learner,
        ``make_pipeline(StandardScaler(), SGDClassifier(loss="hinge", penalty="l1"))``. Linear
        classifiers (behind ``StandardScaler``) are served through a lean numpy path.
    budget : float, optional
        Default seconds of feature extraction per image, when ``predict`` gets none. ``None``: no
        limit (the most accurate model).
    alpha : float, default 1.0
        Approximation factor of the PolyDom backend (>= 1; 1 is exact).
    e : float, default 0.0
        Monotonicity tolerance of the lattice exploration.
    cv : int or cross-validation splitter, default 5
        Folds for each feature set's score. An int gives stratified k-fold, grouped by ``groups``
        when ``fit`` gets them (keep renderings of one picture in one fold).
    scoring : str or callable, default "accuracy"
        The score maximised; its values must lie in ``[0, 1]``.
    cost_quantile : float in [0, 1] or "max", default 0.95
        Each feature's cost curve lies at or above this quantile of its measured times at every
        timed size; ``"max"`` is the paper's worst-case provisioning.
    cost_degree : int, default 2
        Degree of the cost polynomials (non-negative coefficients).
    backend : {"polydom", "greedy", "greedy-acc", "greedy-cost"}, default "polydom"
        The Greedy backends expand at ``n0`` = the median training item size, and ``predict``
        then walks their sequence with measured times (anytime), adapting to real cost variance.
    lambdas : sequence of float, optional
        The λ grid of ``backend="greedy"``.
    timing_sides : sequence of int, optional
        Square sides the features are timed at (at least ``cost_degree + 1``; 5 or more
        advised). ``None``: six sides spread over the training items' sizes.
    timing_repeats : int, default 5
        Passes over the timing images: each pass computes every feature once on every image at
        every side, as serving does. With ``timing_images`` this gives 40 samples per feature and
        size by default, so that the 0.95 quantile is not decided by one interrupted call.
    timing_images : int, default 8
        How many training images are resized and timed.
    cache_dir : str or path, optional
        Cache feature matrices (``.npz``) and trained feature sets (an LMDB expansion cache)
        here, keyed by fingerprints of the data, the features and the learner; a refit with
        another ``alpha`` or ``backend`` then trains only the sets not trained before.
    warm_start : bool, default False
        Reuse the previous fit's feature matrix and measured costs when the images, features and
        timing parameters are unchanged, so that refitting with another ``alpha`` or ``backend``
        only rebuilds the index (give ``cache_dir`` to reuse the trained sets as well).
    n_jobs : int, optional
        Parallel feature extraction and training (joblib; ``-1``: all cores).
    random_state : int, optional
        Seeds the folds, the choice of timing images and every unset ``random_state`` of the
        learner: fits with the same seed give the same index and predictions.
    progress : bool, optional
        Progress bars (tqdm) for extraction, timing and training; ``None``: on a terminal only.

    Attributes
    ----------
    index_ : PolyDomIndex or GreedyIndex
        The index: ``index_.lookup(size, budget)``.
    classes_ : ndarray
    feature_names_ : tuple of str
        The index's feature order.
    feature_columns_ : dict of str to slice
        Each feature's column range in a set's input vector (sets use their features' ranges in
        this order).
    cost_fits_ : dict of str to CostFit
        Timings and fitted cost curve of each feature.
    cost_curves_ : dict of str to CostCurve
    n0_ : float
        Median training item size (the Greedy expansion size).
    fit_stats_ : dict
        Seconds spent extracting, timing and building; ``expanded`` (sets the build used, ``{}``
        included), ``trained`` (of those, trained in this fit) and ``reused`` (served from the
        expansion cache); whether the features came from the cache.

    Examples
    --------
    >>> import numpy as np, polydom
    >>> from featurizers.datasets import load_digits_images
    >>> images, labels, sides = load_digits_images(sides=(16, 32), n_per_class=6)
    >>> groups = np.arange(len(images)) // 2          # each digit is rendered at two sizes
    >>> clf = polydom.CostSensitiveClassifier(
    ...     features=["intensity_hist", "thumbnail"], cv=2, timing_images=2, timing_repeats=1,
    ...     random_state=0, progress=False).fit(images, labels, groups=groups)
    >>> clf.predict(images[:3], budget=0.005).shape    # 5 ms of feature extraction per image
    (3,)
    >>> clf.explain(images[:1], budget=0.0)[0].features  # no time: the majority-class model
    ()
    """

    def __init__(
        self,
        features=None,
        estimator=None,
        *,
        budget=None,
        alpha=1.0,
        e=0.0,
        cv=5,
        scoring="accuracy",
        cost_quantile=0.95,
        cost_degree=2,
        backend="polydom",
        lambdas=None,
        timing_sides=None,
        timing_repeats=5,
        timing_images=8,
        cache_dir=None,
        warm_start=False,
        n_jobs=None,
        random_state=None,
        progress=None,
    ):
        self.features = features
        self.estimator = estimator
        self.budget = budget
        self.alpha = alpha
        self.e = e
        self.cv = cv
        self.scoring = scoring
        self.cost_quantile = cost_quantile
        self.cost_degree = cost_degree
        self.backend = backend
        self.lambdas = lambdas
        self.timing_sides = timing_sides
        self.timing_repeats = timing_repeats
        self.timing_images = timing_images
        self.cache_dir = cache_dir
        self.warm_start = warm_start
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.progress = progress

    # ------------------------------------------------------------------ validation

    def _validate_params(self) -> None:
        _check_real("budget", self.budget, 0.0, allow_none=True)
        _check_real("alpha", self.alpha, 1.0)
        _check_real("e", self.e, 0.0)
        if self.backend not in _BACKENDS:
            raise ValueError(f"backend must be one of {_BACKENDS}, got {self.backend!r}")
        if self.lambdas is not None and self.backend != "greedy":
            raise ValueError("lambdas applies to backend='greedy' only")
        q = self.cost_quantile
        if not (q == "max" or (isinstance(q, numbers.Real) and not isinstance(q, bool) and 0.0 <= q <= 1.0)):
            raise ValueError(f"cost_quantile must be a number in [0, 1] or 'max', got {q!r}")
        _check_int("cost_degree", self.cost_degree, 0)
        _check_int("timing_repeats", self.timing_repeats, 1)
        _check_int("timing_images", self.timing_images, 1)
        if self.timing_sides is not None:
            sides = list(self.timing_sides)
            for s in sides:
                _check_int("each of timing_sides", s, 8)
            if len(set(sides)) < self.cost_degree + 1:
                raise ValueError(
                    f"timing_sides needs at least cost_degree + 1 = {self.cost_degree + 1} distinct sides, got {sides}"
                )
        if isinstance(self.cv, bool) or (isinstance(self.cv, numbers.Integral) and self.cv < 2):
            raise ValueError(f"cv must be an integer >= 2 or a cross-validation splitter, got {self.cv!r}")
        if self.n_jobs is not None and (isinstance(self.n_jobs, bool) or not isinstance(self.n_jobs, numbers.Integral) or self.n_jobs == 0):
            raise ValueError(f"n_jobs must be None or a non-zero integer, got {self.n_jobs!r}")
        if not isinstance(self.warm_start, bool):
            raise ValueError(f"warm_start must be True or False, got {self.warm_start!r}")
        if self.progress not in (None, True, False):
            raise ValueError(f"progress must be None, True or False, got {self.progress!r}")

    def _resolve_features(self) -> list[Feature]:
        features = default_features() if self.features is None else resolve_features(self.features)
        if not features:
            raise ValueError("features is empty: give at least one feature")
        if len(features) > 62:
            raise ValueError(f"at most 62 features are supported, got {len(features)}")
        return features

    def _base_estimator(self):
        est = _default_estimator(None) if self.estimator is None else clone(self.estimator)
        return _seed_estimator(est, self.random_state)

    # ------------------------------------------------------------------ fitting

    def fit(self, images, y, *, groups=None):
        """Measure costs, train the feature sets the lattice explores, and build the index.

        Parameters
        ----------
        images : sequence of array_like
            Training images: ``(H, W)``, ``(H, W, 3)`` or ``(H, W, 4)`` arrays of dtype bool,
            uint8, uint16 or float in ``[0, 1]``, at least 8 pixels a side; sizes may differ.
        y : array_like of shape (n_images,)
            Class labels.
        groups : array_like of shape (n_images,), optional
            Group of each image for the folds (e.g. one group per source picture rendered at
            several sizes), so that no picture is in both a training and a test fold.

        Returns
        -------
        self

        Raises
        ------
        TypeError, ValueError
            A bad parameter, an invalid image (named by its position), labels of the wrong
            length; :class:`featurizers.FeatureError` names a feature that failed and the item.
        """
        import polydom

        from .blackbox import FeatureSetLearner, make_splits
        from .extraction import extract_features, feature_fingerprint, images_fingerprint

        self._validate_params()
        t0 = time.perf_counter()
        images = _check_images(images)
        if not images:
            raise ValueError("images is empty: at least one training image is required")
        y = np.asarray(y)
        if y.ndim != 1:
            raise ValueError(f"y must be 1-D (one label per image), got shape {y.shape}")
        if len(y) != len(images):
            raise ValueError(f"y has {len(y)} labels but there are {len(images)} images")
        check_classification_targets(y)
        if groups is not None:
            groups = np.asarray(groups)
            if groups.shape != (len(images),):
                raise ValueError(f"groups must hold one group per image ({len(images)}), got shape {groups.shape}")
        features = self._resolve_features()
        estimator = self._base_estimator()
        sizes = np.array([item_size(im) for im in images], dtype=np.int64)
        progress = self.progress

        warm = getattr(self, "_warm", None) if self.warm_start else None
        data_key = (images_fingerprint(images), feature_fingerprint(features))
        if warm is not None and warm["data"] == data_key:
            matrix = warm["matrix"]
        else:
            matrix = extract_features(images, features, n_jobs=self.n_jobs, cache_dir=self._cache("features"),
                                      progress=progress)
        t1 = time.perf_counter()
        sides = tuple(self.timing_sides) if self.timing_sides is not None else default_timing_sides(sizes)
        timing_key = (data_key, sides, self.timing_repeats, self.timing_images, self.cost_quantile,
                      self.cost_degree, repr(self.random_state))
        if warm is not None and warm["timing"] == timing_key:
            fits = warm["fits"]
        else:
            timed = [images[i] for i in choose_timing_images(images, self.timing_images, self.random_state)]
            fits = measure_feature_costs(features, timed, sides, repeats=self.timing_repeats,
                                         quantile=self.cost_quantile, degree=self.cost_degree, progress=progress)
        t2 = time.perf_counter()

        splits = make_splits(self.cv, y, groups, self.random_state)
        learner = FeatureSetLearner(matrix.X, y, matrix.columns, estimator, splits, scoring=self.scoring)
        n0 = float(np.median(sizes))
        options: dict[str, Any] = {}
        if self.backend != "polydom":
            options["n0"] = n0
            if self.lambdas is not None:
                options["lambdas"] = list(self.lambdas)
        cache = self._cache("expansions")
        if cache is not None:
            options["cache"] = cache
            options["cache_key"] = self._expansion_key(matrix, y, splits, estimator)
        bar = _TrainingBar(progress, 2 ** len(features))
        try:
            index = polydom.build(
                {name: fit.curve for name, fit in fits.items()}, learner, alpha=self.alpha, e=self.e,
                backend=self.backend, n_jobs=self.n_jobs, progress=bar, **options,
            )
        finally:
            bar.close()
        t3 = time.perf_counter()
        # Sets this build used ({} included), and how many of them were trained now rather than
        # served from the expansion cache (the recorder reports fresh trainings only).
        expanded = len(index.explored) if index.backend == "polydom" else len(index.accuracy)

        self.index_ = index
        self.classes_ = np.unique(y)
        self.feature_names_ = tuple(f.name for f in features)
        self.feature_columns_ = dict(matrix.columns)
        self.cost_fits_ = fits
        self.cost_curves_ = {name: fit.curve for name, fit in fits.items()}
        self.n0_ = n0
        self.timing_sides_ = tuple(int(s) for s in sides)
        self.fit_stats_ = {
            "images": len(images),
            "extract_seconds": t1 - t0,
            "features_cached": matrix.cached,
            "timing_seconds": t2 - t1,
            "build_seconds": t3 - t2,
            "expanded": expanded,
            "trained": bar.trained,
            "reused": expanded - bar.trained,
        }
        self._features = {f.name: f for f in features}
        self._plans = {}
        if self.warm_start:
            self._warm = {"data": data_key, "matrix": matrix, "timing": timing_key, "fits": fits}
        else:
            self.__dict__.pop("_warm", None)
        return self

    def _cache(self, part: str):
        if self.cache_dir is None:
            return None
        import os

        return os.path.join(os.fspath(self.cache_dir), part)

    def _expansion_key(self, matrix, y, splits, estimator) -> str:
        """What trained sets depend on: data, features' columns, folds, learner, scoring."""
        import sklearn

        h = hashlib.sha256(b"polydom-expansions-v1")
        h.update(np.ascontiguousarray(matrix.X).tobytes())
        h.update(repr((list(matrix.columns.items()), np.asarray(y).tolist())).encode())
        for train, test in splits:
            h.update(np.asarray(train).tobytes())
            h.update(np.asarray(test).tobytes())
        h.update(repr((estimator, estimator.get_params(deep=True), self.scoring, sklearn.__version__)).encode())
        return h.hexdigest()

    # ------------------------------------------------------------------ metadata and storage

    def _metadata(self) -> dict:
        """What :meth:`load` needs besides the index, as JSON."""
        from polydom.index.modelcodec import encode_model

        params, unsaved = _json_params({k: v for k, v in self.get_params(deep=False).items() if k != "estimator"})
        estimator = None
        if self.estimator is not None:
            payload = encode_model(clone(self.estimator), "the estimator parameter")
            estimator = base64.b64encode(payload).decode("ascii")
        meta = {
            "format": _META_FORMAT,
            "params": params,
            "unsaved_params": unsaved,
            "columns": [[sl.start, sl.stop] for sl in self.feature_columns_.values()],
            "classes": self.classes_.tolist(),
            "classes_dtype": self.classes_.dtype.str,
            "estimator": estimator,
            "n0": self.n0_,
            "timing_sides": list(self.timing_sides_),
            "cost_fits": {name: fit.to_json() for name, fit in self.cost_fits_.items()},
            "fit_stats": self.fit_stats_,
        }
        try:
            json.dumps(meta, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"the classifier cannot be saved: its classes are not JSON values ({exc})") from None
        return meta

    def save(self, path, **options) -> str:
        """Publish the fitted classifier -- index, every model and these parameters -- as an LMDB
        index at ``path`` (atomically; readers of ``path`` see the old or the new version).

        ``polydom.load(path)`` opens it as a plain index; :meth:`load` as a classifier.

        Returns
        -------
        str
            The published version's name.
        """
        from polydom.index.store import save_index

        check_is_fitted(self, "index_")
        # The classifier's own state rides in the index's JSON params: covered by the stored
        # checksum and published in the same atomic step as the index and its models.
        self.index_.params[_META_KEY] = self._metadata()
        return save_index(self.index_, path, **options)

    @classmethod
    def load(cls, path, *, trusted=None) -> "CostSensitiveClassifier":
        """Open a classifier saved with :meth:`save`.

        Parameters
        ----------
        path : str or os.PathLike
        trusted : iterable of str or type, optional
            Model types to trust beyond polydom's list (see :func:`polydom.load`).

        Raises
        ------
        ValueError
            ``path`` holds an index that was not saved by a ``CostSensitiveClassifier``.
        polydom.IndexNotFoundError, polydom.IndexFormatError
            As :func:`polydom.load`.
        """
        import polydom
        from polydom.index.modelcodec import decode_model, digest, normalize_trusted

        index = polydom.load(path, trusted=trusted)
        meta = index.params.get(_META_KEY)
        if not isinstance(meta, dict) or meta.get("format") != _META_FORMAT:
            raise ValueError(
                f"the index at {path} was not saved by CostSensitiveClassifier (open it with polydom.load)"
            )
        params = dict(meta["params"])
        for key in params.pop("__tuples__", []):
            params[key] = tuple(params[key]) if isinstance(params.get(key), list) else params.get(key)
        for key in meta.get("unsaved_params", {}):
            params.pop(key, None)  # e.g. a splitter object: back to its default
        estimator = None
        if meta.get("estimator") is not None:
            payload = base64.b64decode(meta["estimator"])
            # The metadata is covered by the index's state checksum; the payload's own is implied.
            estimator = decode_model(payload, digest(payload), normalize_trusted(trusted), "the saved estimator parameter")
        clf = cls(estimator=estimator, **params)
        clf.index_ = index
        clf.classes_ = np.asarray(meta["classes"], dtype=np.dtype(meta["classes_dtype"]))
        clf.feature_names_ = tuple(index.features)
        clf.feature_columns_ = {n: slice(a, b) for n, (a, b) in zip(index.features, meta["columns"])}
        clf.cost_fits_ = {n: CostFit.from_json(n, d) for n, d in meta["cost_fits"].items()}
        clf.cost_curves_ = {n: fit.curve for n, fit in clf.cost_fits_.items()}
        clf.n0_ = float(meta["n0"])
        clf.timing_sides_ = tuple(meta["timing_sides"])
        clf.fit_stats_ = dict(meta["fit_stats"])
        clf._features = {f.name: f for f in resolve_features(clf.feature_names_)}
        clf._plans = {}
        return clf

    # ------------------------------------------------------------------ re-costing

    def recost(self, images, *, sides=None, repeats=None):
        """Re-measure the features on this machine and rebuild the index without training.

        The lattice exploration depends on accuracies only, so the PolyDom index is rebuilt from
        the stored accuracies and models with the new cost curves -- the same index a full fit
        would give with these costs. A Greedy index keeps its sequences (chosen with the old
        costs at ``n0``) and re-ranks them with the new ones.

        Parameters
        ----------
        images : sequence of array_like
            Images to time the features on (resized to each side).
        sides : sequence of int, optional
            Default: the sides used at fit time.
        repeats : int, optional
            Default: ``timing_repeats``.

        Returns
        -------
        self
        """
        import polydom
        from polydom.index.skyline import IndexState

        check_is_fitted(self, "index_")
        images = _check_images(images)
        if not images:
            raise ValueError("images is empty: at least one image is required to time the features")
        sides = tuple(self.timing_sides_ if sides is None else sides)
        repeats = self.timing_repeats if repeats is None else repeats
        _check_int("repeats", repeats, 1)
        features = [self._features[n] for n in self.feature_names_]
        fits = measure_feature_costs(features, images, sides, repeats=repeats,
                                     quantile=self.cost_quantile, degree=self.cost_degree, progress=self.progress)
        curves = {name: fit.curve for name, fit in fits.items()}
        old = self.index_
        if old.backend == "polydom":
            explored = dict(old.explored)
            space = old.space

            def replay(feature_set):
                mask = space.mask(feature_set)
                if mask not in explored:
                    raise RuntimeError(f"recost needs feature set {sorted(feature_set)}, which was never trained")
                return explored[mask]

            p = old.params
            rebuilt = polydom.build(curves, replay, alpha=p["alpha"], e=p["e"], sandwich=p["sandwich"],
                                    candidate_alpha=p["candidate_alpha"], domain=old.domain)
            rebuilt.stats.update(trained=0, replayed=len(explored), reused=0)
            # The replay returned accuracies only: attach the stored models (lazily loaded ones
            # stay unloaded) by rebuilding from the state, as loading does.
            state = rebuilt.to_state()
            index = type(rebuilt).from_state(IndexState(state.meta, state.arrays, old.models))
        else:
            state = old.to_state()
            meta = dict(state.meta)
            meta["costs"] = [list(curves[n].coefficients) for n in old.features]
            index = type(old).from_state(IndexState(meta, state.arrays, old.models))
        index.params.update({k: v for k, v in old.params.items() if k not in index.params})
        self.index_ = index
        self._plans = {}
        self.cost_fits_ = fits
        self.cost_curves_ = curves
        self.timing_sides_ = tuple(int(s) for s in sides)
        return self

    # ------------------------------------------------------------------ serving

    def _plan(self, choice) -> _Plan:
        plan = self._plans.get(choice.key)
        if plan is None:
            features = tuple(self._features[n] for n in self.feature_names_ if n in choice.features)
            model = choice.model
            if model is None:
                raise RuntimeError(f"the index has no model for feature set {sorted(choice.features)}")
            plan = self._plans[choice.key] = _Plan(features, model)
        return plan

    def _serve(self, image, i: int, budget: float):
        """``(choice, plan, x, measured_seconds)`` for one image: look up, then compute only the
        chosen features (or, for Greedy, walk its sequence with measured times)."""
        array = validate_image(image, index=i)
        size = array.shape[0] * array.shape[1]
        limit = budget if budget <= _FLOAT_MAX else _FLOAT_MAX
        index = self.index_
        features = self._features
        if index.backend == "polydom":
            choice = index.lookup(size, limit)
            plan = self._plan(choice)
            if plan.features:
                start = time.perf_counter()
                vectors = [f.evaluate(array, index=i) for f in plan.features]
                measured = time.perf_counter() - start
            else:
                vectors, measured = [], 0.0
        else:
            computed = {}

            def compute(name):
                computed[name] = features[name].evaluate(array, index=i)

            choice = index.anytime(size, limit, compute)
            measured = choice.cost
            plan = self._plan(choice)
            vectors = [computed[n] for n in plan.names]
        x = np.concatenate(vectors) if vectors else _EMPTY
        return choice, plan, x, measured, size

    def _check_fitted(self) -> None:
        if "index_" not in self.__dict__:  # checked per request: skip sklearn's generic test when fitted
            check_is_fitted(self, "index_")

    def _prepare(self, images, budget):
        self._check_fitted()
        images = _as_image_list(images)
        budget = self.budget if budget is None else budget
        return images, _check_budgets(budget, len(images))

    def predict(self, images, budget=None) -> np.ndarray:
        """Predict each image's class within its budget, computing only the chosen features.

        Parameters
        ----------
        images : sequence of array_like
        budget : float or array_like of shape (n_images,), optional
            Seconds of feature extraction allowed per image; default the ``budget`` parameter
            (``None``: no limit).

        Returns
        -------
        ndarray of shape (n_images,)
        """
        images, budgets = self._prepare(images, budget)
        out = np.empty(len(images), dtype=self.classes_.dtype)
        for i, image in enumerate(images):
            _, plan, x, _, _ = self._serve(image, i, budgets[i])
            out[i] = plan.predictor.predict_one(x)
        return out

    @available_if(_estimator_has("predict_proba"))
    def predict_proba(self, images, budget=None) -> np.ndarray:
        """Class probabilities of each image within its budget (columns follow ``classes_``).

        Available when the learner has ``predict_proba`` (the default hinge-loss SGD has not).
        """
        images, budgets = self._prepare(images, budget)
        out = np.zeros((len(images), len(self.classes_)))
        for i, image in enumerate(images):
            _, plan, x, _, _ = self._serve(image, i, budgets[i])
            proba = plan.model.predict_proba(x.reshape(1, -1))[0]
            cols = np.searchsorted(self.classes_, plan.model.classes_)
            out[i, cols] = proba
        return out

    def explain(self, images, budget=None) -> list[Explanation]:
        """Predict as :meth:`predict` does and report, per image, what was computed and how long
        it took.

        Returns
        -------
        list of Explanation
        """
        images, budgets = self._prepare(images, budget)
        out = []
        for i, image in enumerate(images):
            choice, plan, x, measured, size = self._serve(image, i, budgets[i])
            label = plan.predictor.predict_one(x)
            predicted = choice.cost if self.index_.backend == "polydom" else self.index_.cost_of(plan.names, size)
            out.append(Explanation(i, size, float(budgets[i]), plan.names, float(choice.accuracy),
                                   float(predicted), float(measured), label))
        return out

    def score(self, images, y, sample_weight=None, budget=None) -> float:
        """Accuracy of :meth:`predict` on ``images`` within ``budget``."""
        from sklearn.metrics import accuracy_score

        y = np.asarray(y)
        if y.ndim != 1 or len(y) != len(images):
            raise ValueError(f"y must hold one label per image ({len(images)}), got shape {y.shape}")
        return float(accuracy_score(y, self.predict(images, budget=budget), sample_weight=sample_weight))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        return tags


class _TrainingBar:
    """``progress(trained)`` for :func:`polydom.build`: a tqdm bar, on a terminal unless forced."""

    def __init__(self, progress, total: int):
        self.bar = None
        self.trained = 0
        if progress is not False:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc="training feature sets", unit="set",
                            disable=None if progress is None else False, file=sys.stderr)

    def __call__(self, trained: int) -> None:
        self.trained = trained
        if self.bar is not None:
            self.bar.update(trained - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
