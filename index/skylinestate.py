"""PolyDom's stored form: the index as JSON-able metadata and flat numeric arrays, and back."""

from __future__ import annotations

import numpy as np

from polydom.index.costs.curve import CostCurve
from polydom.lattice import FeatureSpace

from .cascade import Cascades, Committee
from .state import IndexState, check_std_errors, optional_column, read_optional_column
from .state import stored_array as _array

__all__ = ["encode", "decode", "check_arrays"]


def encode(index):
    """An ``IndexState`` of ``index``: the shared header, then the skylines, the trained sets with
    their standard errors and measured scores (NaN where there are none), the prefix chains and
    the cascades."""
    offsets = np.zeros(len(index.skylines) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(s) for s in index.skylines])
    meta = index.state_header()
    classes, cascade_arrays = index.cascades.to_state()
    meta["cascade_classes"] = classes
    chains = index.chains
    arrays = {
        "candidates": np.array(index.candidates, dtype=np.int64),
        "candidate_accuracy": np.array(index.candidate_accuracy, dtype=np.float64),
        "bounds": np.array(index.bounds, dtype=np.float64),
        "skyline_offsets": offsets,
        "skyline_ids": np.array([c for s in index.skylines for c in s], dtype=np.int64),
        "explored_masks": np.array(list(index.explored), dtype=np.int64),
        "explored_accuracy": np.array(list(index.explored.values()), dtype=np.float64),
        "explored_std_error": optional_column(index.std_error, index.explored),
        "chain_masks": np.array(list(chains), dtype=np.int64),
        "chain_offsets": np.cumsum([0] + [len(o) for o in chains.values()], dtype=np.int64),
        "chain_features": np.array([i for o in chains.values() for i in o], dtype=np.int64),
        **cascade_arrays,
    }
    if index.measured:  # only an index ranking by a fit of the scores keeps them apart
        arrays["explored_measured"] = optional_column(index.measured, index.explored)
    return IndexState(meta, arrays, index.models)


def decode(cls, state):
    """Inverse of :func:`encode`; arrays added after the first format (standard errors, chains,
    cascades, measured scores) may be absent, and then the index has none.

    Every array is checked (:func:`check_arrays`) before any is used, so a damaged or crafted
    state raises ``ValueError`` instead of looping, exhausting memory or answering wrongly.
    """
    meta, arrays = state.meta, state.arrays
    check_arrays(meta, arrays)
    lo, hi = meta["domain"]
    offsets = arrays["skyline_offsets"].tolist()
    ids = arrays["skyline_ids"].tolist()
    masks = arrays["explored_masks"].tolist()
    se = arrays.get("explored_std_error")
    measured = arrays.get("explored_measured")
    return cls(
        FeatureSpace(meta["features"]), [CostCurve(c) for c in meta["costs"]], (float(lo), float(hi)),
        arrays["candidates"].tolist(), arrays["candidate_accuracy"].tolist(), arrays["bounds"].tolist(),
        [ids[a:b] for a, b in zip(offsets, offsets[1:])],
        models=state.models, explored=dict(zip(masks, arrays["explored_accuracy"].tolist())),
        stats=meta.get("stats"), params=meta.get("params"),
        std_error={} if se is None else read_optional_column(masks, se),
        chains=_chains(arrays), cascades=Cascades.from_state(meta.get("cascade_classes"), arrays),
        measured={} if measured is None else read_optional_column(masks, measured),
    )


def _chains(arrays) -> dict[int, tuple[int, ...]]:
    if "chain_masks" not in arrays:
        return {}
    offsets = arrays["chain_offsets"].tolist()
    flat = arrays["chain_features"].tolist()
    return {m: tuple(flat[a:b]) for m, a, b in zip(arrays["chain_masks"].tolist(), offsets, offsets[1:])}


def _masks(arrays, name: str, full: int, *, unique: bool = True) -> np.ndarray:
    arr = _array(arrays, name, "iu")
    if len(arr) and (arr.min() < 0 or arr.max() >= full):
        raise ValueError(f"array {name!r} holds a feature-set mask outside [0, {full})")
    if unique and len(np.unique(arr)) != len(arr):
        raise ValueError(f"array {name!r} repeats a feature set")
    return arr


def _probabilities(arrays, name: str, length: int) -> None:
    arr = _array(arrays, name, "f", length)
    if not (np.isfinite(arr).all() and (arr >= 0.0).all() and (arr <= 1.0).all()):
        raise ValueError(f"array {name!r} holds a value outside [0, 1]")


def _offsets(arrays, name: str, count: int, total: int, *, nonempty: bool) -> None:
    arr = _array(arrays, name, "iu", count + 1)
    steps = np.diff(arr)
    if arr[0] != 0 or arr[-1] != total or (steps <= 0 if nonempty else steps < 0).any():
        raise ValueError(f"array {name!r} does not partition {total} entries into {count} groups")


def _check_tolerance(params) -> None:
    """``ValueError`` unless ``params["tolerance"]`` is absent, None or a finite number ``>= 0``.

    A negative or NaN tolerance lets no set tie even with itself, and serving would find no
    answer at all.
    """
    if params is None:
        return
    if not isinstance(params, dict):
        raise ValueError(f"the stored params are a {type(params).__name__}, not an object")
    tolerance = params.get("tolerance")
    if tolerance is None:
        return
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0.0 <= tolerance < float("inf"):
        raise ValueError(f"the stored tolerance {tolerance!r} is not a finite number >= 0")


def check_arrays(meta, arrays) -> None:
    """Check a stored PolyDom state before it is used: ``ValueError`` naming the first flaw.

    Masks lie in ``[0, 2**features)`` and are distinct; accuracies are finite and in ``[0, 1]``;
    standard errors NaN (none) or finite and ``>= 0``; bounds finite, strictly ascending, from the
    domain's lower end; measured scores NaN or in ``[0, 1]``; offsets partition their entries (each
    skyline non-empty); skyline ids
    and chain features index what they refer to; cascade thresholds fit their stages and lie in
    ``[0, 1]``, committees' values fill their shapes and are finite; every cost curve is ``>= 0``
    on the domain; ``params["tolerance"]``, when set, is a finite number ``>= 0``.
    ``O(entries)``.
    """
    _check_tolerance(meta.get("params"))
    n_features = len(meta["features"])
    full = 1 << n_features
    lo, hi = float(meta["domain"][0]), float(meta["domain"][1])
    for name, coefficients in zip(meta["features"], meta["costs"]):
        if not CostCurve(coefficients).is_nonnegative((lo, hi)):
            raise ValueError(f"the cost curve of feature {name!r} is negative on the domain")
    candidates = _masks(arrays, "candidates", full)
    _probabilities(arrays, "candidate_accuracy", len(candidates))
    bounds = _array(arrays, "bounds", "f")
    if not len(bounds) or not np.isfinite(bounds).all() or bounds[0] != lo or (np.diff(bounds) <= 0).any() or bounds[-1] > hi:
        raise ValueError("array 'bounds' must ascend strictly from the domain's lower end")
    ids = _array(arrays, "skyline_ids", "iu")
    _offsets(arrays, "skyline_offsets", len(bounds), len(ids), nonempty=True)
    if len(ids) and (ids.min() < 0 or ids.max() >= len(candidates)):
        raise ValueError("array 'skyline_ids' refers to a candidate that does not exist")
    explored = _masks(arrays, "explored_masks", full)
    _probabilities(arrays, "explored_accuracy", len(explored))
    if "explored_std_error" in arrays:
        check_std_errors(arrays, "explored_std_error", len(explored))
    if "explored_measured" in arrays:
        measured = _array(arrays, "explored_measured", "f", len(explored))
        if not (np.isnan(measured) | ((measured >= 0.0) & (measured <= 1.0))).all():
            raise ValueError("array 'explored_measured' holds a score outside [0, 1]")
    if "chain_masks" in arrays:
        chains = _masks(arrays, "chain_masks", full)
        order = _array(arrays, "chain_features", "iu")
        _offsets(arrays, "chain_offsets", len(chains), len(order), nonempty=False)
        if len(order) and (order.min() < 0 or order.max() >= n_features):
            raise ValueError("array 'chain_features' refers to a feature that does not exist")
    if "cascade_masks" in arrays and meta.get("cascade_classes") is not None:
        classes = meta["cascade_classes"]
        if not isinstance(classes, list):
            raise ValueError("the stored cascade classes are not a list")
        masks = _masks(arrays, "cascade_masks", full)
        stages = _array(arrays, "cascade_stages", "iu", len(masks))
        thresholds = _array(arrays, "cascade_thresholds", "f")
        if len(stages) and stages.min() < 1:
            raise ValueError("array 'cascade_stages' holds a cascade without stages")
        if int(stages.sum(dtype=object)) * len(classes) != len(thresholds):
            raise ValueError("array 'cascade_thresholds' does not match the stages and classes")
        if not (np.isfinite(thresholds).all() and (thresholds >= 0.0).all() and (thresholds <= 1.0).all()):
            raise ValueError("array 'cascade_thresholds' holds a value outside [0, 1]")
        if "committee_masks" in arrays:
            held = _masks(arrays, "committee_masks", full)
            shapes = _array(arrays, "committee_shapes", "iu", 3 * len(held)).reshape(-1, 3).astype(object)
            values = _array(arrays, "committee_values", "f")
            if len(shapes) and shapes.min() < 1:
                raise ValueError("array 'committee_shapes' holds an empty committee")
            if int(sum(Committee.n_values(*shape) for shape in shapes)) != len(values):
                raise ValueError("array 'committee_values' does not match the committees' shapes")
            if not np.isfinite(values).all():
                raise ValueError("array 'committee_values' holds a non-finite value")
