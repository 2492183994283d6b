"""What the classifier accepts as data -- images, labels, groups, budgets -- each checked once.

Every check raises one ``TypeError`` or ``ValueError`` that names the argument and, for a bad
item, its position, so that a caller with ten thousand images can find the bad one.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

from polydom.featurizers import validate_image

__all__ = ["as_image_list", "check_images", "check_labels", "check_groups", "check_budgets"]


def as_image_list(images) -> Sequence:
    """``images`` if it is a sequence of images (or an ``(n, H, W[, C])`` array); one clear error otherwise.

    A single 2-D array is refused rather than read as a list of rows: that is almost always one
    image passed without its list.
    """
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


def check_images(images, *, purpose: str | None = None) -> list[np.ndarray]:
    """Every image validated (the first bad one named by its position).

    Parameters
    ----------
    images : sequence of array_like
    purpose : str, optional
        If given, an empty sequence is refused with ``"images is empty: at least one image is
        required <purpose>"``.
    """
    checked = [validate_image(image, index=i) for i, image in enumerate(as_image_list(images))]
    if purpose is not None and not checked:
        raise ValueError(f"images is empty: at least one {purpose}")
    return checked


def check_labels(y, n_images: int) -> np.ndarray:
    """One class label per image, as an array (scikit-learn's classification target check included)."""
    from sklearn.utils.multiclass import check_classification_targets

    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D (one label per image), got shape {y.shape}")
    if len(y) != n_images:
        raise ValueError(f"y has {len(y)} labels but there are {n_images} images")
    check_classification_targets(y)
    return y


def check_groups(groups, n_images: int) -> np.ndarray | None:
    """One fold group per image, or None."""
    if groups is None:
        return None
    groups = np.asarray(groups)
    if groups.shape != (n_images,):
        raise ValueError(f"groups must hold one group per image ({n_images}), got shape {groups.shape}")
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
    if isinstance(budget, bool) or isinstance(budget, (str, bytes)):
        raise TypeError(f"budget must be a number of seconds or one per image, got {budget!r:.80}")
    try:
        try:
            arr = np.asarray(budget, dtype=np.float64)
        except OverflowError:  # integers beyond float range, one by one
            arr = np.array([_seconds(v) for v in np.asarray(budget, dtype=object).ravel().tolist()],
                           dtype=np.float64).reshape(np.shape(budget))
    except (TypeError, ValueError):
        raise TypeError(f"budget must be a number of seconds or one per image, got {budget!r:.80}") from None
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    elif arr.ndim != 1 or len(arr) != n:
        raise ValueError(f"budget must be one number or one per image ({n}), got shape {arr.shape}")
    bad = np.isnan(arr) | (arr < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        what = "NaN" if np.isnan(arr[i]) else f"negative ({arr[i]!r})"
        where = f" for item {i}" if n > 1 and np.ndim(budget) else ""
        raise ValueError(f"budget is {what}{where}; it must be >= 0 seconds")
    return arr
