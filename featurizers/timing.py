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
        Duration of one call on the measuring clock (the process's CPU time by default), ``>= 0``.
    items : numpy.ndarray of int64
        Index of the source image in the ``images`` given to `measure_costs`.
    wall_seconds : numpy.ndarray of float64, optional
        Wall-clock duration of the same calls, recorded beside them.

    The three arrays have the same length: one entry per timed call.
    """

    sizes: np.ndarray
    seconds: np.ndarray
    items: np.ndarray
    wall_seconds: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.seconds)

    def cpu_wall_ratio(self) -> float:
        """Median of CPU time over wall time per call; well below 1 means the process was kept
        waiting (other work on the cores), NaN when no wall times were recorded."""
        if self.wall_seconds is None:
            return float("nan")
        ok = self.wall_seconds > 0
        return float(np.median(self.seconds[ok] / self.wall_seconds[ok])) if ok.any() else float("nan")

    def spread(self) -> float:
        """The largest relative interquartile range of the times at one size (0: perfectly stable)."""
        worst = 0.0
        for size in np.unique(self.sizes):
            t = self.seconds[self.sizes == size]
            mid = float(np.median(t))
            if len(t) >= 4 and mid > 0:
                q1, q3 = np.percentile(t, [25, 75])
                worst = max(worst, float(q3 - q1) / mid)
        return worst


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
    clock: Callable[[], float] = time.process_time,
    wall_clock: Callable[[], float] | None = time.perf_counter,
    progress: bool = False,
) -> CostMeasurements:
    """Time each feature on each image resized to each square side.

    For every image and side ``s`` -- sizes interleaved within each image, so a burst of
    contention hits every size rather than one -- the image is resized to ``s x s`` (see
    `resize_square`; resizing is not timed, and done once per image and side), then each
    feature's function is called ``warmup`` times untimed and ``repeats`` times timed. Each timed
    call is one sample at item size ``s * s``. Image validation is not charged to the features.
    The garbage collector is paused during the calls.

    The default clock is the process's CPU time: the work a feature does, which other processes
    competing for the cores do not inflate (wall time does, by up to several times on a busy
    machine). It counts every thread of the process, so features that use threaded numerical
    libraries are charged for all of their work. Wall time is recorded beside it.

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
        ``clock() -> float`` seconds; must not go backwards. The fitted costs come from it.
    wall_clock : callable or None
        Read around the same calls for ``wall_seconds``; None records none.
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
    walls = {f.name: np.empty(per_call, np.float64) for f in chosen}
    items = {f.name: np.empty(per_call, np.int64) for f in chosen}
    resized_cache: dict[tuple[int, int], np.ndarray] = {}

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(images) * len(unique_sides), desc="timing features", unit="image")
    try:
        slot = 0
        for index, image in enumerate(images):
            for side in unique_sides:
                key = (id(image), side)  # a list repeating an image resizes it once per side
                if key not in resized_cache:
                    resized_cache[key] = validate_image(resize_square(image, side), index=index)
                resized = resized_cache[key]
                span = slice(slot, slot + repeats)
                for feature in chosen:
                    elapsed, wall = _time_calls(feature.function, resized, repeats, warmup, clock, wall_clock)
                    if np.any(elapsed < 0):
                        raise ValueError("clock went backwards; use a monotonic clock")
                    sizes[feature.name][span] = side * side
                    seconds[feature.name][span] = elapsed
                    walls[feature.name][span] = wall
                    items[feature.name][span] = index
                slot += repeats
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()

    samples = {
        f.name: CostSamples(sizes[f.name], seconds[f.name], items[f.name],
                            walls[f.name] if wall_clock is not None else None)
        for f in chosen
    }
    return CostMeasurements(samples, unique_sides, repeats, warmup)


def _time_calls(function, image, repeats: int, warmup: int, clock, wall_clock) -> tuple[np.ndarray, np.ndarray]:
    """Call ``function(image)`` ``warmup`` times, then time ``repeats`` calls on both clocks."""
    elapsed = np.empty(repeats)
    wall = np.full(repeats, np.nan)
    with _gc_paused():
        for _ in range(warmup):
            function(image)
        for k in range(repeats):
            w0 = wall_clock() if wall_clock is not None else 0.0
            start = clock()
            function(image)
            elapsed[k] = clock() - start
            if wall_clock is not None:
                wall[k] = wall_clock() - w0
    return elapsed, wall
