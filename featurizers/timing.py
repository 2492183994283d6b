"""Timing harness: how long each feature takes on images of several sizes, and whether the
machine was quiet enough to trust the answer.

Only measurement lives here; turning samples into cost polynomials is
`polydom.index.costs.fitting`'s job.
"""

from __future__ import annotations

import gc
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import numpy as np
from skimage.transform import resize
from skimage.util import img_as_float64

from polydom.featurizers.image_features import MIN_SIDE, as_gray_float, validate_image
from polydom.featurizers.registry import Feature, resolve_features

from .timingcheck import (  # noqa: F401 - the check lives apart; kept importable from here
    MAX_OTHER_THREADS, MAX_REPEAT_SPREAD, MIN_CPU_WALL_RATIO, CostMeasurementWarning, TimingCheck, check_timing,
)

__all__ = [
    "CostMeasurementWarning",
    "CostMeasurements",
    "CostSamples",
    "TimingCheck",
    "check_timing",
    "measure_costs",
    "resize_square",
]

@dataclass(frozen=True)
class CostSamples:
    """Timings of one feature.

    Attributes
    ----------
    sizes : numpy.ndarray of int64
        Item size (pixel count) of the image each sample was taken on.
    seconds : numpy.ndarray of float64
        Duration of one call on the measuring clock (the timing thread's CPU time by default),
        ``>= 0``.
    items : numpy.ndarray of int64
        Index of the source image in the ``images`` given to `measure_costs`. Samples sharing
        a size and an item are repeats of one call.
    wall_seconds : numpy.ndarray of float64, optional
        Wall-clock duration of the same calls, recorded beside them; None when not recorded.
    cold_seconds : numpy.ndarray of float64, optional
        With priming (see `measure_costs`), the measuring clock's duration of the untimed call
        just before each timed one: the cost with whatever the previous feature left in the
        caches. None without priming.

    The arrays have the same length: one entry per timed call.
    """

    sizes: np.ndarray
    seconds: np.ndarray
    items: np.ndarray
    wall_seconds: np.ndarray | None = None
    cold_seconds: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.seconds)

    def cpu_wall_ratio(self) -> float:
        """Total measured time over total wall time: the share of its wall time the timed
        calls spent on a core (about 1 on a quiet machine); NaN without wall times."""
        if self.wall_seconds is None:
            return math.nan
        wall = float(np.sum(self.wall_seconds))
        return float(np.sum(self.seconds)) / wall if wall > 0 else math.nan

    def repeat_spread(self) -> float:
        """Median, over the calls repeated at one size on one item, of the repeats' interquartile
        range over their median; 0 is perfectly stable, NaN when nothing was repeated.

        Spread across items is left out on purpose: different images may really cost
        different amounts, while repeats of one call differ only by measurement noise.
        """
        spreads = []
        for times in _repeat_groups(self.sizes, self.items, self.seconds):
            middle = float(np.median(times))
            if len(times) >= 2 and middle > 0:
                q1, q3 = np.percentile(times, [25, 75])
                spreads.append(float(q3 - q1) / middle)
        return float(np.median(spreads)) if spreads else math.nan

    def cold_ratio(self) -> float:
        """Median of the cold calls' time over the primed calls' time: how much the cache state
        a call inherits costs it on this machine now (NaN without priming)."""
        if self.cold_seconds is None:
            return math.nan
        ok = self.seconds > 0
        return float(np.median(self.cold_seconds[ok] / self.seconds[ok])) if ok.any() else math.nan


def _repeat_groups(sizes, items, seconds) -> list[np.ndarray]:
    """``seconds`` split into the groups sharing a size and an item."""
    keys = np.stack([np.asarray(sizes, np.int64), np.asarray(items, np.int64)], axis=1)
    _, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    order = np.argsort(inverse, kind="stable")
    bounds = np.flatnonzero(np.diff(inverse[order])) + 1
    return np.split(np.asarray(seconds, np.float64)[order], bounds)


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
    elapsed : float
        Wall seconds the timed rounds took (NaN when no wall clock was read).
    other_threads_seconds : float
        CPU seconds the process's other threads used during the timed rounds (0 when not
        known): our own workers, or a library's thread pool, competing with the timed calls.
    pinned_cpu : int or None
        The core the timing thread was pinned to, if it was.
    """

    samples: Mapping[str, CostSamples]
    sides: tuple[int, ...]
    repeats: int
    warmup: int
    elapsed: float = math.nan
    other_threads_seconds: float = 0.0
    pinned_cpu: int | None = None

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

    def check(self, **thresholds) -> "TimingCheck":
        """`check_timing` of these measurements."""
        return check_timing(self, **thresholds)


def resize_square(image, side: int) -> np.ndarray:
    """Resize a valid image to ``side x side`` pixels, grey or RGB as it came.

    Aspect ratio is not kept. Downscaling is anti-aliased. A colour image stays in colour (its
    alpha dropped), so that features are timed on what they convert, as on the images served.
    The result keeps the input's dtype family: ``uint8`` and ``uint16`` inputs give ``uint8``
    and ``uint16`` (rounded), everything else ``float64`` in ``[0, 1]``.
    """
    array = np.asarray(image)
    if array.ndim == 3:
        pixels, shape = img_as_float64(array[..., :3]), (side, side, 3)
    else:
        pixels, shape = as_gray_float(array), (side, side)
    anti_alias = side < max(pixels.shape[:2])
    out = resize(pixels, shape, order=1, anti_aliasing=anti_alias, mode="reflect")
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


@contextmanager
def _pinned_to_one_core(enabled: bool):
    """Pin the calling thread to one of its allowed cores for the duration; yields the core or None.

    A thread the scheduler moves between cores starts its next call on cold caches, which
    inflates the cheapest features' CPU time on a busy machine far more than pinning does
    (``docs/decisions/timing-pass.md``).
    """
    if not enabled or not hasattr(os, "sched_setaffinity"):
        yield None
        return
    try:
        allowed = os.sched_getaffinity(0)  # 0: the calling thread, on Linux
        core = max(allowed)
        os.sched_setaffinity(0, {core})
    except OSError:
        yield None
        return
    try:
        yield core
    finally:
        os.sched_setaffinity(0, allowed)


def _single_threaded_libraries():
    """Limit BLAS and OpenMP pools to one thread, when threadpoolctl is installed.

    The thread's CPU clock does not see work done by a library's helper threads; with one
    thread it sees all of a feature's work, and no pool competes for the other cores.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - installed with scikit-learn
        return ExitStack()
    return threadpool_limits(limits=1)


def measure_costs(
    features,
    images: Sequence,
    sides: Sequence[int],
    *,
    repeats: int = 3,
    warmup: int = 1,
    clock: Callable[[], float] = time.thread_time,
    wall_clock: Callable[[], float] | None = time.perf_counter,
    process_clock: Callable[[], float] | None = time.process_time,
    pin: bool = True,
    prime: bool = True,
    random_state=0,
    warn: bool = True,
    progress: bool = False,
) -> CostMeasurements:
    """Time each feature on each image resized to each square side.

    Every image is resized to every side ``s`` (see `resize_square`; not timed, and done once:
    all resized images are held at once), then the features are called in rounds: each round
    visits every (image, side) pair in a shuffled order and, on each, calls every feature in a
    shuffled order -- as serving computes the features of one item one after another. So a
    burst of contention or a slow drift is spread over every feature and size instead of
    landing on one. The first ``warmup`` rounds are untimed (lazy imports, first-call set-up);
    each of the next ``repeats`` rounds gives one sample per feature, image and side, at item
    size ``s * s``. The garbage collector is paused throughout.

    With ``prime`` (the default) each timed call comes right after an untimed call of the same
    feature on the same image, whose duration is kept as ``cold_seconds``. The timed call then
    measures the feature's own work, with its code and data in the caches; the first call also
    pays for refilling them after whatever ran before, and that part is a property of the
    machine's state, not of the feature (the evidence: ``docs/decisions/timing-pass.md``).

    The default clock is the calling thread's CPU time: the work a call does, which other
    processes competing for the cores do not inflate (wall time, recorded beside it, grows by
    several times on a busy machine). While timing, the thread is pinned to one core (``pin``)
    and BLAS/OpenMP pools are limited to one thread, so that the clock sees all of a feature's
    work. Call it when the process's own workers are idle: `check_timing` reports the CPU the
    process's other threads used meanwhile, and how contended and stable the run was.

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
        Timed rounds: calls per feature, image and side, ``>= 1``.
    warmup : int
        Untimed rounds before them, ``>= 0``.
    clock : callable
        ``clock() -> float`` seconds; must not go backwards. The samples' ``seconds``.
    wall_clock : callable or None
        Read inside the same calls for ``wall_seconds``; None records none.
    process_clock : callable or None
        CPU seconds of the whole process, compared with ``clock`` over the timed rounds to find
        the CPU other threads used; None skips that.
    pin : bool
        Pin the calling thread to one core while timing, where the OS allows it.
    prime : bool
        Call each feature once, untimed but clocked, right before each timed call.
    random_state : int, numpy Generator or None
        Seeds the shuffled order.
    warn : bool
        Issue a `CostMeasurementWarning` with the numbers when `check_timing` finds problems.
    progress : bool
        Show a tqdm progress bar (one step per image and side in each timed round).

    Returns
    -------
    CostMeasurements
        For every feature, ``len(images) * len(set(sides)) * repeats`` samples, ordered by
        side, then image, then round.

    Raises
    ------
    ValueError
        On no features, no images, no sides, a side below ``MIN_SIDE``, an
        invalid image, or a clock that goes backwards.
    FeatureError
        Not raised: a feature's exception propagates unchanged, since timing
        runs the bare functions.
    """
    chosen, unique_sides, images, resized = _checked_inputs(features, images, sides)
    repeats = _check_count(repeats, "repeats", 1)
    warmup = _check_count(warmup, "warmup", 0)

    shape = (len(unique_sides), len(images), repeats)
    seconds = {f.name: np.empty(shape) for f in chosen}
    walls = {f.name: np.full(shape, np.nan) for f in chosen}
    colds = {f.name: np.full(shape, np.nan) for f in chosen}
    pairs = [(i, s) for i in range(len(images)) for s in range(len(unique_sides))]
    rng = np.random.default_rng(random_state)
    nobody = lambda: 0.0  # noqa: E731 - stands in for an absent clock
    wall_now = wall_clock or nobody
    process_now = process_clock or nobody

    previous = -1
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(pairs) * repeats, desc="timing features", unit="image")
    try:
        with _gc_paused(), _single_threaded_libraries(), _pinned_to_one_core(pin) as core:
            for round_ in range(warmup + repeats):
                timed = round_ >= warmup
                if round_ == warmup:
                    started = (wall_now(), clock(), process_now())
                for p in rng.permutation(len(pairs)):
                    i, s = pairs[p]
                    image = resized[i][s]
                    order = rng.permutation(len(chosen))
                    if order[0] == previous:
                        # A feature called twice in a row would find its caches warm by chance.
                        order = np.roll(order, -1)
                    previous = order[-1]
                    for f in order:
                        feature = chosen[f]
                        if not timed:
                            feature.function(image)
                            continue
                        if prime:
                            c0 = clock()
                            feature.function(image)
                            colds[feature.name][s, i, round_ - warmup] = clock() - c0
                        c0 = clock()
                        w0 = wall_now()
                        feature.function(image)
                        w1 = wall_now()
                        c1 = clock()
                        if c1 < c0:
                            raise ValueError("clock went backwards; use a monotonic clock")
                        seconds[feature.name][s, i, round_ - warmup] = c1 - c0
                        walls[feature.name][s, i, round_ - warmup] = w1 - w0
                    if timed and bar is not None:
                        bar.update(1)
            ended = (wall_now(), clock(), process_now())
    finally:
        if bar is not None:
            bar.close()

    samples = _samples(chosen, unique_sides, len(images), repeats, seconds, walls if wall_clock is not None else None,
                       colds if prime else None)
    elapsed = ended[0] - started[0] if wall_clock is not None else math.nan
    other = 0.0
    if process_clock is not None:
        # The process's CPU time counts this thread too; what is left ran on other threads.
        other = max(0.0, (ended[2] - started[2]) - (ended[1] - started[1]))
    measurements = CostMeasurements(samples, unique_sides, repeats, warmup, elapsed, other, core)
    if warn:
        measurements.check().warn(stacklevel=2)
    return measurements


def _checked_inputs(features, images, sides):
    """``(features, distinct sides, images, each image resized to each side)``, or one
    ``ValueError`` naming what is missing or invalid."""
    chosen: list[Feature] = resolve_features(features)
    if not chosen:
        raise ValueError("no features to measure")
    unique_sides = tuple(dict.fromkeys(_check_count(s, "side", MIN_SIDE) for s in sides))
    if not unique_sides:
        raise ValueError("no sides to measure")
    images = list(images)
    if not images:
        raise ValueError("no images to measure")
    for index, image in enumerate(images):
        validate_image(image, index=index)
    resized = [[validate_image(resize_square(image, side), index=index) for side in unique_sides]
               for index, image in enumerate(images)]
    return chosen, unique_sides, images, resized


def _samples(chosen, unique_sides, n_images: int, repeats: int, seconds, walls, colds) -> dict:
    """Each feature's :class:`CostSamples`, ordered by side, then image, then round."""
    sizes = np.repeat([side * side for side in unique_sides], n_images * repeats).astype(np.int64)
    items = np.tile(np.repeat(np.arange(n_images, dtype=np.int64), repeats), len(unique_sides))
    return {
        f.name: CostSamples(sizes.copy(), seconds[f.name].ravel(), items.copy(),
                            walls[f.name].ravel() if walls is not None else None,
                            colds[f.name].ravel() if colds is not None else None)
        for f in chosen
    }
