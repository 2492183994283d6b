"""Measured costs: time each feature on real images across sizes and fit its cost polynomial.

Timing is :func:`featurizers.measure_costs` (images resized to square sides, the garbage
collector paused), arranged as serving computes features (see :func:`measure_feature_costs`); fitting is :func:`index.fitting.fit_cost_curve` (the
least-area polynomial with non-negative coefficients lying at or above the chosen quantile of
the times at every measured size). Costs are seconds of wall time on the machine that measured
them, as functions of the item size ``n`` (pixel count).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from polydom.featurizers import MIN_SIDE, Feature, FeatureError, item_size, measure_costs, resize_square
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
        Seconds as a polynomial in the item size ``n``; non-negative coefficients.
    sizes, seconds : ndarray
        The timed calls: item size and wall time of each.
    quantile : float or "max"
        The quantile of the times at each size that ``curve`` lies at or above.
    """

    name: str
    curve: CostCurve
    sizes: np.ndarray
    seconds: np.ndarray
    quantile: float | str

    def targets(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct measured sizes and the quantile of the times at each."""
        return quantile_per_size(self.sizes, self.seconds, self.quantile)

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
        return {
            "coefficients": list(self.curve.coefficients),
            "sizes": self.sizes.tolist(),
            "seconds": self.seconds.tolist(),
            "quantile": self.quantile,
        }

    @classmethod
    def from_json(cls, name: str, data: dict) -> "CostFit":
        return cls(name, CostCurve(data["coefficients"]), np.asarray(data["sizes"], dtype=np.int64),
                   np.asarray(data["seconds"], dtype=np.float64), data["quantile"])


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


class CostMeasurementWarning(UserWarning):
    """The machine looked contended or unstable while the features were timed."""


#: CPU time under this share of wall time means the process waited for the cores.
MIN_CPU_WALL_RATIO = 0.7
#: A relative interquartile range above this at one size means unstable timings.
MAX_SPREAD = 0.5


def warn_if_contended(measurements) -> None:
    """Warn, with the numbers, when timings look contended (CPU well below wall time) or unstable.

    The fitted curves use CPU time, which contention inflates far less than wall time; the
    warning says that serving on this machine may take longer than they predict.
    """
    import warnings

    notes = []
    for name in measurements.names:
        samples = measurements[name]
        ratio, spread = samples.cpu_wall_ratio(), samples.spread()
        if ratio == ratio and ratio < MIN_CPU_WALL_RATIO:
            notes.append(f"{name}: CPU/wall {ratio:.2f}")
        if spread > MAX_SPREAD:
            notes.append(f"{name}: timings spread {spread:.0%} (interquartile range / median)")
    if notes:
        warnings.warn(
            "feature timings look contended or unstable ("
            + "; ".join(notes)
            + "); costs are fitted on CPU time, but wall time on this machine may exceed them -- "
            "time on a quiet machine, or rely on anytime serving to stop in time",
            CostMeasurementWarning, stacklevel=3,
        )


def measure_feature_costs(
    features: Sequence[Feature],
    images: Sequence,
    sides: Sequence[int],
    *,
    repeats: int = 5,
    quantile: float | str = 0.5,
    degree: int = 2,
    progress: bool | None = None,
) -> dict[str, CostFit]:
    """Time every feature on ``images`` resized to each side, and fit one cost curve per feature.

    Features are timed the way a request computes them: on each image, every feature once in
    turn, through :meth:`~featurizers.Feature.evaluate` (output checks included), passing over
    the images ``repeats`` times. Timing one feature in a tight loop on one image would keep its
    data and code hot in the CPU caches and under-estimate the cheap features by up to 2x. One
    untimed call of every feature at every side comes first (lazy imports, first-call set-up).

    Parameters
    ----------
    features : sequence of Feature
    images : sequence of array_like
        Real images; each is resized to every side (resizing is not timed).
    sides : sequence of int
        Square sides, at least ``degree + 1`` distinct ones (5 or more is advised).
    repeats : int
        Passes over the images: ``len(images) * repeats`` samples per feature and side.
    quantile : float in [0, 1] or "max"
        The quantile of the times at each size the curve follows (median by default: serving is
        anytime, so the clock, not the curve, guards the budget); from 0.9 up, and with ``"max"``
        (the paper's worst case), the curve covers it at every measured size instead.
    degree : int
        Degree of the cost polynomials.
    progress : bool, optional
        A tqdm bar; ``None`` shows it on a terminal only.

    Returns
    -------
    dict of str to CostFit
        In feature order.

    Raises
    ------
    FeatureError
        A feature failed while being timed, naming it.
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
    m = measure_costs(served, images * repeats, sides, repeats=1, warmup=0, progress=show)
    warn_if_contended(m)
    fits = {}
    for feature in features:
        samples = m[feature.name]
        coefficients = fit_cost_curve(samples.sizes, samples.seconds, degree=degree, quantile=quantile)
        fits[feature.name] = CostFit(feature.name, CostCurve(coefficients), samples.sizes, samples.seconds, quantile)
    return fits
