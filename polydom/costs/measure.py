"""Measured costs: time each feature on real images across sizes and fit its cost polynomial.

Timing is :func:`featurizers.measure_costs` (images resized to square sides, features called in
shuffled rounds as serving computes them, each timed call primed by an untimed one, on the timing
thread's CPU clock with wall time beside it; see :func:`measure_feature_costs`), with a warning
giving the numbers when the machine looked contended or unstable. Fitting is :func:`polydom.index.costs.fitting.fit_cost_curve`: a polynomial following
the chosen quantile (the median by default) of the times at each measured size, non-negative
and non-decreasing on the measured sizes and the domain. Costs are CPU seconds on the machine
that measured them, as functions of the item size ``n`` (pixel count).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from polydom.featurizers import MIN_SIDE, Feature, FeatureError, Step, item_size, measure_costs, resize_square
from polydom.featurizers.timing import CostMeasurementWarning, CostSamples, check_timing
from polydom.index.costs.curve import CostCurve, format_curve
from polydom.index.costs.fitting import evaluate_cost_curve, fit_cost_curve, quantile_per_size

__all__ = [
    "CostFit", "CostMeasurementWarning", "default_timing_sides", "choose_timing_images", "measure_feature_costs",
    "format_expression", "warn_if_contended", "bin_sizes", "missing_sides", "costs_from_extraction", "TimingPlan",
    "SIZE_BINS", "MIN_TIMED_SIZES", "MAX_SIDE_GAP", "TIMING_SHARE",
]

#: Most size bins the samples are grouped into; each bin's quantile is one target of a curve.
SIZE_BINS = 12

#: Distinct sizes a curve should rest on: fewer among the training items are timed at resized copies.
MIN_TIMED_SIZES = 5

#: Largest ratio of sides between neighbouring sample sizes before a side in between is timed.
MAX_SIDE_GAP = 2.0

#: Default cap on the timing pass: this share of the training extraction's compute time.
TIMING_SHARE = 0.25


def format_expression(curve: CostCurve, variable: str = "n") -> str:
    """A short readable form of a cost curve, e.g. ``"2.1e-05 + 3.4e-09*n"`` (seconds)."""
    return format_curve(curve, variable)


@dataclass(frozen=True)
class CostFit:
    """One feature's timings and the cost curve fitted to them.

    Attributes
    ----------
    name : str
    curve : CostCurve
        Seconds as a polynomial in the item size ``n``, non-negative and non-decreasing on the
        measured sizes and ``domain`` (see :func:`polydom.index.costs.fitting.fit_cost_curve`).
    sizes, seconds : ndarray
        The timed calls: item size and measured time (the timing thread's CPU time) of each.
    quantile : float or "max"
        The quantile of the times at each size that ``curve`` follows (or, for ``"max"`` and
        quantiles from 0.9, lies at or above): across images, of each image's fastest repeat
        when ``items`` are known; ``"max"`` is the slowest call.
    items : ndarray, optional
        The image each call was timed on; repeats of one call count once, by their fastest.
    wall_seconds : ndarray, optional
        Wall time of the same calls.
    cold_seconds : ndarray, optional
        CPU time of the untimed call just before each timed one (see
        :func:`featurizers.measure_costs`): what a call costs with caches as another feature left
        them, on this machine in its state at the time.
    domain : (float, float)
        The sizes, besides the measured ones, on which the curve was kept non-decreasing.
    timing_curve : CostCurve, optional
        With a serving calibration (:mod:`polydom.costs.calibration`), the timing pass's curve before
        it; ``curve`` is then this plus ``overhead``. None: ``curve`` is the timing pass's.
    overhead : (float, float), optional
        The calibration's ``a + b*n`` (seconds), ``a, b >= 0``.
    guard_ratio : float, default 1.0
        Measured / predicted time that anytime serving reserves before starting the feature
        (a ratio >= 1: the calibration's guard quantile of those ratios, ``Serving(guard=q)``'s
        ``q`` or 0.9).
    guard_ratio_by_size : tuple of (size, ratio) pairs, optional
        The same ratio at each size the calibration saw enough calls of, sizes ascending
        (:func:`polydom.costs.calibration.calibrate_fit`); None: ``guard_ratio`` at every size.
    law : tuple of float, optional
        The measured law of a serving call's wall time over ``curve``: its quantiles at
        :data:`~polydom.costs.calibration.LAW_LEVELS` (preemption included). The walk
        reads a start's chance to finish from it (:mod:`polydom.index.serving.anytime`).
    law_by_size : tuple of (size, law) pairs, optional
        The same law at each size the calibration saw enough calls of, sizes ascending.
    """

    name: str
    curve: CostCurve
    sizes: np.ndarray
    seconds: np.ndarray
    quantile: float | str
    items: np.ndarray | None = None
    wall_seconds: np.ndarray | None = None
    domain: tuple[float, float] = (0.0, math.inf)
    cold_seconds: np.ndarray | None = None
    timing_curve: CostCurve | None = None
    overhead: tuple[float, float] | None = None
    guard_ratio: float = 1.0
    guard_ratio_by_size: tuple[tuple[float, float], ...] | None = None
    law: tuple[float, ...] | None = None
    law_by_size: tuple[tuple[float, tuple[float, ...]], ...] | None = None

    @property
    def measured_range(self) -> tuple[float, float]:
        """The smallest and largest timed item size: outside them the curve extrapolates."""
        return float(np.min(self.sizes)), float(np.max(self.sizes))

    def targets(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct measured sizes (binned, :func:`bin_sizes`, where the calls have many) and
        the quantile of the times at each."""
        return quantile_per_size(bin_sizes(self.sizes), self.seconds, self.quantile, items=self.items)

    def samples(self) -> CostSamples:
        """The timed calls as :class:`featurizers.CostSamples` (``cpu_wall_ratio``, ``repeat_spread``,
        ``cold_ratio``)."""
        items = self.items if self.items is not None else np.arange(len(self.sizes), dtype=np.int64)
        return CostSamples(self.sizes, self.seconds, items, self.wall_seconds, self.cold_seconds)

    def curve_values(self, sizes) -> np.ndarray:
        """The fitted curve at ``sizes`` (seconds)."""
        return evaluate_cost_curve(self.curve.coefficients, sizes)

    def expression(self) -> str:
        """The curve as text (:func:`format_expression`)."""
        return format_expression(self.curve)

    def sympy(self):
        """The curve as a sympy expression (:meth:`CostCurve.expression`)."""
        return self.curve.expression()

    def to_json(self) -> dict:
        data = {
            "coefficients": list(self.curve.coefficients),
            "sizes": self.sizes.tolist(),
            "seconds": self.seconds.tolist(),
            "quantile": self.quantile,
            "measured_range": list(self.measured_range),
            # JSON has no infinity: an unbounded domain is stored with None as its top.
            "domain": [self.domain[0], self.domain[1] if math.isfinite(self.domain[1]) else None],
        }
        if self.items is not None:
            data["items"] = self.items.tolist()
        for key in ("wall_seconds", "cold_seconds"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key).tolist()
        if self.timing_curve is not None:
            data.update(timing_coefficients=list(self.timing_curve.coefficients), overhead=list(self.overhead))
        # Stored under the keys fits were always saved with.
        if self.timing_curve is not None or self.guard_ratio != 1.0:
            data["guard"] = self.guard_ratio
        if self.guard_ratio_by_size is not None:
            data["guard_by_size"] = [list(pair) for pair in self.guard_ratio_by_size]
        if self.law is not None:
            data["law"] = list(self.law)
        if self.law_by_size is not None:
            data["law_by_size"] = [[n, list(law)] for n, law in self.law_by_size]
        return data

    @classmethod
    def from_json(cls, name: str, data: dict) -> "CostFit":
        """The inverse of :meth:`to_json`; fits saved before items, wall times and the domain
        were recorded load with those missing (and the domain ``[0, inf)``)."""
        def array(key, dtype):
            return None if data.get(key) is None else np.asarray(data[key], dtype=dtype)

        lo, hi = data.get("domain", (0.0, None))
        timing = data.get("timing_coefficients")
        overhead = data.get("overhead")
        return cls(name, CostCurve(data["coefficients"]), array("sizes", np.int64), array("seconds", np.float64),
                   data["quantile"], array("items", np.int64), array("wall_seconds", np.float64),
                   (float(lo), math.inf if hi is None else float(hi)), array("cold_seconds", np.float64),
                   None if timing is None else CostCurve(timing),
                   None if overhead is None else tuple(map(float, overhead)), float(data.get("guard", 1.0)),
                   None if data.get("guard_by_size") is None
                   else tuple((float(n), float(g)) for n, g in data["guard_by_size"]),
                   None if data.get("law") is None else tuple(map(float, data["law"])),
                   None if data.get("law_by_size") is None
                   else tuple((float(n), tuple(map(float, law))) for n, law in data["law_by_size"]))


def default_timing_sides(sizes: Sequence[int], count: int = 6) -> tuple[int, ...]:
    """``count`` square sides spread geometrically from the smallest item (or half the largest,
    if that is smaller) to a quarter beyond the largest.

    Parameters
    ----------
    sizes : sequence of int
        Item sizes (pixel counts) the index will serve.
    count : int
        Number of sides (fewer if rounding merges some).

    Examples
    --------
    >>> default_timing_sides([256, 4096])
    (16, 22, 30, 42, 58, 80)
    >>> default_timing_sides([4096])
    (32, 38, 46, 55, 67, 80)
    """
    largest = math.sqrt(max(sizes))
    lo = max(MIN_SIDE, int(math.floor(min(math.sqrt(min(sizes)), largest / 2))))
    hi = max(lo + count, int(math.ceil(largest * 1.25)))
    return tuple(sorted({int(round(s)) for s in np.geomspace(lo, hi, count)}))


def choose_timing_images(images: Sequence, k: int, random_state=None) -> list[int]:
    """Indices of ``k`` of the largest images (resizing down keeps real detail), chosen at random
    among equally large ones."""
    sizes = np.array([item_size(im) for im in images])
    rng = np.random.default_rng(random_state)
    order = np.lexsort((rng.random(len(sizes)), -sizes))
    return sorted(order[: min(k, len(sizes))].tolist())


class _Served:
    """A feature's ``evaluate`` as a bare function: what serving calls, output checks included.

    As serving does, a feature gets the steps it requires from the last call of each step item on
    the same image (``prepared``, shared by the wrappers of one timing run), so that its time is
    its own work; a step computes every time it is called, so that its time is the step's.
    """

    def __init__(self, feature, prepared: dict):
        self.feature, self.prepared = feature, prepared

    def __call__(self, image):
        held = self.prepared.get(id(image))
        if held is None or held[0] is not image:  # another image now has that id
            held = self.prepared[id(image)] = (image, {})
        if isinstance(self.feature, Step):
            held[1][self.feature.name] = self.feature.prepare(image)
            return np.zeros(0)
        # A step that is no item of this timing the feature computes itself, in its own time.
        return self.feature.evaluate(image, prepared=dict(held[1]))


def warn_if_contended(measurements, stacklevel: int = 1) -> None:
    """Warn, with the numbers, when :func:`featurizers.timing.check_timing` finds the timings
    contended (CPU well below wall time, other threads of this process busy) or unstable.

    The fitted curves use CPU time, which contention inflates far less than wall time; the
    warning says how far to trust them, and that serving on this machine may take longer.
    ``stacklevel`` 1 names the line calling this function, 2 the line calling that one.
    """
    check_timing(measurements).warn(stacklevel=stacklevel + 1)


def measure_feature_costs(
    features: Sequence[Feature],
    images: Sequence,
    sides: Sequence[int],
    *,
    repeats: int = 5,
    quantile: float | str = 0.5,
    degree: int = 2,
    mode: str | None = None,
    domain: tuple[float, float] = (0.0, math.inf),
    prime: bool = True,
    progress: bool | None = None,
    steps: bool | None = None,
) -> dict[str, CostFit]:
    """Time every feature on ``images`` resized to each side, and fit one cost curve per feature.

    Features are timed the way a request computes them: on each image, every feature once in
    turn, through :meth:`~featurizers.Feature.evaluate` (output checks included), in ``repeats``
    rounds that each visit every image and side in a shuffled order (see
    :func:`featurizers.measure_costs`: the timing thread's CPU clock, wall time beside it, the
    thread pinned to one core). One untimed call of every feature at every side comes first
    (lazy imports, first-call set-up). With ``prime``, each timed call follows an untimed call
    of the same feature on the same image: the fit then follows the feature's own work, which
    reproduces on a busy machine, rather than the cost of refilling the caches after the
    previous feature, which does not (it is kept as ``cold_seconds``: for the cheapest features
    it ranged from 1.1 to 2.7 times the primed cost between runs on one busy machine). When the
    timings look contended or unstable, a :class:`CostMeasurementWarning` gives the numbers.

    Call it while the process's own workers are idle (after parallel extraction has returned):
    their CPU is reported as contention.

    Parameters
    ----------
    features : sequence of Feature (and Step)
        A step item is timed on its own, and the features after it on its output.
    steps : bool, optional
        Add the steps the features require, as for
        :func:`~polydom.classifier.extraction.extract_features`: None (default) those that do
        work on ``images``, True all, False none.
    images : sequence of array_like
        Real images; each is resized to every side (resizing is not timed).
    sides : sequence of int
        Square sides, at least ``degree + 1`` distinct ones (5 or more is advised).
    repeats : int
        Timed rounds: ``len(images) * repeats`` samples per feature and side. Each image's
        fastest repeat at a size stands for it (interference only ever adds time).
    quantile : float in [0, 1] or "max"
        The quantile, across images, of the times at each size the curve follows (median by
        default: serving is anytime, so the clock, not the curve, guards the budget); from 0.9
        up, and with ``"max"`` (the paper's worst case, every sample), the curve covers it at
        every measured size instead.
    degree : int
        Degree of the cost polynomials.
    mode : {"track", "cover"}, optional
        Overrides the choice ``quantile`` makes (see :func:`polydom.index.costs.fitting.fit_cost_curve`).
    domain : (lo, hi)
        Sizes the index will serve: every curve is non-negative and non-decreasing there and
        over the measured sizes. Keep ``[0, inf)`` (the default, and ``polydom.build``'s) unless
        the index is built on a bounded domain too: only then can a quadratic bend down.
    prime : bool
        Time primed calls (above); ``False`` times the first call, as the features meet the
        caches in turn, and takes a warm-up round instead.
    progress : bool, optional
        A tqdm bar; ``None`` shows it on a terminal only.

    Returns
    -------
    dict of str to CostFit
        The items timed, in order (the steps before the features); each records its
        ``measured_range``.

    Raises
    ------
    FeatureError
        A feature failed while being timed, naming it.

    Warns
    -----
    CostMeasurementWarning
        The machine looked contended or unstable while timing.
    """
    images = list(images)
    from polydom.classifier.extraction import items_to_time

    features = items_to_time(features, images, steps)
    prepared: dict = {}
    served = [Feature(f.name, _Served(f, prepared), f.description, f.dimension or None) for f in features]
    for side in dict.fromkeys(int(s) for s in sides):
        warm = resize_square(images[0], side)
        for feature in served:
            try:
                feature(warm)
            except FeatureError as exc:
                raise FeatureError(f"{exc} (timing the features on a {side} x {side} image)",
                                   feature=exc.feature) from exc
    show = sys.stderr.isatty() if progress is None else bool(progress)
    m = measure_costs(served, images, sides, repeats=repeats, warmup=0 if prime else 1, prime=prime, warn=False,
                      progress=show)
    prepared.clear()
    warn_if_contended(m, stacklevel=2)
    fits = {}
    for feature in features:
        samples = m[feature.name]
        coefficients = fit_cost_curve(samples.sizes, samples.seconds, degree=degree, quantile=quantile,
                                      mode=mode, domain=domain, items=samples.items)
        fits[feature.name] = CostFit(feature.name, CostCurve(coefficients), samples.sizes, samples.seconds,
                                     quantile, samples.items, samples.wall_seconds, tuple(map(float, domain)),
                                     samples.cold_seconds)
    return fits


def bin_sizes(sizes, bins: int = SIZE_BINS) -> np.ndarray:
    """Each size replaced by the median size of its bin, so that a quantile per size has calls to
    take it from.

    Sizes with at most ``bins`` distinct values are returned as they are (a timing pass's
    squares). Otherwise ``[min, max]`` is cut into ``bins`` bins of equal width in ``log n``
    and every size becomes the median of the sizes in its bin: the fit then follows the
    quantile of each bin's calls at a size that bin really has.

    Examples
    --------
    >>> bin_sizes([100, 100, 400]).tolist()
    [100.0, 100.0, 400.0]
    >>> bin_sizes([100, 110, 400, 420], bins=2).tolist()
    [105.0, 105.0, 410.0, 410.0]
    """
    sizes = np.asarray(sizes, dtype=np.float64)
    if len(np.unique(sizes)) <= bins:
        return sizes.copy()
    logs = np.log(np.maximum(sizes, 1.0))
    edges = np.linspace(logs.min(), logs.max(), bins + 1)[1:-1]
    which = np.searchsorted(edges, logs, side="right")
    out = np.empty_like(sizes)
    for b in np.unique(which):
        at = which == b
        out[at] = np.median(sizes[at])
    return out


def missing_sides(sizes, *, degree: int = 2, count: int = MIN_TIMED_SIZES, max_gap: float = MAX_SIDE_GAP) -> tuple[int, ...]:
    """Square sides, between the smallest and the largest item, that the items' sizes lack.

    A curve needs ``degree + 1`` distinct sizes and is better placed on ``count``; and between two
    neighbouring sizes more than ``max_gap`` apart in side it only guesses. The sides returned
    are spread geometrically over the items' range, away from sizes the items have, and never
    beyond the largest item (a resized copy larger than every image tells nothing the data has).

    Examples
    --------
    >>> missing_sides([28 ** 2, 56 ** 2, 112 ** 2])
    (37, 85)
    >>> missing_sides([100 ** 2, 1000 ** 2], count=2)
    (147, 215, 359, 599)
    >>> missing_sides([n * n for n in range(20, 40)])
    ()
    """
    sides = np.unique(np.sqrt(bin_sizes(sizes)))
    lo, hi = float(sides[0]), float(sides[-1])
    if hi < lo * 1.05:
        return ()
    present = [float(x) for x in sides]
    wanted: list[int] = []

    def far(side: float) -> bool:
        return all(abs(math.log(side / p)) > math.log(1.15) for p in present)

    for side in np.geomspace(lo, hi, max(count, degree + 1) + 1)[1:-1]:
        if len(present) >= max(count, degree + 1):
            break
        if far(side):
            present.append(float(side))
            wanted.append(int(round(side)))
    present.sort()
    for a, b in zip(present[:-1], present[1:]):
        if b / a > max_gap:
            steps = math.ceil(math.log(b / a) / math.log(max_gap))
            for side in np.geomspace(a, b, steps + 1)[1:-1]:
                if far(side):
                    wanted.append(int(round(side)))
    return tuple(sorted(set(wanted)))


@dataclass(frozen=True)
class TimingPlan:
    """What the timing pass times beyond the extraction's own calls, and why.

    Attributes
    ----------
    sides : tuple of int
        Square sides timed on resized copies of training images.
    calls_per_side : int
        Images (resized) computed at each of them, each feature once.
    estimate : float
        Predicted seconds of those calls.
    budget : float
        The cap they were held to (seconds).
    """

    sides: tuple[int, ...]
    calls_per_side: int
    estimate: float
    budget: float

    def describe(self) -> str:
        """One line for the progress log."""
        if not self.sides:
            return "no sizes to add to the training images' own"
        return (f"{self.calls_per_side} resized images at sides {', '.join(map(str, self.sides))}, which the "
                f"training images lack (about {self.estimate:.1f} s; cap {self.budget:.1f} s)")


def _seconds_per_image(sizes: np.ndarray, per_item: np.ndarray):
    """Predicted seconds of every feature of one image at a size: a power law fitted to the
    extraction's per-image totals (log-log least squares; a constant for one size)."""
    ok = np.isfinite(per_item) & (per_item > 0)
    logs, logt = np.log(np.maximum(sizes[ok], 1.0)), np.log(per_item[ok])
    if len(np.unique(logs)) < 2:
        level = float(np.exp(np.median(logt))) if len(logt) else 0.0
        return lambda n: level
    slope, intercept = np.polyfit(logs, logt, 1)
    return lambda n: float(np.exp(intercept + slope * math.log(max(n, 1.0))))


def plan_timing(sizes, per_item_seconds, *, sides=None, degree: int = 2, images: int = 8, repeats: int = 1,
                budget: float = math.inf) -> TimingPlan:
    """Which sides to time and how many images at each, within ``budget`` seconds.

    ``sides`` given: those (the caller asked for them). Otherwise :func:`missing_sides`. Each
    side gets ``images * repeats`` calls, fewer when the estimate (from the extraction's
    per-image times) exceeds ``budget``; sides the curve cannot do without (too few distinct
    sizes for its degree) get at least one call whatever the budget.
    """
    sizes = np.asarray(sizes, dtype=np.float64)
    chosen = tuple(int(s) for s in sides) if sides is not None else missing_sides(sizes, degree=degree)
    if not chosen:
        return TimingPlan((), 0, 0.0, float(budget))
    per_image = _seconds_per_image(sizes, np.asarray(per_item_seconds, dtype=np.float64))
    one_pass = sum(per_image(side * side) for side in chosen)
    calls = max(1, images * repeats)
    if sides is None and one_pass > 0 and calls * one_pass > budget:
        calls = int(budget // one_pass)
        if calls < 1:
            # Below one call per side: keep only what the degree needs, one image each.
            needed = max(0, degree + 1 - len(np.unique(bin_sizes(sizes))))
            chosen = tuple(sorted(chosen, key=lambda s: -min(abs(math.log(s * s / n)) for n in np.unique(sizes)))[:needed])
            calls = 1 if chosen else 0
            one_pass = sum(per_image(side * side) for side in chosen)
    return TimingPlan(tuple(sorted(chosen)), calls, calls * one_pass, float(budget))


def costs_from_extraction(
    features: Sequence[Feature],
    images: Sequence,
    matrix,
    sizes,
    *,
    plan: TimingPlan,
    quantile: float | str = 0.5,
    degree: int = 2,
    random_state=None,
    progress=None,
) -> dict[str, CostFit]:
    """Cost curves from the calls the training extraction timed, plus the sides ``plan`` adds.

    The extraction computed every feature of every training image once, in turn, as a request
    does, on the computing thread's CPU clock (:class:`polydom.classifier.extraction.FeatureMatrix`): one
    cost sample per feature and image, at the image's own size -- the feature's own work,
    apart from another process's preemptions, which the CPU clock does not count. Where those
    sizes leave gaps (:func:`missing_sides`), resized copies of the largest training images
    (grey squares, :func:`featurizers.resize_square`) are extracted the same way, one after
    another, ``plan.calls_per_side`` at each side, and their calls join the samples. Sizes are
    binned (:func:`bin_sizes`) and each curve follows the ``quantile`` of its feature's calls
    per bin (:func:`polydom.index.costs.fitting.fit_cost_curve`; at the median, through every call unbinned).

    Parameters
    ----------
    features : sequence of Feature (and Step)
        The items of ``matrix``, in its order (a shared step first, ``featurizers.with_steps``).
    images : sequence of array
        The training images (validated).
    matrix : polydom.classifier.extraction.FeatureMatrix
        Their extraction, computed one image after another (a parallel extraction's calls share
        the machine's caches; pass a sequential sample instead).
    sizes : array of shape (len(matrix.X),)
        The item size of each row of ``matrix``.
    plan : TimingPlan
        From :func:`plan_timing`.
    quantile, degree
        As for :func:`measure_feature_costs`.
    random_state : int, optional
        Which images are resized, and the order of the calls.
    progress : callable, optional
        ``progress(done, total)`` as the resized copies are timed (plain log lines).

    Returns
    -------
    dict of str to CostFit
        In ``features`` order; ``sizes`` and ``seconds`` hold every call (extraction first).
    """
    from polydom.classifier.extraction import extract_features

    sizes = np.asarray(sizes, dtype=np.float64)
    cpu = matrix.cpu_seconds if matrix.cpu_seconds is not None else matrix.seconds
    wall = matrix.seconds
    all_sizes, all_cpu, all_wall = [sizes], [cpu], [wall]
    if plan.sides and plan.calls_per_side:
        rng = np.random.default_rng(random_state)
        pool = choose_timing_images(images, plan.calls_per_side, random_state)
        jobs = [(side, pool[k % len(pool)]) for side in plan.sides for k in range(plan.calls_per_side)]
        jobs = [jobs[i] for i in rng.permutation(len(jobs))]  # no side always after another
        try:
            timed = extract_features([resize_square(images[i], side) for side, i in jobs], features,
                                     progress=progress if progress is not None else False, steps=False)
        except FeatureError as exc:
            if exc.index is None:
                raise
            # The item is a resized copy: name the side and the training image it was made from.
            side, image = jobs[exc.index]
            cause = exc.__cause__
            what = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)
            raise FeatureError(f"feature {exc.feature!r} failed on a {side} x {side} copy of training image {image} "
                               f"(timing the features): {what}", feature=exc.feature) from exc
        all_sizes.append(np.array([side * side for side, _ in jobs], dtype=np.float64))
        all_cpu.append(timed.cpu_seconds if timed.cpu_seconds is not None else timed.seconds)
        all_wall.append(timed.seconds)
    every_size = np.concatenate(all_sizes)
    cpu_all, wall_all = np.concatenate(all_cpu), np.concatenate(all_wall)
    # At the median, a least-absolute-relative-error fit through every call is a median
    # regression already; other quantiles need calls to take them from, so sizes are binned
    # (where costs at one size split into groups, a median per bin follows one group's
    # majority: docs/decisions/timing-pass.md).
    binned = every_size if quantile == 0.5 else bin_sizes(every_size)
    items = np.arange(len(every_size), dtype=np.int64)
    column = {name: j for j, name in enumerate(matrix.names)}
    fits = {}
    for feature in features:  # a step item has a curve of its own
        j = column[feature.name]
        seconds = np.maximum(cpu_all[:, j], 0.0)
        coefficients = fit_cost_curve(binned, seconds, degree=degree, quantile=quantile, items=items)
        fits[feature.name] = CostFit(feature.name, CostCurve(coefficients), every_size.astype(np.int64), seconds,
                                     quantile, items, np.maximum(wall_all[:, j], 0.0))
    return fits
