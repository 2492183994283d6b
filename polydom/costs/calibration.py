"""Cost curves calibrated to what serving measures, and the guard anytime serving keeps.

The timing pass (:func:`polydom.costs.measure.measure_feature_costs`) measures each feature's intrinsic
cost: primed calls on the timing thread's CPU clock, which reproduce from run to run and on a
busy machine. A request pays more: the feature meets an image the caches have not seen, on the
wall clock, so a curve fitted on primed calls alone serves sets that do not fit
(why: ``docs/decisions/calibration.md``).

Fitting extracts every training image once, each feature in turn -- as a request does -- and
records each call's wall and CPU time; when parallel workers did that extraction, a sample of
training images is computed again one after another (:func:`calibrate_fits`), and the guard's
spread still comes from every call. This module turns
those times into:

* an **overhead** polynomial added to the timing pass's curve: ``a + b*n`` with ``a, b >= 0``,
  the median shortfall of the curve at each training size (sizes binned where they are many) fitted by non-negative least squares
  on the relative scale. Adding a non-negative, non-decreasing polynomial keeps the curve
  non-negative and non-decreasing, so the sweep stays exact; the curve's shape over the timed
  sizes still comes from the reproducible timing pass.
* a **guard**: how much longer than its curve a serving call may take, at the ``quantile``
  (0.99 by default), at least 1. It is the product of two measurements. Where serving-like
  calls sit against the curve: the median of their wall time over the curve (at least 1 where
  the overhead could raise the curve to it, below 1 where the timing pass ran high). And the
  spread of the tail: the ``quantile`` over the median of the computing thread's CPU time over
  the curve, from every training call -- the spread of the feature's own work (its data, the
  caches). Wall times carry another process's preemptions -- milliseconds that land on any
  call, however cheap -- and no guard on one feature can keep those out of a budget.
  Anytime serving starts a feature only when the time used plus ``guard`` times its predicted cost fits the
  budget.
  Both are also taken per training size that has :data:`GUARD_CALLS_PER_SIZE` calls or more: a
  feature's tail, and its curve's error, differ from size to size (why: ``docs/decisions/calibration.md``).

Lookups, the skyline and the planners use the calibrated (median) curves; only the decision to
start one more feature uses the guard.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from polydom.costs.measure import bin_sizes
from polydom.index.costs.curve import CostCurve
from polydom.index.costs.fitting import evaluate_cost_curve

# DEFAULT_GUARD_QUANTILE: the share of training calls a guarded start covers, one constant with the walk.
from polydom.index.serving.anytime import DEFAULT_GUARD_QUANTILE

__all__ = ["CALIBRATION_IMAGES", "DEFAULT_GUARD_QUANTILE", "GUARD_CALLS_PER_SIZE", "LAW_LEVELS", "calibrate_fit", "cost_laws",
           "guard_table", "law_table", "calibrate_fits", "carry_calibration", "serving_sample"]

#: Calls a size needs before it gets a guard of its own (a 98th percentile of fewer is noise).
GUARD_CALLS_PER_SIZE = 50

#: Serving-like calls a size needs before their median places its guard (else the median over all).
SAMPLE_CALLS_PER_SIZE = 8

#: Training images computed again one by one after a parallel extraction (:func:`calibrate_fits`).
CALIBRATION_IMAGES = 160

#: The levels at which a cost law is kept: 41 quantiles, 0 to 1 by 2.5%. Between two, the walk
#: interpolates (:mod:`polydom.index.serving.anytime`); the chance of a start is read to within 2.5%.
LAW_LEVELS = np.linspace(0.0, 1.0, 41)


def _overhead(sizes: np.ndarray, shortfall: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``(a, b)`` with ``a, b >= 0`` minimising the relative squared error of ``a + b*n`` to the
    median shortfall at each distinct size (one size: the constant ``a`` alone)."""
    from scipy.optimize import nnls

    distinct = np.unique(sizes)
    target = np.array([np.median(shortfall[sizes == s]) for s in distinct])
    weight = 1.0 / np.array([np.median(scale[sizes == s]) for s in distinct])
    if len(distinct) == 1:
        return np.array([max(float(target[0]), 0.0), 0.0])
    # Sizes rescaled to [0, 1] keep the two columns comparable for the solver.
    top = float(distinct.max())
    design = np.column_stack([np.ones_like(distinct, dtype=float), distinct / top]) * weight[:, None]
    (a, b), _ = nnls(design, target * weight)
    return np.array([a, b / top])


def calibrate_fit(fit, sizes, seconds, *, quantile: float | None = DEFAULT_GUARD_QUANTILE, cpu_seconds=None,
                  spread=None):
    """``fit`` with its curve raised to the median of ``seconds`` and a guard from their tail.

    Parameters
    ----------
    fit : polydom.costs.measure.CostFit
        The timing pass's fit of one feature.
    sizes, seconds : array_like of shape (m,)
        Item size and measured wall time of serving-like calls (the training
        extraction). Calls with a non-finite or non-positive time are ignored.
    quantile : float in (0, 1] or None
        The guard's quantile of measured / calibrated cost; ``None``: guard 1 (start a feature
        whenever its median cost fits).
    cpu_seconds : array_like of shape (m,), optional
        The same calls' CPU time. With it the guard is the ``quantile`` of CPU time over the
        curve divided by its median: the spread of the feature's own work (its data, the
        caches), which another process's preemption -- milliseconds that can land on any
        call, however cheap -- does not inflate. Without it, wall times stand in.
    spread : (sizes, cpu_seconds), optional
        More calls to take the guard's CPU spread from (a 95th percentile needs more calls
        than a median): the whole training extraction when ``sizes, seconds`` are a sample.

    Returns
    -------
    CostFit
        ``curve`` calibrated, ``timing_curve`` the curve before, ``overhead`` its ``(a, b)``,
        ``guard_ratio`` >= 1 over all calls and ``guard_ratio_by_size`` at each size with at least
        :data:`GUARD_CALLS_PER_SIZE` calls. ``fit`` itself when no call is usable.
    """
    sizes = np.asarray(sizes, dtype=np.float64)
    seconds = np.asarray(seconds, dtype=np.float64)
    cpu = None if cpu_seconds is None else np.asarray(cpu_seconds, dtype=np.float64)
    ok = np.isfinite(seconds) & (seconds > 0) & np.isfinite(sizes)
    if cpu is not None:
        ok &= np.isfinite(cpu) & (cpu > 0)
    if not ok.any():
        return fit
    sizes, seconds = sizes[ok], seconds[ok]
    cpu = None if cpu is None else cpu[ok]
    timing_curve = fit.timing_curve if fit.timing_curve is not None else fit.curve
    predicted = np.maximum(evaluate_cost_curve(timing_curve.coefficients, sizes), 1e-12)
    # The shortfall unclipped, per bin of sizes: where each size has one call (natural images),
    # clipping each call's shortfall at 0 before the median keeps only the slow half and raises
    # the curve above the median request (docs/decisions/timing-pass.md). The fit keeps a, b >= 0 itself.
    overhead = _overhead(bin_sizes(sizes), seconds - predicted, predicted)
    curve = timing_curve + CostCurve(overhead)
    guard, by_size = 1.0, []
    if quantile is not None:
        guard, by_size = _guards(curve, sizes, seconds, cpu, spread, quantile)
    law, law_by_size = cost_laws(curve, sizes, seconds)
    return dataclasses.replace(fit, curve=curve, timing_curve=timing_curve, overhead=tuple(map(float, overhead)),
                               guard_ratio=guard, guard_ratio_by_size=tuple(by_size) or None, law=law,
                               law_by_size=law_by_size or None)


def cost_laws(curve, sizes, seconds):
    """``(law, law_by_size)``: the quantiles at :data:`LAW_LEVELS` of wall time over ``curve`` for
    serving-like calls, over all calls and at each (binned) size with :data:`GUARD_CALLS_PER_SIZE`
    calls or more. Wall time, not CPU time: a request is late by the wall clock, preemption
    included, and the walk weighs exactly that chance."""
    ratio = np.asarray(seconds, dtype=np.float64) / np.maximum(evaluate_cost_curve(curve.coefficients, sizes), 1e-12)
    binned = bin_sizes(np.asarray(sizes))

    def law(values):
        return tuple(float(v) for v in np.quantile(values, LAW_LEVELS))

    by_size = tuple((float(n), law(ratio[binned == n])) for n in np.unique(binned)
                    if np.sum(binned == n) >= GUARD_CALLS_PER_SIZE)
    return law(ratio), by_size


def law_table(laws: dict, names) -> dict:
    """Index params holding each feature's cost law (read by ``CostSensitiveIndex.cost_laws(size)``).

    Parameters
    ----------
    laws : dict of str to (law, law_by_size)
        Each feature's :attr:`CostFit.law <polydom.costs.measure.CostFit>` and ``law_by_size``.
    names : sequence of str
        The index's items, in index order.

    Returns
    -------
    dict
        ``{"cost_law": one law per item (None without one), "cost_law_sizes": sizes ascending,
        "cost_law_by_size": one row of laws per size}``; at a size where a feature has no law of
        its own, its law over all sizes. Empty when no feature has a law.
    """
    if not any(laws.get(name, (None, None))[0] for name in names):
        return {}
    overall = [None if laws.get(name, (None,))[0] is None else list(laws[name][0]) for name in names]
    out = {"cost_law": overall}
    sizes = sorted({n for name in names for n, _ in (laws.get(name, (None, None))[1] or ())})
    if sizes:
        known = {name: dict(laws.get(name, (None, None))[1] or ()) for name in names}
        out["cost_law_sizes"] = [float(n) for n in sizes]
        out["cost_law_by_size"] = [[list(known[name][n]) if n in known[name] else overall[j]
                                    for j, name in enumerate(names)] for n in sizes]
    return out


def _guards(curve, sizes, seconds, cpu, spread, quantile: float):
    """The guard over all calls and per size: where serving-like calls sit against ``curve``
    (the median of wall time over curve, at that size when the sample has
    :data:`SAMPLE_CALLS_PER_SIZE` calls there) times the spread of the tail (the ``quantile``
    over the median of CPU time over curve, from ``spread`` when given). With wall times only,
    that product is their own ``quantile``."""
    served = seconds / np.maximum(evaluate_cost_curve(curve.coefficients, sizes), 1e-12)
    if spread is not None:
        tail_sizes, tail = (np.asarray(a, dtype=np.float64) for a in spread)
        keep = np.isfinite(tail) & (tail > 0) & np.isfinite(tail_sizes)
        tail_sizes, tail = tail_sizes[keep], tail[keep]
    else:
        tail_sizes, tail = sizes, (cpu if cpu is not None else seconds)
    ratio = tail / np.maximum(evaluate_cost_curve(curve.coefficients, tail_sizes), 1e-12)
    if not len(ratio):
        return 1.0, []

    def position(at_size=None):
        at = sizes == at_size if at_size is not None else np.ones(len(sizes), dtype=bool)
        return float(np.median(served[at] if at.sum() >= SAMPLE_CALLS_PER_SIZE else served))

    guard = _guard(ratio, quantile, position())
    by_size = [(float(n), _guard(ratio[tail_sizes == n], quantile, position(n)))
               for n in np.unique(tail_sizes) if np.sum(tail_sizes == n) >= GUARD_CALLS_PER_SIZE]
    return guard, by_size


def _guard(ratio: np.ndarray, quantile: float, position: float) -> float:
    """``position`` times the ``quantile`` of ``ratio`` over its median, at least 1 (1 if undefined)."""
    guard = position * float(np.quantile(ratio, quantile)) / float(np.median(ratio))
    return max(1.0, guard) if math.isfinite(guard) else 1.0


def carry_calibration(old, new):
    """``new`` (a fresh timing pass's fit) with ``old``'s overhead and guard: re-costing on another
    machine keeps the serving calibration learned at fit time, scaled to the new curve."""
    if old.timing_curve is None or old.overhead is None:
        return new
    n = np.array(old.measured_range)
    before = evaluate_cost_curve(old.timing_curve.coefficients, n)
    after = evaluate_cost_curve(new.curve.coefficients, n)
    # Scale the overhead by how much the intrinsic cost moved between the two machines.
    factor = float(np.median(after / np.maximum(before, 1e-12))) if np.all(before > 0) else 1.0
    overhead = tuple(float(c) * factor for c in old.overhead)
    return dataclasses.replace(new, curve=new.curve + CostCurve(overhead), timing_curve=new.curve,
                               overhead=overhead, guard_ratio=old.guard_ratio,
                               guard_ratio_by_size=old.guard_ratio_by_size, law=old.law, law_by_size=old.law_by_size)


def serving_sample(images, features, sizes, count: int = CALIBRATION_IMAGES, random_state=None):
    """``count`` training images, spread over the sizes, computed again one after another.

    Returns ``(matrix, sizes)``: their :class:`~polydom.classifier.extraction.FeatureMatrix` and item sizes.
    What a parallel extraction's calls cannot tell -- the time of a request on a machine whose
    caches no other worker shares -- these calls do (see :func:`calibrate_fits`).
    """
    from polydom.classifier.extraction import extract_features

    sizes = np.asarray(sizes)
    rng = np.random.default_rng(random_state)
    # Spread over the sizes: every size's share, at random within it.
    order = np.lexsort((rng.random(len(sizes)), sizes))
    chosen = np.sort(order[np.linspace(0, len(order) - 1, min(count, len(order))).astype(int)])
    # Shuffled, so that a feature's call does not always follow an image of the same size.
    chosen = rng.permutation(chosen)
    return extract_features([images[i] for i in chosen], features, n_jobs=None, progress=False,
                            steps=False), sizes[chosen]


def calibrate_fits(fits: dict, images, features, matrix, sizes, *, parallel: bool, quantile=DEFAULT_GUARD_QUANTILE,
                   count: int = CALIBRATION_IMAGES, random_state=None, sample=None) -> dict:
    """Every fit calibrated on serving-like calls of the training images.

    When ``matrix`` (the training extraction) was computed one image after another, its calls
    are those. When it was computed by parallel workers, the workers shared the caches and the
    memory bus: on two cores their calls took 1.2 to 1.6 times what the same features took on
    held-out images served one by one. Then ``count`` training images, spread over the sizes,
    are computed again here, sequentially, and those calls calibrate.

    Parameters
    ----------
    fits : dict of str to CostFit
    images : sequence of array
        The training images (validated).
    features : sequence of Feature
    matrix : polydom.classifier.extraction.FeatureMatrix
        Their extraction.
    sizes : ndarray
        Their item sizes.
    parallel : bool
        Whether ``matrix`` was computed by parallel workers.
    quantile : float or None
        The guard's quantile (:func:`calibrate_fit`).
    count : int
    random_state : int, optional
        Which images are computed again.
    sample : (FeatureMatrix, sizes), optional
        Calls already computed one after another (:func:`serving_sample`) to calibrate on,
        instead of computing a sample here; ``matrix`` still gives the guards' spread.

    Returns
    -------
    dict of str to CostFit
    """
    quantile = None if quantile is None else float(quantile)
    every, every_sizes = matrix, np.asarray(sizes)
    if sample is not None:
        matrix, sizes = sample
    elif parallel:
        matrix, sizes = serving_sample(images, features, every_sizes, count, random_state)
    # Both matrices list the features in the same order (the sample is extracted with ``features``).
    column = {name: j for j, name in enumerate(matrix.names)}
    cpu = matrix.cpu_seconds

    def spread(j):
        # The guard's spread from every training call: CPU time, relative to its median, is little
        # moved by the workers sharing the machine, and its tail needs the calls.
        return None if every.cpu_seconds is None else (every_sizes, every.cpu_seconds[:, j])

    return {name: calibrate_fit(fit, sizes, matrix.seconds[:, column[name]], quantile=quantile,
                                cpu_seconds=None if cpu is None else cpu[:, column[name]],
                                spread=spread(column[name]))
            for name, fit in fits.items()}


def guard_table(by_size: dict, names) -> dict:
    """Index params holding per-size guards (read by ``CostSensitiveIndex.cost_guards(size)``).

    Parameters
    ----------
    by_size : dict of str to tuple of (size, guard) pairs or None
        Each feature's :attr:`CostFit.guard_ratio_by_size <polydom.costs.measure.CostFit>`.
    names : sequence of str
        The index's features, in index order.

    Returns
    -------
    dict
        ``{"cost_guard_sizes": sizes ascending, "cost_guard_by_size": one row of guards per
        size, in index order}``; a feature without a guard at a size gets its largest guard at
        any size there. Empty when no feature has per-size guards.
    """
    sizes = sorted({n for pairs in by_size.values() if pairs for n, _ in pairs})
    if not sizes:
        return {}
    known = {name: dict(pairs or ()) for name, pairs in by_size.items()}
    fallback = {name: max(k.values(), default=1.0) for name, k in known.items()}
    rows = [[float(known[name].get(n, fallback[name])) for name in names] for n in sizes]
    return {"cost_guard_sizes": [float(n) for n in sizes], "cost_guard_by_size": rows}
