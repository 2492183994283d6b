"""Cost curves: the time to compute a feature (or feature set) as a polynomial in the item size."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from polydom.index.costs.poly import horner_scalar, le_everywhere_batch
from polydom.index.values import is_real

__all__ = ["CostCurve", "as_cost_curve", "format_curve", "set_cost_matrix"]


class CostCurve:
    """A polynomial cost ``c(n) = c0 + c1*n + c2*n**2 + ...`` in the item size ``n``.

    Immutable value; equal curves compare and hash equal. Trailing zero coefficients are dropped,
    so ``CostCurve([5, 0])`` equals ``CostCurve([5])``.

    Parameters
    ----------
    coefficients : iterable of real
        Lowest degree first; at least one; each finite.

    Examples
    --------
    >>> c = CostCurve([5, 2])        # 5 + 2n
    >>> c(3)
    11.0
    >>> (c + CostCurve([0, 0, 3]))(1)
    10.0
    """

    __slots__ = ("coefficients", "_horner")

    def __init__(self, coefficients: Iterable[float]):
        if isinstance(coefficients, CostCurve):
            coefficients = coefficients.coefficients
        if isinstance(coefficients, (str, bytes)) or not isinstance(coefficients, Iterable):
            raise TypeError(f"cost curve coefficients must be a sequence of numbers, got {coefficients!r}")
        coeffs = []
        for c in coefficients.tolist() if isinstance(coefficients, np.ndarray) else coefficients:
            if not is_real(c):
                raise TypeError(f"cost curve coefficients must be real numbers, got {c!r}")
            c = float(c)
            if not math.isfinite(c):
                raise ValueError(f"cost curve coefficients must be finite, got {c!r}")
            coeffs.append(c)
        if not coeffs:
            raise ValueError("a cost curve needs at least one coefficient")
        while len(coeffs) > 1 and coeffs[-1] == 0.0:
            coeffs.pop()
        object.__setattr__(self, "coefficients", tuple(coeffs))
        object.__setattr__(self, "_horner", tuple(reversed(coeffs)))

    def __setattr__(self, name, value):
        raise AttributeError("CostCurve is immutable")

    def __reduce__(self):
        return (CostCurve, (self.coefficients,))

    @property
    def degree(self) -> int:
        """Degree of the polynomial (0 for a constant, including the zero curve)."""
        return len(self.coefficients) - 1

    def __call__(self, n: float) -> float:
        """Cost at size ``n``, by Horner's rule."""
        return horner_scalar(self._horner, n)

    def __add__(self, other: "CostCurve") -> "CostCurve":
        other = as_cost_curve(other)
        a, b = self.coefficients, other.coefficients
        m = max(len(a), len(b))
        return CostCurve([(a[i] if i < len(a) else 0.0) + (b[i] if i < len(b) else 0.0) for i in range(m)])

    __radd__ = __add__

    def __sub__(self, other: "CostCurve") -> "CostCurve":
        other = as_cost_curve(other)
        return self + CostCurve([-c for c in other.coefficients])

    def __eq__(self, other) -> bool:
        return isinstance(other, CostCurve) and self.coefficients == other.coefficients

    def __hash__(self) -> int:
        return hash(self.coefficients)

    def __repr__(self) -> str:
        return f"CostCurve({list(self.coefficients)!r})"

    def __str__(self) -> str:
        return format_curve(self)

    def padded(self, length: int) -> np.ndarray:
        """Coefficients as a float array of ``length`` entries (zero padded)."""
        out = np.zeros(max(length, len(self.coefficients)))
        out[: len(self.coefficients)] = self.coefficients
        return out

    def le_everywhere(self, other: "CostCurve", domain: tuple[float, float] = (0.0, math.inf)) -> bool:
        """Whether ``self(n) <= other(n)`` for every ``n`` in ``domain`` (to 1e-12 relative).

        Checks the endpoints, the behaviour at infinity and every critical point of the
        difference in between, so the answer is exact up to rounding.
        """
        other = as_cost_curve(other)
        width = max(len(self.coefficients), len(other.coefficients))
        return bool(
            le_everywhere_batch(self.padded(width)[None, :], other.padded(width)[None, :], domain[0], domain[1])[0]
        )

    def is_nonnegative(self, domain: tuple[float, float] = (0.0, math.inf)) -> bool:
        """Whether ``self(n) >= 0`` on the whole ``domain`` (a negative cost would let a set "fit" any budget)."""
        return CostCurve([0.0]).le_everywhere(self, domain)

    def expression(self, variable: str = "n"):
        """The curve as a sympy expression (sympy is imported only here)."""
        import sympy

        n = sympy.Symbol(variable, nonnegative=True)
        return sympy.Add(*[sympy.Float(c, 6) * n**k if k else sympy.Float(c, 6) for k, c in enumerate(self.coefficients) if c != 0.0 or k == 0])


def format_curve(curve, variable: str = "n") -> str:
    """The one readable form of a cost curve, e.g. ``"2.1e-05 + 3.4e-09*n"``: three significant
    digits per non-zero coefficient, lowest degree first."""
    coefficients = as_cost_curve(curve).coefficients
    terms = []
    for k, c in enumerate(coefficients):
        if c == 0.0 and (k or len(coefficients) > 1):
            continue
        power = "" if k == 0 else (f"*{variable}" if k == 1 else f"*{variable}^{k}")
        terms.append(f"{c:.3g}{power}")
    return " + ".join(terms)


def as_cost_curve(value) -> CostCurve:
    """A :class:`CostCurve` from a curve, a sequence of coefficients or a numpy array."""
    if isinstance(value, CostCurve):
        return value
    if isinstance(value, np.ndarray):
        if value.ndim != 1:
            raise ValueError(f"cost curve coefficients must be 1-D, got shape {value.shape}")
        return CostCurve(value.tolist())
    return CostCurve(value)


def set_cost_matrix(curves, masks) -> np.ndarray:
    """Summed cost polynomial of each mask (rows), features added in index order (Eq. 1).

    The summation order is fixed so that equal sets always get bit-identical coefficients.
    """
    masks = np.asarray(list(masks), dtype=object)
    width = max(len(c.coefficients) for c in curves)
    out = np.zeros((len(masks), width))
    for i, curve in enumerate(curves):
        has = np.array([(int(m) >> i) & 1 for m in masks], dtype=float)
        if has.any():
            out += has[:, None] * curve.padded(width)[None, :]
    return out
