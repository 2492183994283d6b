"""Timing harness: how long each feature takes on images of several sizes.

Only measurement lives here; turning samples into cost polynomials is
`index.fitting`'s job.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from skimage.transform import resize

from polydom.featurizers.image_features import MIN_SIDE, as_gray_float, validate_image
from polydom.featurizers.registry import Feature, resolve_features

__all__ = ["CostMeasurements", "CostSamples", "measure_costs", "resize_square"]


@dataclass(frozen=True)
class CostSamples:
    """Timings of one feature.

    Attributes
    ----------
    sizes : numpy.ndarray of int64
        Item size (pixel count) of the image each sample was taken on.
    seconds : numpy.ndarray of float64
        Wall-clock duration of one call, ``>= 0``.
    items : numpy.ndarray of int64
        Index of the source image in the ``images`` given to `measure_costs`.

    The three arrays have the same length: one entry per timed call.
    """

    sizes: np.ndarray
    seconds: np.ndarray
    items: np.ndarray

    def __len__(self) -> int:
        return len(self.seconds)


@dataclass(frozen=True)
class CostMeasurements:
    """Result of `measure_costs`.

    Attributes
    ----------
    samples : Mapping[str, CostSamples]
        Per feature name, in the order the features were given.
    sides : tuple of int
        The square sides measured; item sizes are their squares.
    repeats, warmup : int
        Timed and untimed calls per feature, image and side.
    """

    samples: Mapping[str, CostSamples]
    sides: tuple[int, ...]
    repeats: int
    warmup: int

    @property
    def names(self) -> tuple[str, ...]:
        """Feature names, in measurement order."""
        return tuple(self.samples)

    @property
    def item_sizes(self) -> np.ndarray:
        """The distinct item sizes measured, ascending (``side ** 2``)."""
        return np.array(sorted({side * side for side in self.sides}), dtype=np.int64)

    def __getitem__(self, name: str) -> CostSamples:
        return self.samples[name]


def resize_square(image, side: int) -> np.ndarray:
    """Resize a valid image to ``side x side`` grey pixels.

    Aspect ratio is not kept. Downscaling is anti-aliased. The result keeps
    the input's dtype family: ``uint8`` and ``uint16`` inputs give ``uint8``
    and ``uint16`` (rounded), everything else ``float64`` in ``[0, 1]``.
    """
    array = np.asarray(image)
    gray = as_gray_float(array)
    anti_alias = side < max(gray.shape)
    out = resize(gray, (side, side), order=1, anti_aliasing=anti_alias, mode="reflect")
    out = np.clip(out, 0.0, 1.0)
    if array.dtype in (np.uint8, np.uint16):
        top = np.iinfo(array.dtype).max
        return np.round(out * top).astype(array.dtype)
    return out


@contextmanager
def _gc_paused():
    # As timeit does: a collection triggered by earlier allocations would be
    # charged to whichever feature happened to be running.
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _check_count(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def measure_costs(
    features,
    images: Sequence,
    sides: Sequence[int],
    *,
    repeats: int = 3,
    warmup: int = 1,
    clock: Callable[[], float] = time.perf_counter,
    progress: bool = False,
) -> CostMeasurements:
    """Time each feature on each image resized to each square side.

    For every side ``s`` and image, the image is resized to ``s x s`` (see
    `resize_square`; resizing is not timed), then each feature's function is
    called ``warmup`` times untimed and ``repeats`` times timed. Each timed
    call is one sample at item size ``s * s``. Image validation is done once
    per resized image and is not charged to the features. The garbage
    collector is paused during the calls.

    Parameters
    ----------
    features : iterable of Feature or str
        Features to time, or names in the feature registry.
    images : sequence of array_like
        Valid images (see `featurizers.validate_image`) of any size.
    sides : sequence of int
        Square sides to resize to, each ``>= MIN_SIDE``. The item size for a
        side ``s`` is ``s ** 2``; repeated sides are measured once.
    repeats : int
        Timed calls per feature, image and side, ``>= 1``.
    warmup : int
        Untimed calls before them, ``>= 0``.
    clock : callable
        ``clock() -> float`` seconds; must not go backwards.
    progress : bool
        Show a tqdm progress bar (one step per image and side).

    Returns
    -------
    CostMeasurements
        For every feature, ``len(images) * len(set(sides)) * repeats``
        samples.

    Raises
    ------
    ValueError
        On no features, no images, no sides, a side below ``MIN_SIDE``, an
        invalid image, or a clock that goes backwards.
    FeatureError
        Not raised: a feature's exception propagates unchanged, since timing
        runs the bare functions.
    """
    chosen: list[Feature] = resolve_features(features)
    if not chosen:
        raise ValueError("no features to measure")
    repeats = _check_count(repeats, "repeats", 1)
    warmup = _check_count(warmup, "warmup", 0)
    unique_sides = tuple(dict.fromkeys(_check_count(s, "side", MIN_SIDE) for s in sides))
    if not unique_sides:
        raise ValueError("no sides to measure")
    images = list(images)
    if not images:
        raise ValueError("no images to measure")
    for index, image in enumerate(images):
        validate_image(image, index=index)

    per_call = len(images) * len(unique_sides) * repeats
    sizes = {f.name: np.empty(per_call, np.int64) for f in chosen}
    seconds = {f.name: np.empty(per_call, np.float64) for f in chosen}
    items = {f.name: np.empty(per_call, np.int64) for f in chosen}

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(images) * len(unique_sides), desc="timing features", unit="image")
    try:
        slot = 0
        for side in unique_sides:
            for index, image in enumerate(images):
                resized = validate_image(resize_square(image, side), index=index)
                span = slice(slot, slot + repeats)
                for feature in chosen:
                    elapsed = _time_calls(feature.function, resized, repeats, warmup, clock)
                    if np.any(elapsed < 0):
                        raise ValueError("clock went backwards; use a monotonic clock")
                    sizes[feature.name][span] = side * side
                    seconds[feature.name][span] = elapsed
                    items[feature.name][span] = index
                slot += repeats
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()

    samples = {
        f.name: CostSamples(sizes[f.name], seconds[f.name], items[f.name]) for f in chosen
    }
    return CostMeasurements(samples, unique_sides, repeats, warmup)


def _time_calls(function, image, repeats: int, warmup: int, clock) -> np.ndarray:
    """Call ``function(image)`` ``warmup`` times, then time ``repeats`` calls."""
    elapsed = np.empty(repeats)
    with _gc_paused():
        for _ in range(warmup):
            function(image)
        for k in range(repeats):
            start = clock()
            function(image)
            elapsed[k] = clock() - start
    return elapsed
