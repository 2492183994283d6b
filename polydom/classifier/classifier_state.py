"""The classifier's own state, saved inside its index: parameters, classes, columns, cost fits.

``CostSensitiveClassifier.save`` stores a :class:`ClassifierMetadata` as JSON under the
index's ``params["classifier"]``, so it is covered by the index's checksum and published in the
same atomic step as the index and its models; :meth:`ClassifierMetadata.from_index` reads it
back. The layout (``format`` 1) is that of every classifier saved so far.

Loading checks the state as strictly as the storage layer checks the index
(:meth:`ClassifierMetadata.check`): types, lengths, ranges and the classes' dtype are validated
before anything is allocated or built from them, and every failure -- a crafted or damaged
state -- is one :class:`ClassifierStateError` naming the field, raised at load rather than at
every request.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import math
import numbers
from dataclasses import dataclass

import numpy as np

from polydom.costs.decode import DECODE
from polydom.costs.measure import CostFit
from polydom.featurizers.provenance import FeatureSource, load_features, source_of

from ..errors import PolydomError
from .errors import ClassifierStateError, UnloadableFeatureWarning  # noqa: F401 - defined with the package's errors

__all__ = [
    "ClassifierMetadata", "ClassifierStateError", "METADATA_KEY", "METADATA_FORMAT", "save_classifier",
    "load_classifier",
]

#: Where in the index's params the metadata lives.
METADATA_KEY = "classifier"
METADATA_FORMAT = 1

#: The numpy dtype kinds a saved ``classes_`` may have: bool, integers, floats, text, objects.
_CLASS_KINDS = "biufUO"
#: Beyond any feature matrix a classifier is fitted on.
_MAX_COLUMN = 1 << 40
#: The widest numeric class dtype (complex is not a label type; 16 bytes covers longdouble).
_MAX_NUMERIC_ITEMSIZE = 16


def _steps_of(index) -> set[str]:
    """The index's items that are steps its features require (``index.params["requires"]``,
    :mod:`polydom.steps`)."""
    return {s for needed in ((index.params or {}).get("requires") or {}).values() for s in needed}


def _columned(index) -> list[str]:
    """The index's features that have columns: its items less its steps."""
    steps = _steps_of(index)
    return [n for n in index.features if n not in steps]


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _finite(value, low: float = -math.inf) -> bool:
    return _is_real(value) and math.isfinite(value) and value >= low


def _check_class_dtype(classes: list, dtype_str, bad) -> np.dtype:
    """The dtype ``classes_`` is rebuilt with: parsed and bounded before anything is allocated."""
    if not isinstance(dtype_str, str) or len(dtype_str) > 32:
        raise bad(f"classes_dtype must be a short numpy dtype string, got {dtype_str!r:.80}")
    try:
        dtype = np.dtype(dtype_str)
    except (TypeError, ValueError, SyntaxError):
        raise bad(f"classes_dtype {dtype_str!r} is not a numpy dtype") from None
    if dtype.kind not in _CLASS_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise bad(f"classes_dtype {dtype_str!r} is not a label dtype (one of kinds {_CLASS_KINDS!r})")
    if dtype.kind == "U":
        longest = max((len(c) for c in classes if isinstance(c, str)), default=0)
        if dtype.itemsize != 4 * max(longest, 1):
            raise bad(f"classes_dtype {dtype_str!r} does not fit the stored classes (longest {longest} characters)")
    elif dtype.kind != "O" and dtype.itemsize > _MAX_NUMERIC_ITEMSIZE:
        raise bad(f"classes_dtype {dtype_str!r} is wider than any label type")
    return dtype


def _check_classes(classes, dtype_str, bad) -> np.ndarray:
    """``classes_`` rebuilt from the stored list: scalar labels, distinct, ascending, round-tripping."""
    if not isinstance(classes, list) or not classes:
        raise bad("classes must be a non-empty list of labels")
    if not all(isinstance(c, (str, int, float)) for c in classes):
        raise bad("classes must hold labels (numbers or strings), not lists, objects or nulls")
    dtype = _check_class_dtype(classes, dtype_str, bad)
    try:
        array = np.asarray(classes, dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        raise bad(f"classes do not convert to classes_dtype {dtype_str!r}") from None
    if array.ndim != 1 or array.tolist() != classes:
        raise bad(f"classes change when converted to classes_dtype {dtype_str!r}")
    try:
        ascending = len(array) < 2 or bool(np.all(array[1:] > array[:-1]))
    except TypeError:  # object labels of mixed types
        ascending = False
    if not ascending:
        raise bad("classes must be distinct and ascending (as numpy.unique returns them)")
    return array


def _check_numbers(data: dict, key: str, bad, *, low: float = -math.inf, integer: bool = False, length=None,
                   required: bool = False) -> None:
    value = data.get(key)
    if value is None:
        if required:
            raise bad(f"{key} is missing")
        return
    ok = _is_int if integer else _is_real
    if not isinstance(value, list) or not all(ok(v) and math.isfinite(v) and v >= low for v in value):
        kind = "integers" if integer else "finite numbers"
        raise bad(f"{key} must be a list of {kind} >= {low}")
    if length is not None and len(value) != length:
        raise bad(f"{key} holds {len(value)} values, not {length}")


def _check_cost_fit(name: str, data, bad) -> None:
    """A saved :meth:`CostFit.to_json` whose every field :meth:`CostFit.from_json` reads is sound."""
    def fail(message):
        return bad(f"cost_fits[{name!r}]: {message}")

    if not isinstance(data, dict):
        raise fail("must be an object")
    for key in ("coefficients", "timing_coefficients"):
        if key in data and data[key] is not None or key == "coefficients":
            _check_numbers(data, key, fail, required=True)
            if not data[key]:
                raise fail(f"{key} is empty")
    _check_numbers(data, "sizes", fail, low=1, integer=True, required=True)
    if not data["sizes"]:
        raise fail("sizes is empty")
    count = len(data["sizes"])
    _check_numbers(data, "seconds", fail, low=0.0, length=count, required=True)
    _check_numbers(data, "items", fail, low=0, integer=True, length=count)
    _check_numbers(data, "wall_seconds", fail, low=0.0, length=count)
    _check_numbers(data, "cold_seconds", fail, low=0.0, length=count)
    quantile = data.get("quantile")
    if quantile != "max" and not (_finite(quantile) and 0.0 <= quantile <= 1.0):
        raise fail(f"quantile must be in [0, 1] or 'max', got {quantile!r:.80}")
    domain = data.get("domain", [0.0, None])
    if (not isinstance(domain, list) or len(domain) != 2 or not _finite(domain[0], 0.0)
            or not (domain[1] is None or _finite(domain[1]) and domain[1] > domain[0])):
        raise fail(f"domain must be [low >= 0, high > low or null], got {domain!r:.80}")
    if data.get("overhead") is not None:
        _check_numbers(data, "overhead", fail, low=0.0, length=2)
    guard = data.get("guard", 1.0)
    if not _finite(guard, 1.0):
        raise fail(f"guard must be a finite number >= 1, got {guard!r:.80}")
    by_size = data.get("guard_by_size")
    if by_size is not None:
        if not isinstance(by_size, list) or not all(
            isinstance(pair, list) and len(pair) == 2 and _finite(pair[0], 0.0) and _finite(pair[1], 1.0)
            for pair in by_size
        ):
            raise fail("guard_by_size must be a list of [size >= 0, guard >= 1] pairs")
        sizes = [pair[0] for pair in by_size]
        if sizes != sorted(set(sizes)):
            raise fail("guard_by_size must list distinct sizes in ascending order")


def _json_params(params: dict) -> tuple[dict, dict]:
    """``(saved, unsaved)``: parameters as JSON, and the reprs of those JSON cannot hold."""
    from polydom.featurizers import Feature

    from .policies import Policy

    saved, unsaved = {}, {}
    for key, value in params.items():
        if isinstance(value, Policy):
            value = value.to_json()
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


@dataclass(frozen=True)
class ClassifierMetadata:
    """A fitted classifier's state besides its index, as JSON values.

    Attributes
    ----------
    params : dict
        ``get_params(deep=False)`` without ``estimator``; ``__tuples__`` lists the tuple-valued
        ones, features are stored by name.
    unsaved_params : dict
        Reprs of the parameters JSON cannot hold (e.g. a splitter object); they load back as
        their defaults.
    columns : list of [start, stop]
        Each feature's column range, in the index's feature order.
    classes, classes_dtype
        ``classes_`` as a list, and its numpy dtype string.
    estimator : str or None
        The ``estimator`` parameter (unfitted) as base64 skops bytes, checked like the models.
    n0 : float
    timing_sides : list of int
    cost_fits : dict of str to dict
        :meth:`CostFit.to_json` per feature.
    fit_stats : dict
    feature_sources : list of dict or None
        :meth:`FeatureSource.to_json <polydom.featurizers.provenance.FeatureSource.to_json>` per
        feature, in the index's order: where a fresh process finds each feature's code. None in
        states saved before it was kept (features are then looked up by name).
    decode_fit : dict or None
        :meth:`CostFit.to_json` of the decode step's cost, where the training images came
        encoded (:func:`~polydom.costs.decode.fit_decode_cost`).
    multilabel : bool
        Whether the classifier answers one 0/1 value per label (``classes`` are the labels).
        False in states saved before several labels were served.
    """

    params: dict
    unsaved_params: dict
    columns: list
    classes: list
    classes_dtype: str
    estimator: str | None
    n0: float
    timing_sides: list
    cost_fits: dict
    fit_stats: dict
    feature_sources: list | None = None
    decode_fit: dict | None = None
    multilabel: bool = False

    @classmethod
    def from_classifier(cls, clf, state=None) -> "ClassifierMetadata":
        """The metadata of a fitted classifier: its parameters, and the fitted state of
        ``state`` (default the version it serves now, :meth:`CostSensitiveClassifier._state`)."""
        from sklearn.base import clone

        from polydom.index.storage.modelcodec import encode_model

        learners = clf.learners
        one = learners is not None and hasattr(learners, "fit")  # one classifier: saved as a model
        params, unsaved = _json_params({k: v for k, v in clf.get_params(deep=False).items()
                                        if not (k == "learners" and one)})
        estimator = None
        if one:
            payload = encode_model(clone(learners), "the learners parameter")
            estimator = base64.b64encode(payload).decode("ascii")
        state = clf._state() if state is None else state
        return cls(
            params=params, unsaved_params=unsaved,
            columns=[[sl.start, sl.stop] for sl in state.feature_columns.values()],
            classes=state.classes.tolist(), classes_dtype=state.classes.dtype.str, estimator=estimator,
            n0=state.n0, timing_sides=list(state.timing_sides),
            cost_fits={name: fit.to_json() for name, fit in state.cost_fits.items()}, fit_stats=dict(state.fit_stats),
            feature_sources=[source_of(state.planner.features[name]).to_json() for name in state.index.features],
            decode_fit=None if state.decode_fit is None else state.decode_fit.to_json(),
            multilabel=bool(state.multilabel),
        )

    def to_json(self) -> dict:
        """A JSON object; ``ValueError`` if a value (e.g. a class label) is not JSON."""
        data = {"format": METADATA_FORMAT, **dataclasses.asdict(self)}
        try:
            json.dumps(data, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"the classifier cannot be saved: its classes are not JSON values ({exc})") from None
        return data

    @classmethod
    def from_index(cls, index, where) -> "ClassifierMetadata":
        """The metadata a classifier saved in ``index``, checked (:meth:`check`).

        Raises
        ------
        ClassifierStateError
            There is none (``where`` was not saved by a classifier), or it is damaged or crafted.
        """
        data = index.params.get(METADATA_KEY)
        fields = dataclasses.fields(cls)
        names = [f.name for f in fields]
        required = [f.name for f in fields if f.default is dataclasses.MISSING]
        if not isinstance(data, dict) or data.get("format") != METADATA_FORMAT or any(n not in data for n in required):
            raise ClassifierStateError(
                f"the index at {where} was not saved by CostSensitiveClassifier (open it with polydom.load)"
            )
        meta = cls(**{n: data[n] for n in names if n in data})
        meta.check(index, where)
        return meta

    def check(self, index, where) -> None:
        """Validate every field against ``index`` before anything is built from it.

        Raises
        ------
        ClassifierStateError
            Naming the first field that is not what a classifier saves.
        """
        def bad(message):
            return ClassifierStateError(f"the classifier saved at {where} is damaged: {message}")

        features = list(index.features)  # the lattice's items: features, and the steps they share
        columned = _columned(index)
        if not isinstance(self.params, dict) or not all(isinstance(k, str) for k in self.params):
            raise bad("params must be an object")
        tuples = self.params.get("__tuples__", [])
        if not isinstance(tuples, list) or not all(isinstance(k, str) for k in tuples):
            raise bad("params.__tuples__ must be a list of parameter names")
        if not isinstance(self.unsaved_params, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.unsaved_params.items()
        ):
            raise bad("unsaved_params must map parameter names to reprs")
        if not isinstance(self.columns, list) or len(self.columns) != len(columned):
            raise bad(f"columns must hold one [start, stop] per feature of the index ({len(columned)})")
        for name, pair in zip(columned, self.columns):
            if not (isinstance(pair, list) and len(pair) == 2 and all(_is_int(v) for v in pair)
                    and 0 <= pair[0] < pair[1] <= _MAX_COLUMN):
                raise bad(f"columns of feature {name!r} must be [start, stop] with 0 <= start < stop, got {pair!r:.80}")
        spans = sorted(tuple(pair) for pair in self.columns)
        if any(b > c for (_, b), (c, _) in zip(spans, spans[1:])):
            raise bad("the features' columns overlap")
        _check_classes(self.classes, self.classes_dtype, bad)
        if not isinstance(self.multilabel, bool):
            raise bad(f"multilabel must be true or false, got {self.multilabel!r:.80}")
        if self.estimator is not None and not isinstance(self.estimator, str):
            raise bad("estimator must be base64 text or null")
        if not _finite(self.n0) or not self.n0 > 0:
            raise bad(f"n0 must be a finite number > 0, got {self.n0!r:.80}")
        if not isinstance(self.timing_sides, list) or not all(_is_int(v) and v >= 1 for v in self.timing_sides):
            raise bad("timing_sides must be a list of positive integers")
        if not isinstance(self.cost_fits, dict) or sorted(self.cost_fits) != sorted(features):
            raise bad(f"cost_fits must hold one fit per feature of the index ({', '.join(features)})")
        for name in features:
            _check_cost_fit(name, self.cost_fits[name], bad)
        if not isinstance(self.fit_stats, dict):
            raise bad("fit_stats must be an object")
        if self.feature_sources is not None:
            try:
                sources = [FeatureSource.from_json(d) for d in self.feature_sources]
            except (TypeError, ValueError) as exc:
                raise bad(f"feature_sources: {exc}") from None
            if [src.name for src in sources] != features:
                raise bad(f"feature_sources must name the index's features in order ({', '.join(features)})")
        if self.decode_fit is not None:
            _check_cost_fit(DECODE, self.decode_fit, bad)

    def init_params(self, trusted) -> dict:
        """The constructor arguments, ``estimator`` decoded (its types checked against ``trusted``)."""
        from polydom.index.storage.modelcodec import decode_model, digest, normalize_trusted

        params = dict(self.params)
        for key in params.pop("__tuples__", []):
            if isinstance(params.get(key), list):
                params[key] = tuple(params[key])
        for key in self.unsaved_params:
            params.pop(key, None)
        from .policies import Policy

        for key, value in list(params.items()):
            if isinstance(value, dict) and "policy" in value:
                try:
                    params[key] = Policy.from_json(value)
                except (TypeError, ValueError) as exc:
                    raise ClassifierStateError(f"the saved {key} parameter: {exc}") from None
        if self.estimator is not None:
            try:
                payload = base64.b64decode(self.estimator, validate=True)
            except (binascii.Error, ValueError):
                raise ClassifierStateError("the saved estimator parameter is not base64 text") from None
            # The metadata is covered by the index's state checksum; the payload's own is implied.
            params["learners"] = decode_model(payload, digest(payload), normalize_trusted(trusted),
                                              "the saved learners parameter")
        return params

    def features(self, names, feature_modules=(), steps=()) -> list:
        """The features of the index (``names``, in its order): from their recorded sources, a
        missing one imported from its module when ``feature_modules`` trusts it
        (:func:`~polydom.featurizers.provenance.load_features`); by name from the registry for a
        state saved before sources were kept, and then only polydom's own features
        (:func:`~polydom.featurizers.provenance.builtin_only`)."""
        if self.feature_sources is None:
            from polydom.featurizers import resolve_features
            from polydom.featurizers.provenance import builtin_only

            return builtin_only(resolve_features(list(names)))
        return load_features([FeatureSource.from_json(d) for d in self.feature_sources], feature_modules, steps)

    def serving_state(self, source, view, where, feature_modules=()):
        """The :class:`~polydom.serving.state.ServingState` of this metadata's version: ``view``
        (``source``'s version, whose params hold this metadata), its feature order and columns,
        ``classes_``, cost fits and a new planner over ``view``; custom features imported from the
        modules ``feature_modules`` trusts (:meth:`features`)."""
        from polydom.serving.state import ServingState

        store = view._store
        return ServingState.build(
            source, index=view, features={f.name: f for f in self.features(view.features, feature_modules, _steps_of(view))},
            feature_modules=tuple(feature_modules),
            decode_fit=None if self.decode_fit is None else CostFit.from_json(DECODE, self.decode_fit),
            classes=np.asarray(self.classes, dtype=np.dtype(self.classes_dtype)),
            columns={n: slice(a, b) for n, (a, b) in zip(_columned(view), self.columns)},
            cost_fits={name: CostFit.from_json(name, data) for name, data in self.cost_fits.items()},
            n0=self.n0, timing_sides=self.timing_sides, fit_stats=dict(self.fit_stats),
            # Whether this version serves its cascades is part of the version, as at its fit.
            cascade=bool(self.params.get("cascade", False)),
            path=None if store is None else store.path, version=None if store is None else store.version,
            multilabel=self.multilabel,
        )


def _warn_unloadable(features) -> None:
    """Warn about features defined in ``__main__``: the index saves, and this process serves it,
    but a fresh process can never import them, so :meth:`CostSensitiveClassifier.load` elsewhere fails."""
    import warnings

    names = [f.name for f in features if source_of(f).module == "__main__"]
    if names:
        warnings.warn(
            f"feature(s) {', '.join(map(repr, names))} are defined in __main__ (this script or notebook): the "
            "classifier is saved, but a fresh process cannot load it. Move them into a module of their own "
            "(for example myfeatures.py beside your script), import them from there, fit again, and load with "
            "feature_modules=['myfeatures']", UnloadableFeatureWarning, stacklevel=4)


def save_classifier(clf, path, **options) -> str:
    """Store ``clf``'s metadata in the index it serves and publish that index at ``path``; the
    version's name.

    The metadata rides in the index's JSON params: covered by the stored checksum and published
    in the same atomic step as the index and its models. So every version a classifier saves
    carries its own feature order, columns and classes, and a classifier that adopts it
    (:func:`polydom.serving.state.follow`) rebuilds its serving state from it.
    """
    import os

    from polydom.index.store import save_index

    state = clf._state()  # one version: the metadata and the index saved are the same one's
    _warn_unloadable(state.planner.features[name] for name in state.index.features)
    state.index.params[METADATA_KEY] = ClassifierMetadata.from_classifier(clf, state).to_json()
    version = save_index(state.index, path, **options)
    clf._serving = state.replace(path=os.path.abspath(os.fspath(path)), version=version)
    return version


#: What building the classifier from a state that passed :meth:`ClassifierMetadata.check` may
#: still raise on a crafted one (a parameter the constructor refuses, a feature name the registry
#: does not know, a model whose classes are not among ``classes``).
_INCONSISTENT = (KeyError, TypeError, ValueError, IndexError, AttributeError, ArithmeticError, RecursionError)


def state_from_version(source, view, where, feature_modules=()):
    """``(metadata, serving state)`` of the classifier saved in ``view``, the version ``source``
    serves: the metadata checked (:meth:`ClassifierMetadata.check`), the state built, and what
    serving reads read once (:func:`_check_fitted`).

    Raises
    ------
    ClassifierStateError
        ``view`` holds no classifier state, or a damaged or crafted one (the message names it).
    PolydomError
        A stored model refused (untrusted types, bad checksum).
    """
    meta = ClassifierMetadata.from_index(view, where)
    try:
        state = meta.serving_state(source, view, where, feature_modules)
        _check_fitted(state, view)
    except PolydomError:
        raise
    except _INCONSISTENT as exc:
        raise ClassifierStateError(f"the classifier saved at {where} cannot be loaded: {exc}") from None
    return meta, state


def load_classifier(cls, path, trusted=None, feature_modules=()):
    """A ``cls`` (CostSensitiveClassifier) with the parameters and fitted state saved at ``path``.

    Raises
    ------
    ClassifierStateError
        The index holds no classifier state, or a damaged or crafted one (the message names it).
    PolydomError
        As :func:`polydom.load`, or a stored model refused (untrusted types, bad checksum).
    """
    import polydom
    from polydom.serving.state import view_of

    from .classifier_params import CONSTRAINTS, check_params

    index = polydom.load(path, trusted=trusted)
    meta, state = state_from_version(index, view_of(index), path, tuple(feature_modules))
    try:
        params = _grouped(meta.init_params(trusted), state.index.params.get("scores", "measured"))
        clf = cls(**params)
        check_params(clf.get_params(deep=False), CONSTRAINTS)
        if clf.learners is not None:  # learners are objects, never JSON: a stored value is crafted
            from .learners import as_learners

            as_learners(clf.learners)
    except PolydomError:
        raise
    except _INCONSISTENT as exc:
        raise ClassifierStateError(f"the classifier saved at {path} cannot be loaded: {exc}") from None
    clf._adopt_state(index, state)
    return clf


#: Where each parameter of the flat constructor (saved before the settings were grouped) went.
_FLAT = {
    "alpha": ("selection", "alpha"), "e": ("selection", "e"), "tolerance": ("selection", "tolerance"),
    "scores": ("selection", "scores"), "cv_repeats": ("selection", "cv_repeats"),
    "finalist_repeats": ("selection", "finalist_repeats"), "scoring": ("selection", "scoring"),
    "backend": ("selection", "backend"), "lambdas": ("selection", "lambdas"),
    "cost_quantile": ("timing", "quantile"), "cost_degree": ("timing", "degree"),
    "calibrate_costs": ("timing", "calibrate"), "timing_sides": ("timing", "sides"),
    "timing_repeats": ("timing", "repeats"), "timing_images": ("timing", "images"),
    "cost_guard": ("serving", "guard"), "learn_guards": ("serving", "learn_guards"),
    "speculate": ("serving", "speculate"), "extrapolate": ("serving", "extrapolate"),
    "cascade_loss": ("cascade", "loss"), "cascade_price": ("cascade", "price"),
    "cascade_relative_price": ("cascade", "relative_price"), "cascade_mean_cost": ("cascade", "mean_cost"),
    "cascade_saving": ("cascade", "saving"), "cascade_per_class": ("cascade", "per_class"),
}


def _grouped(params: dict, scores: str) -> dict:
    """Constructor arguments from saved parameters, those of the flat constructor grouped.

    A classifier saved before it had a ``scores`` setting ranked by measured scores: ``scores``
    (what the index says it was built with) fills it, so that a clone or refit keeps it.
    """
    from .policies import Cascade, Selection, Serving, Timing

    groups: dict[str, dict] = {"selection": {}, "timing": {}, "cascade": {}, "serving": {}}
    flat = {k: params.pop(k) for k in list(params) if k in _FLAT}
    for key, value in flat.items():
        group, name = _FLAT[key]
        groups[group][name] = value
    cascading = params.pop("cascade", None)
    if params.pop("estimator", None) is not None and params.get("learners") is None:
        raise ValueError("a saved estimator parameter without its model")
    params.pop("warm_start", None)
    if "selection" not in params:  # saved by the flat constructor
        groups["selection"].setdefault("scores", scores)
        params["selection"] = Selection(**groups["selection"])
    if groups["timing"] and params.get("timing") is None:
        params["timing"] = Timing(**groups["timing"])
    if groups["serving"] and params.get("serving") is None:
        params["serving"] = Serving(**groups["serving"])
    if isinstance(cascading, Cascade):
        params["cascade"] = cascading
    elif cascading is True:
        params["cascade"] = Cascade(**groups["cascade"])
    return params


def _check_fitted(state, index) -> None:
    """What serving will read, read once now: the guards at every calibrated size, each
    feature's known dimension against its columns, and one model's classes against ``classes_``.

    Raises ``ValueError`` (turned into :class:`ClassifierStateError` by the caller).
    """
    index.serving_params  # noqa: B018 - reading it checks the guards and laws at every calibrated size
    for name in state.feature_names:  # the steps add no columns
        feature, columns = state.planner.features[name], state.feature_columns[name]
        if feature.dimension is not None and columns.stop - columns.start != feature.dimension:
            raise ValueError(f"feature {feature.name!r} has {feature.dimension} values, its columns "
                             f"{columns.start}:{columns.stop} say {columns.stop - columns.start}")
    classes = state.classes
    keys = sorted(index.models.keys()) if hasattr(index.models, "keys") else []
    model = index.models.get(keys[0]) if keys else None
    seen = getattr(model, "classes_", None)
    if state.multilabel:
        # A multilabel set's model answers label columns 0 .. n_labels - 1.
        if seen is not None and len(np.asarray(seen)) != len(classes):
            raise ValueError(f"a stored model answers {len(np.asarray(seen))} labels, classes_ holds {len(classes)}")
    elif seen is not None and not np.isin(np.asarray(seen), classes).all():
        raise ValueError(f"a stored model predicts classes {np.asarray(seen).tolist()!r:.120} that classes_ lacks")
