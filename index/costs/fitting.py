"""Fit cost polynomials to measured feature timings.

A feature's cost curve is one polynomial ``p(n) = c_0 + c_1 n + ... + c_d n^d``
in the item size ``n`` (the index's sweep crosses such curves exactly).
`fit_cost_curve` picks it by solving a small linear programme, in one of two ways:

* ``"track"`` (the default for central quantiles): the least total *relative*
  deviation from the chosen quantile of the times at each measured size -- the
  curve follows the data, above it at some sizes and below at others, and a
  cheap small size weighs as much as an expensive large one;
* ``"cover"`` (the default for ``quantile >= 0.9`` and ``"max"``): at or above
  the quantile at every measured size, exactly in floating point, with the
  least area over the measured range -- worst-case provisioning.

Either way the curve keeps one shape, the invariant every fit returns:

    ``p(n) >= 0`` and ``p'(n) >= 0`` for every ``n`` in the *shape range*, the
    smallest interval holding both the measured sizes and the ``domain``.

Coefficients may be negative: a curve may bend down (grow concavely) where the
data does, as long as it never decreases on the shape range. With the default
domain ``[0, inf)`` a quadratic can only do that with non-negative coefficients,
while a cubic can be concave over the measured sizes and convex beyond; a finite
domain lets a quadratic bend down too.

This module depends on numpy and scipy only.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import linprog

from polydom.index.errors import PolydomError

__all__ = ["evaluate_cost_curve", "fit_cost_curve", "quantile_per_size", "shape_range"]

_MAX_NUDGES = 64
#: Cutting-plane rounds: each adds the point where the slope is lowest as a constraint.
_MAX_CUTS = 60
#: Initial points where the slope is constrained, spread over the shape range.
_GRID = 17


def _as_samples(sizes, seconds) -> tuple[np.ndarray, np.ndarray]:
    """Validate paired samples and return them as 1-D float64 arrays."""
    arrays = []
    for name, values in (("sizes", sizes), ("seconds", seconds)):
        array = np.asarray(values)
        if array.dtype == np.bool_ or not (
            np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
        ):
            raise ValueError(f"{name} must be real numbers, got dtype {array.dtype}")
        if array.ndim != 1:
            raise ValueError(f"{name} must be 1-D, got shape {array.shape}")
        array = array.astype(np.float64)
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{name} contains NaN or infinite values")
        if np.any(array < 0):
            raise ValueError(f"{name} must be >= 0, got minimum {array.min():g}")
        arrays.append(array)
    sizes, seconds = arrays
    if len(sizes) != len(seconds):
        raise ValueError(
            f"sizes and seconds differ in length: {len(sizes)} != {len(seconds)}"
        )
    if len(sizes) == 0:
        raise ValueError("no samples")
    return sizes, seconds


def _fastest_repeats(sizes, seconds, items) -> tuple[np.ndarray, np.ndarray]:
    """One sample per (size, item): the fastest of its repeats."""
    items = np.asarray(items)
    if items.shape != sizes.shape or not np.issubdtype(items.dtype, np.integer):
        raise ValueError(f"items must be integers, one per sample, got dtype {items.dtype} and "
                         f"shape {items.shape} for {len(sizes)} samples")
    keys, inverse = np.unique(np.stack([sizes, items.astype(np.float64)], axis=1), axis=0,
                              return_inverse=True)
    fastest = np.full(len(keys), np.inf)
    np.minimum.at(fastest, inverse.ravel(), seconds)
    return keys[:, 0], fastest


def quantile_per_size(sizes, seconds, quantile=0.5, *, items=None) -> tuple[np.ndarray, np.ndarray]:
    """The ``quantile`` of the times measured at each distinct size.

    Parameters
    ----------
    sizes : array_like, shape (m,)
        Item size of each sample, ``>= 0``.
    seconds : array_like, shape (m,)
        Measured time of each sample, ``>= 0``.
    quantile : float in [0, 1] or "max"
        Which quantile (numpy's default linear interpolation); ``"max"`` (or
        1.0) is the largest time.
    items : array_like of int, shape (m,), optional
        Samples sharing a size and an item are repeats of one call. For a numeric
        ``quantile`` each such group counts once, by its fastest repeat: interference
        only ever adds time, so the fastest repeat is the least disturbed, and the
        quantile is then taken across items, whose costs may really differ. ``"max"``
        still takes every sample (the worst case is the worst case).

    Returns
    -------
    unique_sizes : numpy.ndarray
        Distinct sizes, ascending.
    values : numpy.ndarray
        The quantile of the times at each of them.

    Raises
    ------
    ValueError
        On NaN or infinite values, negative values, lengths that differ, no
        samples, a quantile outside ``[0, 1]``, or bad ``items``.

    Examples
    --------
    >>> quantile_per_size([4, 4, 4, 9], [1.0, 3.0, 2.0, 5.0])
    (array([4., 9.]), array([2., 5.]))
    >>> quantile_per_size([4, 4, 4, 4], [1.0, 3.0, 2.0, 6.0], items=[0, 0, 1, 1])[1]
    array([1.5])
    """
    sizes, seconds = _as_samples(sizes, seconds)
    q = _check_quantile(quantile)
    if items is not None:
        reduced = _fastest_repeats(sizes, seconds, items)
        if q is not None:
            sizes, seconds = reduced
    order = np.argsort(sizes, kind="stable")
    sizes, seconds = sizes[order], seconds[order]
    unique_sizes, starts = np.unique(sizes, return_index=True)
    groups = np.split(seconds, starts[1:])
    if q is None:
        values = np.array([group.max() for group in groups])
    else:
        values = np.array([np.quantile(group, q) for group in groups])
    return unique_sizes, values


def _check_quantile(quantile):
    """Return ``None`` for the maximum, else the quantile as a float."""
    if isinstance(quantile, str):
        if quantile == "max":
            return None
        raise ValueError(f"quantile must be a number in [0, 1] or 'max', got {quantile!r}")
    if isinstance(quantile, bool):
        raise ValueError(f"quantile must be a number in [0, 1] or 'max', got {quantile!r}")
    q = float(quantile)
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must lie in [0, 1], got {quantile!r}")
    return q


def _check_domain(domain) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in domain)
    except (TypeError, ValueError):
        raise ValueError(f"domain must be a pair of numbers (lo, hi), got {domain!r}") from None
    if math.isnan(lo) or math.isnan(hi) or not (0.0 <= lo < hi) or math.isinf(lo):
        raise ValueError(f"domain must satisfy 0 <= lo < hi (hi may be inf), got {domain!r}")
    return lo, hi


def shape_range(sizes, domain=(0.0, math.inf)) -> tuple[float, float]:
    """The interval on which a fitted curve is non-negative and non-decreasing.

    The smallest interval holding both the measured ``sizes`` and ``domain``.

    Examples
    --------
    >>> shape_range([256, 6400], (0, 4096))
    (0.0, 6400.0)
    """
    sizes = np.asarray(sizes, dtype=np.float64)
    lo, hi = _check_domain(domain)
    return min(lo, float(sizes.min())), max(hi, float(sizes.max()))


def evaluate_cost_curve(coefficients, sizes) -> np.ndarray:
    """Evaluate a polynomial (coefficients low to high) by Horner's rule."""
    coefficients = np.asarray(coefficients, dtype=np.float64)
    sizes = np.asarray(sizes, dtype=np.float64)
    out = np.zeros(sizes.shape)
    for c in coefficients[::-1]:
        out = out * sizes + c
    return out


def _power_sum(coefficients: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Evaluate term by term, the other common order of rounding."""
    powers = sizes[:, None] ** np.arange(len(coefficients))
    return (powers * coefficients).sum(axis=1)


def fit_cost_curve(sizes, seconds, *, degree=2, quantile=0.5, mode=None, domain=(0.0, math.inf),
                   items=None) -> np.ndarray:
    """Fit a polynomial to measured times, tracking them or bounding them, that never
    decreases on the sizes it will serve.

    With ``mode="track"`` it solves, for coefficients ``c_0 .. c_degree``::

        minimise    sum over sizes s_k of |p(s_k) - q_k| / q_k
        subject to  p >= 0 and p' >= 0 on the shape range

    With ``mode="cover"``::

        minimise    integral of p(n) dn over [min(sizes), max(sizes)]
        subject to  p(s_k) >= q_k   for every distinct size s_k
                    p >= 0 and p' >= 0 on the shape range

    where ``q_k`` is the ``quantile`` of the times measured at ``s_k`` and the
    shape range is `shape_range` ``(sizes, domain)``. The slope condition holds at
    infinitely many sizes; it is imposed at a grid of them, then wherever the
    solution's slope is lowest, until it is nowhere negative, and a last exact
    check raises ``c_1`` by any rounding shortfall. Sizes and times are rescaled to
    ``[0, 1]`` before solving so that sizes up to millions and times from
    microseconds to seconds stay well conditioned. A cover is then raised just
    enough that its constraints hold exactly in float64, both by Horner's rule
    and term by term.

    Parameters
    ----------
    sizes : array_like, shape (m,)
        Item size of each sample (``>= 0``).
    seconds : array_like, shape (m,)
        Measured time of each sample (``>= 0``).
    degree : int
        Degree of the polynomial, ``>= 0``.
    quantile : float in [0, 1] or "max"
        Which quantile of the times at each size the curve follows (or covers);
        ``"max"`` means every sample (the worst case).
    mode : {"track", "cover"}, optional
        ``None``: ``"cover"`` for ``quantile >= 0.9`` or ``"max"``, else ``"track"``.
    domain : (lo, hi)
        Sizes the curve will be asked about, ``0 <= lo < hi <= inf``; the curve is
        non-negative and non-decreasing there and over the measured sizes.
    items : array_like of int, shape (m,), optional
        Which item each sample was timed on; repeats of one call then count once
        (see `quantile_per_size`).

    Returns
    -------
    numpy.ndarray, shape (degree + 1,)
        Coefficients, lowest degree first. The curve is non-negative and
        non-decreasing on the shape range. With ``"cover"`` it satisfies
        ``evaluate_cost_curve(c, s_k) >= q_k`` at every measured size.

    Raises
    ------
    ValueError
        On invalid samples (see `quantile_per_size`), a bad degree, mode or
        domain, or fewer than ``degree + 1`` distinct sizes.
    RuntimeError
        If the linear programme solver fails (it should not: the problem is
        always feasible and bounded).

    Examples
    --------
    Times growing like the square root of the size: the curve may bend down with
    them where the shape range allows it.

    >>> sizes = [256, 1024, 2304, 4096, 6400]
    >>> seconds = [1e-3 * (n / 256) ** 0.5 for n in sizes]
    >>> def ratios(c):
    ...     return [round(float(v / s), 2) for v, s in zip(evaluate_cost_curve(c, sizes), seconds)]
    >>> ratios(fit_cost_curve(sizes, seconds))                    # a quadratic on [0, inf): convex
    [1.0, 0.8, 0.87, 1.0, 1.16]
    >>> ratios(fit_cost_curve(sizes, seconds, degree=3))          # concave here, convex further out
    [1.0, 1.0, 1.04, 1.0, 1.0]
    >>> ratios(fit_cost_curve(sizes, seconds, domain=(0, 8000)))  # a quadratic bending down
    [1.0, 0.89, 0.97, 1.03, 1.0]
    """
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or degree < 0:
        raise ValueError(f"degree must be an int >= 0, got {degree!r}")
    degree = int(degree)
    if mode is None:
        q = _check_quantile(quantile)
        mode = "cover" if q is None or q >= 0.9 else "track"
    if mode not in ("track", "cover"):
        raise ValueError(f"mode must be 'track' or 'cover', got {mode!r}")
    unique_sizes, targets = quantile_per_size(sizes, seconds, quantile, items=items)
    lo, hi = shape_range(unique_sizes, domain)
    if len(unique_sizes) < degree + 1:
        raise ValueError(
            f"a degree-{degree} fit needs at least {degree + 1} distinct sizes, "
            f"got {len(unique_sizes)}"
        )
    time_scale = targets.max()
    if time_scale == 0:
        return np.zeros(degree + 1)
    if degree == 0 and mode == "cover":
        return np.array([time_scale])

    size_scale = unique_sizes.max() if unique_sizes.max() > 0 else 1.0
    x = unique_sizes / size_scale
    y = targets / time_scale
    powers = np.arange(degree + 1)
    unscale = time_scale / size_scale ** powers.astype(np.float64)
    try:
        scaled = _solve(x, y, powers, mode, lo / size_scale, hi / size_scale)
        coefficients = _exact_shape(scaled * unscale, lo, hi)
    except _ShapeLost:
        # Non-negative coefficients never decrease on sizes >= 0: always a valid answer.
        scaled = _solve(x, y, powers, mode, lo / size_scale, hi / size_scale, nonnegative=True)
        coefficients = _exact_shape(scaled * unscale, lo, hi)
    if mode == "cover":
        coefficients = _raise_to_cover(coefficients, unique_sizes, targets)
    return coefficients


class _ShapeLost(PolydomError, ArithmeticError):
    """The cutting planes left a curve that falls without bound on an unbounded range."""


def _solve(x, y, powers, mode, lo, hi, nonnegative=False) -> np.ndarray:
    """Scaled coefficients for ``mode``, shape-constrained on ``[lo, hi]`` by cutting planes
    (or simply ``c >= 0``, when ``nonnegative``)."""
    d, m = len(powers), len(x)
    basis = x[:, None] ** powers
    if mode == "track":
        weight = 1.0 / np.maximum(y, 1e-9)  # a zero time still counts, as a tiny one
        # Variables [c (d), t (m)]; minimise sum t subject to |(basis c - y) / y| <= t.
        objective = np.concatenate([np.zeros(d), np.ones(m)])
        fit_rows = np.block([[basis * weight[:, None], -np.eye(m)], [-basis * weight[:, None], -np.eye(m)]])
        fit_bounds = np.concatenate([y * weight, -y * weight])
        extra = m
    else:
        lower = x[0]
        # Area of x^j over [lower, 1]; every weight is > 0 because lower < 1.
        objective = (1.0 - lower ** (powers + 1)) / (powers + 1)
        fit_rows, fit_bounds, extra = -basis, -y, 0

    def shape_rows(points):
        slope = np.zeros((len(points), d + extra))
        slope[:, 1:d] = -(powers[1:] * np.asarray(points)[:, None] ** (powers[1:] - 1))
        return slope

    # p(lo) >= 0; with p' >= 0 beyond it, p >= 0 on the whole range.
    start = np.zeros((1, d + extra))
    start[0, :d] = -(lo ** powers)
    # Slopes constrained across the measured sizes keep the cover's area bounded below (between
    # constrained points a curve could dip without limit); more across the rest of the range.
    finite_top = hi if math.isfinite(hi) else 16.0 * x[-1]
    points = sorted(set(np.linspace(x[0], x[-1], _GRID)) | set(np.linspace(lo, finite_top, _GRID)))
    bounds = [(0.0 if nonnegative else None, None)] * d + [(0.0, None)] * extra
    if not math.isfinite(hi) and d > 1:
        bounds[d - 1] = (0.0, None)  # a negative leading coefficient ends up decreasing
    coefficients = None
    for _ in range(_MAX_CUTS):
        problem = dict(c=objective, A_ub=np.vstack([fit_rows, start, shape_rows(points)]),
                       b_ub=np.concatenate([fit_bounds, [0.0], np.zeros(len(points))]), bounds=bounds)
        result = linprog(**problem, method="highs")
        if result.status == 4:
            # Numerical trouble: on badly scaled rows (sizes across five orders of magnitude
            # at degree 3, times from 1 ms to 10 s) HiGHS's simplex can end with an unknown
            # status where its interior-point method solves the same problem.
            simplex = result.message
            result = linprog(**problem, method="highs-ipm")
            if result.status != 0 and result.status != 3:
                result.message = f"simplex: {simplex}; interior point: {result.message}"
        if result.status == 3 and len(points) < 1000:
            # Unbounded between the constrained points: constrain the midpoints too.
            points = sorted(set(points) | set(np.convolve(points, [0.5, 0.5], "valid")))
            continue
        if result.status != 0:
            raise RuntimeError(f"cost-curve LP failed: {result.message}")
        coefficients = result.x[:d]
        if d == 1:
            return coefficients
        slope = coefficients[1:] * powers[1:]
        low, where = _minimum(slope, lo, hi)
        if low >= -1e-9 * max(1.0, float(np.abs(slope).max())):
            return coefficients
        # Falling without bound (a zero leading coefficient): cut far out, where it falls.
        points.append(where if math.isfinite(where) else 4.0 * max(points) + 1.0)
    if coefficients is None:  # pragma: no cover - unbounded even on a dense grid
        raise RuntimeError("cost-curve LP failed: unbounded")
    return coefficients


def _minimum(coefficients, lo: float, hi: float) -> tuple[float, float]:
    """The least value of a polynomial on ``[lo, hi]`` (``hi`` may be inf) and where it is.

    Candidates are the ends and the real roots of the derivative between them; on an
    unbounded range a falling leading term gives ``(-inf, inf)``.
    """
    c = np.trim_zeros(np.asarray(coefficients, dtype=np.float64), "b")
    if len(c) <= 1:
        return (float(c[0]) if len(c) else 0.0), lo
    if not math.isfinite(hi) and c[-1] < 0:
        return -math.inf, math.inf
    candidates = [lo] + ([hi] if math.isfinite(hi) else [])
    roots = np.polynomial.polynomial.polyroots(c[1:] * np.arange(1, len(c)))
    # Near-real roots count too: a double root often comes back with a tiny imaginary part.
    near_real = roots[np.abs(roots.imag) <= 1e-7 * np.maximum(1.0, np.abs(roots.real))].real
    candidates += [r for r in near_real.tolist() if lo < r < hi]
    values = evaluate_cost_curve(c, np.array(candidates))
    k = int(np.argmin(values))
    return float(values[k]), float(candidates[k])


def _exact_shape(coefficients: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Raise ``c_1``, then ``c_0``, by any rounding shortfall, so that ``p' >= 0`` and ``p >= 0``.

    A constant added to the slope keeps the curve's bends and lifts its lowest slope; the
    solver met the slope constraints only to a tolerance, and unscaling rounds.
    """
    c = coefficients.copy()
    if len(c) > 1:
        for _ in range(8):
            low, _ = _minimum(c[1:] * np.arange(1, len(c)), lo, hi)
            if low >= 0:
                break
            if not math.isfinite(low):
                raise _ShapeLost()
            c[1] += -low * (1.0 + 1e-9) + np.finfo(np.float64).tiny
    at_lo = min(float(evaluate_cost_curve(c, lo)), float(_power_sum(c, np.array([lo]))[0]))
    if at_lo < 0:
        c[0] += -at_lo
    return c


def _raise_to_cover(coefficients: np.ndarray, sizes: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Scale ``coefficients`` up until the curve covers every target in float.

    The solver meets constraints only to a tolerance, and unscaling rounds;
    the shortfall is tiny, so a relative bump of a few ulps suffices. Scaling by a
    factor above 1 keeps the curve non-negative and non-decreasing wherever it was. The bump
    doubles with each round: where a negative constant cancels most of a larger term, the
    rounding of the scaled terms can exceed a few ulps of their sum.
    """
    coefficients = coefficients.copy()
    for attempt in range(_MAX_NUDGES):
        values = np.minimum(evaluate_cost_curve(coefficients, sizes), _power_sum(coefficients, sizes))
        short = values < targets
        if not short.any():
            return coefficients
        dead = short & (values <= 0)
        if dead.any():
            # Nothing to scale at these sizes (e.g. size 0 with c_0 = 0).
            coefficients[0] += (targets[dead] - values[dead]).max()
            continue
        ratio = (targets[short] / values[short]).max()
        coefficients *= ratio * (1.0 + 4.0 * np.finfo(np.float64).eps * 2.0 ** attempt)
    raise RuntimeError("could not raise the cost curve above the targets")  # pragma: no cover
