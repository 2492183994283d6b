"""An index's storable form, shared by every backend and the storage layer.

Backends turn themselves into an :class:`IndexState` (``to_state``) and back (``from_state``);
the storage layer writes and reads only this, so it never needs to know an index class.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import NamedTuple

import numpy as np

__all__ = ["IndexState", "check_std_errors", "optional_column", "read_optional_column", "stored_array"]


class IndexState(NamedTuple):
    """A backend-neutral snapshot of an index, for storage.

    Attributes
    ----------
    meta : dict
        JSON-able: ``backend`` tag, ``features`` (ordered names), ``costs`` (coefficients per
        feature), ``domain``, ``params``, ``stats`` and whatever else the backend needs.
    arrays : dict of str to numpy.ndarray
        Flat numeric arrays (1-D, fixed dtype).
    models : mapping of int to object
        Trained models by feature-set mask.
    """

    meta: dict
    arrays: dict
    models: Mapping


def stored_array(arrays, name: str, kinds: str, length: int | None = None) -> np.ndarray:
    """``arrays[name]``, checked to be 1-D, of a dtype kind in ``kinds`` and ``length`` long
    (when given); ``ValueError`` naming the array otherwise."""
    try:
        arr = arrays[name]
    except KeyError:
        raise ValueError(f"the stored index has no {name!r} array") from None
    if not isinstance(arr, np.ndarray) or arr.ndim != 1 or arr.dtype.kind not in kinds:
        raise ValueError(f"array {name!r} must be 1-D of kind {kinds!r}")
    if length is not None and len(arr) != length:
        raise ValueError(f"array {name!r} has {len(arr)} entries, expected {length}")
    return arr


def optional_column(values: Mapping[int, float], masks: Iterable[int]) -> np.ndarray:
    """Per mask, its entry in ``values`` or NaN: how a number that some sets lack (a standard
    error, a measured score) is stored beside the masks."""
    return np.array([values.get(m, math.nan) for m in masks], dtype=np.float64)


def read_optional_column(masks: Iterable[int], column: np.ndarray) -> dict:
    """Inverse of :func:`optional_column`: mask -> value for the entries that are not NaN."""
    return {m: v for m, v in zip(masks, column.tolist()) if v == v}


def check_std_errors(arrays, name: str, count: int) -> None:
    """``ValueError`` unless ``arrays[name]`` holds ``count`` standard errors, each NaN (none) or
    finite and ``>= 0``."""
    se = stored_array(arrays, name, "f", count)
    if not (np.isnan(se) | (np.isfinite(se) & (se >= 0.0))).all():
        raise ValueError(f"array {name!r} holds a negative or infinite standard error")
