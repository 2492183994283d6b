"""Vectorised polynomial numerics shared by the candidate set and the sweep.

Polynomials are rows of coefficients, lowest degree first, padded with zeros to a common length.
Every zero test is *relative*: a coefficient or value counts as zero when it is within
``RTOL`` of the magnitude of the quantities it was computed from. An absolute epsilon would be
wrong for costs spanning 1e-7 .. 1e2 per coefficient and sizes up to 1e4 and beyond.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

__all__ = [
    "RTOL", "horner", "horner_scalar", "difference", "exact_sign", "effective_degree", "leading_sign", "real_roots",
    "le_everywhere_batch",
]

#: Relative tolerance for "equal" costs and "zero" coefficients of a difference.
RTOL = 1e-12


def horner_scalar(highest_first, x: float) -> float:
    """One polynomial at one size: coefficients **highest degree first**, by Horner's rule.

    The scalar serving paths (``lookup``, Greedy's walks) inline this loop for speed; each such
    copy says so and must stay equal to this function.
    """
    c = 0.0
    for a in highest_first:
        c = c * x + a
    return c


def horner(coeffs: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Evaluate each row of ``coeffs`` (shape ``(P, D+1)``) at ``x`` (shape ``(P,)`` or ``(P, K)``)."""
    x = np.asarray(x, dtype=float)
    c = coeffs if x.ndim == 1 else coeffs[:, None, :]
    out = np.zeros(x.shape, dtype=float)
    for k in range(coeffs.shape[1] - 1, -1, -1):
        out = out * x + c[..., k]
    return out


def effective_degree(d: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Highest index whose coefficient is not relatively zero; -1 for a zero polynomial."""
    nonzero = np.abs(d) > RTOL * scale
    deg = np.full(d.shape[0], -1, dtype=np.int64)
    for k in range(d.shape[1]):
        deg = np.where(nonzero[:, k], k, deg)
    return deg


def real_roots(d: np.ndarray, scale: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Real roots in ``(lo, hi]`` of each row of ``d``, sorted, padded with NaN.

    Parameters
    ----------
    d : ndarray, shape (P, D+1)
        Polynomials, lowest degree first.
    scale : ndarray, shape (P, D+1)
        Magnitude each coefficient was computed from (``|p| + |q|`` for ``d = q - p``);
        coefficients below ``RTOL * scale`` are treated as zero, so a difference that is only
        rounding noise in its leading term does not invent far-away roots.
    lo, hi : float
        The interval; ``hi`` may be ``inf``.

    Returns
    -------
    ndarray, shape (P, max(D, 1))
    """
    P, width = d.shape
    D = max(width - 1, 1)
    out = np.full((P, D), np.nan)
    deg = effective_degree(d, scale)
    for k in np.unique(deg):
        if k <= 0:
            continue
        rows = np.nonzero(deg == k)[0]
        dk = d[rows, : k + 1]
        if k == 1:
            r = (-dk[:, 0] / dk[:, 1])[:, None]
        elif k == 2:
            r = _quadratic_roots(dk)
        else:
            r = _companion_roots(dk)
        r = np.where((r > lo) & (r <= hi), r, np.nan)
        r.sort(axis=1)
        out[rows, : r.shape[1]] = r
    out.sort(axis=1)
    return out


def _quadratic_roots(dk: np.ndarray) -> np.ndarray:
    c, b, a = dk[:, 0], dk[:, 1], dk[:, 2]
    disc = b * b - 4.0 * a * c
    # A discriminant that is negative only by rounding is a tangency: no sign change, no root.
    real = disc >= 0.0
    sq = np.sqrt(np.where(real, disc, 0.0))
    q = -0.5 * (b + np.where(b >= 0.0, sq, -sq))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r1 = q / a
        r2 = np.where(q != 0.0, c / q, 0.0)
    r = np.stack([r1, r2], axis=1)
    return np.where(real[:, None], r, np.nan)


def _companion_roots(dk: np.ndarray) -> np.ndarray:
    P, width = dk.shape
    k = width - 1
    comp = np.zeros((P, k, k))
    comp[:, np.arange(1, k), np.arange(k - 1)] = 1.0
    comp[:, :, -1] = -dk[:, :k] / dk[:, k : k + 1]
    eig = np.linalg.eigvals(comp)
    real = np.abs(eig.imag) <= 1e-7 * (1.0 + np.abs(eig.real))
    r = np.where(real, eig.real, np.nan)
    # Two Newton steps polish roots that the eigenvalue solver left a few ulps off.
    deriv = dk[:, 1:] * np.arange(1, width)
    for _ in range(2):
        f = horner(dk, np.nan_to_num(r))
        fp = horner(deriv, np.nan_to_num(r))
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(fp != 0.0, f / fp, 0.0)
        r = r - step
    return r


def difference(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``q - p`` per row, with every coefficient that is rounding noise set to exactly zero.

    A coefficient of the difference counts as noise when it is within ``RTOL`` of ``|p| + |q|``:
    two sets that share a feature sum the same terms in different orders, and their shared
    high-degree term must cancel exactly rather than leave a far-away phantom root.
    """
    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    d = q - p
    return np.where(np.abs(d) > RTOL * (np.abs(p) + np.abs(q)), d, 0.0)


#: Unit roundoff of float64; Horner's error bound is a small multiple of it per degree.
_UNIT = 2.0**-53


def exact_sign(d: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Exact sign of each row of ``d`` (lowest degree first) at the float ``x`` of that row.

    Floating-point Horner decides wherever its value exceeds the classical forward error bound
    ``gamma_{2k} * sum |d_i| |x|^i`` (with a safety factor of two); the few rows it cannot decide
    (a value near zero, or an overflow) are evaluated in exact rational arithmetic. The sign is
    therefore right however far apart the magnitudes of the terms are.
    """
    d = np.asarray(d, dtype=float)
    x = np.asarray(x, dtype=float)
    out = np.zeros(d.shape[0], dtype=np.int8)
    if d.shape[0] == 0:
        return out
    width = d.shape[1]
    with np.errstate(over="ignore", invalid="ignore"):
        value = horner(d, x)
        bound = horner(np.abs(d), np.abs(x)) * (4.0 * width + 4.0) * _UNIT
        decided = np.isfinite(value) & np.isfinite(bound) & (np.abs(value) > bound + 1e-300)
    out[decided] = np.sign(value[decided]).astype(np.int8)
    for r in np.nonzero(~decided)[0]:
        out[r] = _rational_sign(d[r], float(x[r]))
    return out


def _rational_sign(row: np.ndarray, x: float) -> int:
    """Sign of one polynomial at ``x``, exactly, from the floats' exact rational values."""
    xf = Fraction(x)
    acc = Fraction(0)
    for c in row[::-1].tolist():
        acc = acc * xf + Fraction(c)
    return (acc > 0) - (acc < 0)


def le_everywhere_batch(p: np.ndarray, q: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Whether ``p(n) <= q(n)`` for every ``n`` in ``[lo, hi]``, per row.

    Exact up to rounding: the difference ``q - p`` (:func:`difference`: coefficients that are
    rounding noise of ``|p| + |q|`` set to zero, so curves that sum the same terms in another
    order compare equal) must be non-negative at ``lo``, at ``hi`` (or in its leading term when
    ``hi`` is infinite) and at every real critical point inside, which is where a polynomial
    attains its minimum on an interval. A value of the difference counts as zero within
    ``RTOL`` of the size of *its own* terms there (:func:`_difference_sign`), so curves that touch
    at a float end point still compare as touching. A tolerance relative to the curves' values
    would be wrong: ``0.5 n^3`` against ``0.5 n^3 + 1e-7 n^2 - 3 n`` differs by -2.25e7 at the
    critical point n = 1.5e7, a relative 1e-14 of the curves there, yet the second curve is
    cheaper at every size below 3e7.
    """
    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    P, width = p.shape
    ok = np.ones(P, dtype=bool)
    if P == 0:
        return ok
    d = difference(p, q)
    # Cheap sufficient test: coefficient-wise q >= p on a domain of non-negative sizes.
    todo = np.nonzero(np.any(d < 0.0, axis=1) if lo >= 0.0 else np.ones(P, dtype=bool))[0]
    if len(todo) == 0:
        return ok
    d = d[todo]
    res = _difference_sign(d, np.full(len(todo), float(lo))) >= 0
    if np.isfinite(hi):
        res &= _difference_sign(d, np.full(len(todo), float(hi))) >= 0
    else:
        res &= leading_sign(p[todo], q[todo]) >= 0
    if width > 2:
        deriv = d[:, 1:] * np.arange(1, width)
        crit = real_roots(deriv, np.zeros_like(deriv), lo, hi)
        for c in range(crit.shape[1]):
            x = crit[:, c]
            has = ~np.isnan(x)
            if has.any():
                res[has] &= _difference_sign(d[has], x[has]) >= 0
    ok[todo] = res
    return ok


def _difference_sign(d: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Sign of each row of ``d`` at ``x``, 0 within ``RTOL`` of the sum of its terms' magnitudes."""
    with np.errstate(over="ignore", invalid="ignore"):
        value = horner(d, x)
        size = horner(np.abs(d), np.abs(x))
    return np.where(value > RTOL * size, 1, np.where(value < -RTOL * size, -1, 0)).astype(np.int8)


def leading_sign(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Sign of ``q - p`` as ``n -> inf``: the sign of its highest non-negligible coefficient."""
    d = q - p
    scale = np.abs(p) + np.abs(q)
    deg = effective_degree(d, scale)
    lead = np.where(deg >= 0, d[np.arange(len(d)), np.maximum(deg, 0)], 0.0)
    return np.sign(lead).astype(np.int8)
