"""Fit cost polynomials to measured feature timings.

A feature's cost curve is one polynomial ``p(n) = c_0 + c_1 n + ... + c_d n^d``
in the item size ``n`` with non-negative coefficients, so it is non-negative and
non-decreasing for ``n >= 0`` (and the index's sweep can cross curves exactly).
`fit_cost_curve` picks it by solving a small linear programme, in one of two ways:

* ``"track"`` (the default for central quantiles): the least total *relative*
  deviation from the chosen quantile of the times at each measured size -- the
  curve follows the data, above it at some sizes and below at others, and a
  cheap small size weighs as much as an expensive large one;
* ``"cover"`` (the default for ``quantile >= 0.9`` and ``"max"``): at or above
  the quantile at every measured size, exactly in floating point, with the
  least area over the measured range -- worst-case provisioning.

This module depends on numpy and scipy only.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

__all__ = ["evaluate_cost_curve", "fit_cost_curve", "quantile_per_size"]

_MAX_NUDGES = 64


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


def quantile_per_size(sizes, seconds, quantile=0.95) -> tuple[np.ndarray, np.ndarray]:
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
        samples, or a quantile outside ``[0, 1]``.
    """
    sizes, seconds = _as_samples(sizes, seconds)
    q = _check_quantile(quantile)
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


def fit_cost_curve(sizes, seconds, *, degree=2, quantile=0.95, mode=None) -> np.ndarray:
    """Fit a non-negative polynomial to measured times: tracking them, or bounding them.

    With ``mode="track"`` it solves, for coefficients ``c_0 .. c_degree``::

        minimise    sum over sizes s_k of |p(s_k) - q_k| / q_k
        subject to  c_j >= 0        for every j

    With ``mode="cover"``::

        minimise    integral of p(n) dn over [min(sizes), max(sizes)]
        subject to  p(s_k) >= q_k   for every distinct size s_k
                    c_j >= 0        for every j

    where ``q_k`` is the ``quantile`` of the times measured at ``s_k``. Sizes
    and times are rescaled to ``[0, 1]`` before solving so that sizes up to
    millions and times from microseconds to seconds stay well conditioned.
    The solution is then raised just enough that the constraints hold
    exactly in float64, both by Horner's rule and term by term.

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

    Returns
    -------
    numpy.ndarray, shape (degree + 1,)
        Coefficients, lowest degree first, all ``>= 0``; the curve is
        therefore non-decreasing for sizes ``>= 0``. With ``"cover"`` it
        satisfies ``evaluate_cost_curve(c, s_k) >= q_k`` at every measured size.

    Raises
    ------
    ValueError
        On invalid samples (see `quantile_per_size`), a bad degree, or fewer
        than ``degree + 1`` distinct sizes.
    RuntimeError
        If the linear programme solver fails (it should not: the problem is
        always feasible and bounded).
    """
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or degree < 0:
        raise ValueError(f"degree must be an int >= 0, got {degree!r}")
    degree = int(degree)
    unique_sizes, targets = quantile_per_size(sizes, seconds, quantile)
    if len(unique_sizes) < degree + 1:
        raise ValueError(
            f"a degree-{degree} fit needs at least {degree + 1} distinct sizes, "
            f"got {len(unique_sizes)}"
        )
    time_scale = targets.max()
    if time_scale == 0:
        return np.zeros(degree + 1)
    if degree == 0:
        return np.array([time_scale])

    size_scale = unique_sizes.max()  # > 0: there are at least 2 distinct sizes >= 0
    x = unique_sizes / size_scale
    y = targets / time_scale
    powers = np.arange(degree + 1)
    if mode is None:
        mode = "cover" if quantile == "max" or float(quantile) >= 0.9 else "track"
    if mode == "track":
        return time_scale * _track(x, y, powers) / size_scale ** powers.astype(np.float64)
    if mode != "cover":
        raise ValueError(f"mode must be 'track' or 'cover', got {mode!r}")
    lower = x[0]
    # Area of x^j over [lower, 1]; every weight is > 0 because lower < 1, so
    # the programme is bounded, and c = (max y, 0, ..., 0) shows it feasible.
    area = (1.0 - lower ** (powers + 1)) / (powers + 1)
    result = linprog(
        c=area,
        A_ub=-(x[:, None] ** powers),
        b_ub=-y,
        bounds=[(0.0, None)] * (degree + 1),
        method="highs",
    )
    if result.status != 0:
        raise RuntimeError(f"cost-curve LP failed: {result.message}")
    scaled = np.maximum(result.x, 0.0)
    coefficients = time_scale * scaled / size_scale ** powers.astype(np.float64)
    return _raise_to_cover(coefficients, unique_sizes, targets)


def _track(x: np.ndarray, y: np.ndarray, powers: np.ndarray) -> np.ndarray:
    """Scaled coefficients ``c >= 0`` minimising ``sum |p(x_k) - y_k| / y_k`` (an LP in ``c, t``)."""
    m, d = len(x), len(powers)
    weight = 1.0 / np.maximum(y, 1e-9)  # a zero time still counts, as a tiny one
    basis = (x[:, None] ** powers) * weight[:, None]
    target = y * weight
    # Variables [c (d), t (m)]; minimise sum t subject to |basis c - target| <= t.
    eye = np.eye(m)
    result = linprog(
        c=np.concatenate([np.zeros(d), np.ones(m)]),
        A_ub=np.block([[basis, -eye], [-basis, -eye]]),
        b_ub=np.concatenate([target, -target]),
        bounds=[(0.0, None)] * (d + m),
        method="highs",
    )
    if result.status != 0:
        raise RuntimeError(f"cost-curve LP failed: {result.message}")
    return np.maximum(result.x[:d], 0.0)


def _raise_to_cover(coefficients: np.ndarray, sizes: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Scale ``coefficients`` up until the curve covers every target in float.

    The solver meets constraints only to a tolerance, and unscaling rounds;
    the shortfall is tiny, so a relative bump of a few ulps suffices.
    """
    coefficients = coefficients.copy()
    for _ in range(_MAX_NUDGES):
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
        coefficients *= ratio * (1.0 + 4.0 * np.finfo(np.float64).eps)
    raise RuntimeError("could not raise the cost curve above the targets")  # pragma: no cover
