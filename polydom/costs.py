"""Measured costs: time each feature on real images across sizes and fit its cost polynomial.

Timing is :func:`featurizers.measure_costs` (images resized to square sides, features called in
shuffled rounds as serving computes them, each timed call primed by an untimed one, on the timing
thread's CPU clock with wall time beside it; see :func:`measure_feature_costs`), with a warning
giving the numbers when the machine looked contended or unstable. Fitting is :func:`index.fitting.fit_cost_curve`: a polynomial following
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

from polydom.featurizers import MIN_SIDE, Feature, FeatureError, item_size, measure_costs, resize_square
from polydom.featurizers.timing import CostMeasurementWarning, CostSamples, check_timing
from polydom.index.costcurve import CostCurve, format_curve
from polydom.index.fitting import evaluate_cost_curve, fit_cost_curve, quantile_per_size

__all__ = [
    "CostFit", "CostMeasurementWarning", "default_timing_sides", "choose_timing_images", "measure_feature_costs",
    "format_expression", "warn_if_contended",
]


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
        measured sizes and ``domain`` (see :func:`index.fitting.fit_cost_curve`).
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
        With a serving calibration (:mod:`polydom.calibration`), the timing pass's curve before
        it; ``curve`` is then this plus ``overhead``. None: ``curve`` is the timing pass's.
    overhead : (float, float), optional
        The calibration's ``a + b*n`` (seconds), ``a, b >= 0``.
    guard : float, default 1.0
        Measured / predicted time that anytime serving reserves before starting the feature
        (the calibration's upper quantile; >= 1).
    guard_by_size : tuple of (size, guard) pairs, optional
        The same guard at each size the calibration saw enough calls of, sizes ascending
        (:func:`polydom.calibration.calibrate_fit`); None: ``guard`` at every size.
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
    guard: float = 1.0
    guard_by_size: tuple[tuple[float, float], ...] | None = None

    @property
    def measured_range(self) -> tuple[float, float]:
        """The smallest and largest timed item size: outside them the curve extrapolates."""
        return float(np.min(self.sizes)), float(np.max(self.sizes))

    def targets(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct measured sizes and the quantile of the times at each."""
        return quantile_per_size(self.sizes, self.seconds, self.quantile, items=self.items)

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
            data.update(timing_coefficients=list(self.timing_curve.coefficients), overhead=list(self.overhead),
                        guard=self.guard)
        if self.guard_by_size is not None:
            data["guard_by_size"] = [list(pair) for pair in self.guard_by_size]
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
                   else tuple((float(n), float(g)) for n, g in data["guard_by_size"]))


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
    """A feature's ``evaluate`` as a bare function: what serving calls, output checks included."""

    def __init__(self, feature: Feature):
        self.feature = feature

    def __call__(self, image):
        return self.feature.evaluate(image)


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
    features : sequence of Feature
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
        Overrides the choice ``quantile`` makes (see :func:`index.fitting.fit_cost_curve`).
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
        In feature order; each records its ``measured_range``.

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
    served = [Feature(f.name, _Served(f), f.description, f.dimension) for f in features]
    for side in dict.fromkeys(int(s) for s in sides):
        warm = resize_square(images[0], side)
        for feature in features:
            try:
                feature(warm)
            except FeatureError as exc:
                raise FeatureError(f"{exc} (timing the features on a {side} x {side} image)",
                                   feature=exc.feature) from exc
    show = sys.stderr.isatty() if progress is None else bool(progress)
    m = measure_costs(served, images, sides, repeats=repeats, warmup=0 if prime else 1, prime=prime, warn=False,
                      progress=show)
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
