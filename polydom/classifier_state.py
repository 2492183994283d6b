"""The classifier's own state, saved inside its index: parameters, classes, columns, cost fits.

``CostSensitiveClassifier.save`` stores a :class:`ClassifierMetadata` as JSON under the
index's ``params["classifier"]``, so it is covered by the index's checksum and published in the
same atomic step as the index and its models; :meth:`ClassifierMetadata.from_index` reads it
back. The layout (``format`` 1) is that of every classifier saved so far.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from .costs import CostFit

__all__ = ["ClassifierMetadata", "METADATA_KEY", "METADATA_FORMAT", "save_classifier", "load_classifier"]

#: Where in the index's params the metadata lives.
METADATA_KEY = "classifier"
METADATA_FORMAT = 1


def _json_params(params: dict) -> tuple[dict, dict]:
    """``(saved, unsaved)``: parameters as JSON, and the reprs of those JSON cannot hold."""
    from polydom.featurizers import Feature

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

    @classmethod
    def from_classifier(cls, clf) -> "ClassifierMetadata":
        """The metadata of a fitted classifier."""
        from sklearn.base import clone

        from polydom.index.modelcodec import encode_model

        params, unsaved = _json_params({k: v for k, v in clf.get_params(deep=False).items() if k != "estimator"})
        estimator = None
        if clf.estimator is not None:
            payload = encode_model(clone(clf.estimator), "the estimator parameter")
            estimator = base64.b64encode(payload).decode("ascii")
        return cls(
            params=params, unsaved_params=unsaved,
            columns=[[sl.start, sl.stop] for sl in clf.feature_columns_.values()],
            classes=clf.classes_.tolist(), classes_dtype=clf.classes_.dtype.str, estimator=estimator,
            n0=clf.n0_, timing_sides=list(clf.timing_sides_),
            cost_fits={name: fit.to_json() for name, fit in clf.cost_fits_.items()}, fit_stats=clf.fit_stats_,
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
        """The metadata a classifier saved in ``index``; ``ValueError`` naming ``where`` if there is none."""
        data = index.params.get(METADATA_KEY)
        names = [f.name for f in dataclasses.fields(cls)]
        if not isinstance(data, dict) or data.get("format") != METADATA_FORMAT or any(n not in data for n in names):
            raise ValueError(
                f"the index at {where} was not saved by CostSensitiveClassifier (open it with polydom.load)"
            )
        return cls(**{n: data[n] for n in names})

    def init_params(self, trusted) -> dict:
        """The constructor arguments, ``estimator`` decoded (its types checked against ``trusted``)."""
        from polydom.index.modelcodec import decode_model, digest, normalize_trusted

        params = dict(self.params)
        for key in params.pop("__tuples__", []):
            if isinstance(params.get(key), list):
                params[key] = tuple(params[key])
        for key in self.unsaved_params:
            params.pop(key, None)
        params["estimator"] = None
        if self.estimator is not None:
            payload = base64.b64decode(self.estimator)
            # The metadata is covered by the index's state checksum; the payload's own is implied.
            params["estimator"] = decode_model(payload, digest(payload), normalize_trusted(trusted),
                                               "the saved estimator parameter")
        return params

    def fitted_attributes(self, index) -> dict[str, Any]:
        """The classifier's fitted attributes (``classes_``, ``cost_fits_``, ``planner_`` ...) over ``index``."""
        from polydom.featurizers import resolve_features

        from .serving import ServingPlanner

        fits = {name: CostFit.from_json(name, data) for name, data in self.cost_fits.items()}
        return {
            "index_": index,
            "classes_": np.asarray(self.classes, dtype=np.dtype(self.classes_dtype)),
            "feature_names_": tuple(index.features),
            "feature_columns_": {n: slice(a, b) for n, (a, b) in zip(index.features, self.columns)},
            "cost_fits_": fits,
            "cost_curves_": {name: fit.curve for name, fit in fits.items()},
            "n0_": float(self.n0),
            "timing_sides_": tuple(self.timing_sides),
            "fit_stats_": dict(self.fit_stats),
            "planner_": ServingPlanner(index, {f.name: f for f in resolve_features(index.features)},
                                       cascade=bool(self.params.get("cascade", False))),
        }


def save_classifier(clf, path, **options) -> str:
    """Store ``clf``'s metadata in its index and publish the index at ``path``; the version's name.

    The metadata rides in the index's JSON params: covered by the stored checksum and published
    in the same atomic step as the index and its models.
    """
    import os

    from polydom.index.store import save_index

    clf.index_.params[METADATA_KEY] = ClassifierMetadata.from_classifier(clf).to_json()
    version = save_index(clf.index_, path, **options)
    clf.path_, clf.version_ = os.path.abspath(os.fspath(path)), version
    return version


def load_classifier(cls, path, trusted=None):
    """A ``cls`` (CostSensitiveClassifier) with the parameters and fitted state saved at ``path``."""
    import polydom
    from polydom.index.store import store_of

    index = polydom.load(path, trusted=trusted)
    meta = ClassifierMetadata.from_index(index, path)
    params = meta.init_params(trusted)
    # A classifier saved before it had a ``scores`` parameter ranked by measured scores; the
    # index says which ranking it was built with, so a clone or refit keeps it.
    params.setdefault("scores", index.params.get("scores", "measured"))
    clf = cls(**params)
    for name, value in meta.fitted_attributes(index).items():
        setattr(clf, name, value)
    store = store_of(index)
    clf.path_, clf.version_ = store.path, store.version
    return clf
