"""What the classifier accepts as data -- images, labels, groups, budgets -- each checked once.

Every check raises one :class:`~polydom.errors.InputTypeError` or
:class:`~polydom.errors.InputError` (a ``TypeError`` or ``ValueError`` too) that names the argument and, for a bad
item, its position, so that a caller with ten thousand images can find the bad one.
"""

from __future__ import annotations

import math
import numbers
import os
import time
from collections.abc import Sequence

import numpy as np

from polydom.errors import InputError, InputTypeError
from polydom.featurizers.sources import as_array, decode_image, is_encoded, is_pil_image

__all__ = ["as_image_list", "check_images", "check_labels", "check_groups", "check_budgets", "check_errors"]

_WRAP = "wrap a single image in a list: [image]"


def as_image_list(images) -> Sequence:
    """``images`` if it is a sequence of images -- arrays, PIL images, file paths or encoded bytes,
    mixed as they come -- or an ``(n, H, W[, C])`` array; one clear error otherwise.

    One image passed without its list is refused with an error that says to wrap it: a 2-D
    array (not read as a list of rows), an ``(H, W, 3)`` or ``(H, W, 4)`` array (a stack of
    images 3 or 4 pixels wide cannot be one), a path, bytes or a PIL image.
    """
    if isinstance(images, np.ndarray):
        if images.ndim == 2 or (images.ndim == 3 and images.shape[2] in (3, 4)):
            raise InputError(f"images must be a sequence of images, got one image array of shape {images.shape}; "
                             f"{_WRAP}")
        return images
    if is_encoded(images) or is_pil_image(images):
        what = ("PIL image" if is_pil_image(images) else "file path" if isinstance(images, (str, os.PathLike))
                else "encoded image")
        raise InputError(f"images must be a sequence of images, got one {what}; {_WRAP}")
    if not isinstance(images, Sequence):
        raise InputTypeError(f"images must be a sequence of images (e.g. a list of arrays or file paths), "
                        f"got {type(images).__name__}")
    return images


def check_images(images, *, purpose: str | None = None, decode_times: list | None = None) -> list[np.ndarray]:
    """Every image as a validated array (the first bad one named by its position): paths and bytes
    decoded, PIL images converted (:func:`polydom.featurizers.sources.as_array`).

    Parameters
    ----------
    images : sequence
    purpose : str, optional
        If given, an empty sequence is refused with ``"images is empty: at least one image is
        required <purpose>"``.
    decode_times : list, optional
        Receives ``(size, seconds)`` per encoded image: the computing thread's CPU time of its
        decoding, the samples of the decode step's cost curve.
    """
    checked = []
    for i, image in enumerate(as_image_list(images)):
        if decode_times is not None and is_encoded(image):
            start = time.thread_time()
            array = decode_image(image, index=i)
            decode_times.append((array.shape[0] * array.shape[1], time.thread_time() - start))
        else:
            array = as_array(image, index=i)
        checked.append(array)
    if purpose is not None and not checked:
        raise InputError(f"images is empty: at least one {purpose}")
    return checked


def check_labels(y, n_images: int) -> np.ndarray:
    """One class label per image, as an array (scikit-learn's classification target check included)."""
    from sklearn.utils.multiclass import check_classification_targets

    y = np.asarray(y)
    if y.ndim != 1:
        raise InputError(f"y must be 1-D (one label per image), got shape {y.shape}")
    if len(y) != n_images:
        raise InputError(f"y has {len(y)} labels but there are {n_images} images")
    check_classification_targets(y)
    return y


def check_groups(groups, n_images: int) -> np.ndarray | None:
    """One fold group per image, or None."""
    if groups is None:
        return None
    groups = np.asarray(groups)
    if groups.shape != (n_images,):
        raise InputError(f"groups must hold one group per image ({n_images}), got shape {groups.shape}")
    return groups


def _seconds(value) -> float:
    """``float(value)``, with an integer beyond float range read as +-inf."""
    try:
        return float(value)
    except OverflowError:
        if isinstance(value, numbers.Integral):
            return math.inf if value > 0 else -math.inf
        raise


def check_budgets(budget, n: int) -> Sequence[float]:
    """Per-item budgets in seconds as floats (``None``: unlimited), or one clear error.

    ``O(n)``; a plain number skips numpy, since one image per call is the common serving case.
    An integer beyond float range is read as infinite: a budget that large means no limit, as
    ``math.inf`` (and ``None``) do.
    """
    if budget is None:
        return [math.inf] * n
    if type(budget) in (float, int) and budget >= 0:
        return [_seconds(budget)] * n
    if isinstance(budget, bool) or isinstance(budget, (str, bytes)) or np.iscomplexobj(budget):
        raise InputTypeError(f"budget must be a number of seconds or one per image, got {budget!r:.80}")
    try:
        try:
            arr = np.asarray(budget, dtype=np.float64)
        except OverflowError:  # integers beyond float range, one by one
            arr = np.array([_seconds(v) for v in np.asarray(budget, dtype=object).ravel().tolist()],
                           dtype=np.float64).reshape(np.shape(budget))
    except (TypeError, ValueError):
        raise InputTypeError(f"budget must be a number of seconds or one per image, got {budget!r:.80}") from None
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    elif arr.ndim != 1 or len(arr) != n:
        raise InputError(f"budget must be one number or one per image ({n}), got shape {arr.shape}")
    bad = np.isnan(arr) | (arr < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        what = "NaN" if np.isnan(arr[i]) else f"negative ({arr[i]!r})"
        where = f" for item {i}" if n > 1 and np.ndim(budget) else ""
        raise InputError(f"budget is {what}{where}; it must be >= 0 seconds")
    return arr


def check_errors(errors) -> str:
    """``errors`` when it is ``"raise"`` (a bad item fails the call) or ``"return"`` (its error is
    its answer, the other items served)."""
    if errors not in ("raise", "return"):
        raise InputError(f'errors must be "raise" or "return", got {errors!r:.80}')
    return errors
