"""The Greedy backend's parameters -- backend tag, λ grid and expansion size ``n0`` -- validated once."""

from __future__ import annotations

import math
from collections.abc import Iterable

from polydom.index.values import is_real

__all__ = ["GREEDY_BACKENDS", "DEFAULT_LAMBDAS", "resolve_lambdas", "check_n0"]

#: Backend tags served by :class:`greedy.GreedyIndex`.
GREEDY_BACKENDS = ("greedy", "greedy-acc", "greedy-cost")

#: The paper's grid ``L`` of λ values.
DEFAULT_LAMBDAS = (0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0)

# Named by behaviour, as the paper's experiments section does: its method section swaps the two names
# and writes L = {-inf}, which would add the most expensive feature first.
_FIXED_GRIDS = {"greedy-acc": (0.0,), "greedy-cost": (math.inf,)}


def resolve_lambdas(backend: str, lambdas: Iterable[float] | None) -> tuple[float, ...]:
    """The λ grid of ``backend``: ``lambdas`` (or the paper's default) for ``"greedy"``,
    ``(0,)`` for ``"greedy-acc"`` and ``(inf,)`` for ``"greedy-cost"``.

    Parameters
    ----------
    backend : {"greedy", "greedy-acc", "greedy-cost"}
    lambdas : iterable of float, optional
        Only with ``"greedy"``. Non-empty, distinct, each ``>= 0`` (``inf`` allowed: least cost
        first); the order is kept, since it decides which λ a set shared by several sequences is
        indexed under.

    Returns
    -------
    tuple of float

    Raises
    ------
    ValueError
        Unknown backend; ``lambdas`` given for a single-sequence variant; an empty, repeated,
        NaN or negative λ (``-inf`` included: it would pick the most expensive feature).
    TypeError
        ``lambdas`` not an iterable of real numbers.

    Examples
    --------
    >>> resolve_lambdas("greedy-cost", None)
    (inf,)
    >>> resolve_lambdas("greedy", [0, 1])
    (0.0, 1.0)
    """
    if backend not in GREEDY_BACKENDS:
        raise ValueError(f"backend must be one of {GREEDY_BACKENDS}, got {backend!r}")
    if backend in _FIXED_GRIDS:
        if lambdas is not None:
            raise ValueError(
                f"backend {backend!r} fixes lambdas to {list(_FIXED_GRIDS[backend])}; "
                f"pass lambdas only with backend='greedy'"
            )
        return _FIXED_GRIDS[backend]
    if lambdas is None:
        return DEFAULT_LAMBDAS
    if isinstance(lambdas, (str, bytes)) or not isinstance(lambdas, Iterable):
        raise TypeError(f"lambdas must be a sequence of real numbers, got {lambdas!r}")
    grid = []
    for lam in lambdas:
        if not is_real(lam):
            raise TypeError(f"lambdas must be real numbers, got {lam!r}")
        lam = float(lam)
        if math.isnan(lam):
            raise ValueError("lambdas contains NaN")
        if lam < 0:
            raise ValueError(
                f"lambdas must be >= 0 (inf allowed), got {lam!r}: a negative λ rewards cost, "
                f"and -inf would add the most expensive feature first"
            )
        grid.append(lam)
    if not grid:
        raise ValueError("lambdas is empty: give at least one λ")
    if len(set(grid)) != len(grid):
        raise ValueError(f"lambdas must be distinct, got {grid}")
    return tuple(grid)


def check_n0(n0, domain: tuple[float, float]) -> float:
    """``n0`` as a float if it is a finite size inside ``domain``, or one clear error.

    Raises
    ------
    TypeError
        ``n0`` missing (``None``) or not a real number.
    ValueError
        NaN, infinite, or outside ``domain``.
    """
    if n0 is None:
        raise TypeError(
            "Greedy backends need n0=<item size>: the single size at which feature costs are "
            "compared while the sequences are built (e.g. the median item size; 1 in the paper's "
            "synthetic setup)"
        )
    if not is_real(n0):
        raise TypeError(f"n0 must be a real number (an item size), got {n0!r}")
    n0 = float(n0)
    if not math.isfinite(n0):
        raise ValueError(f"n0 must be finite, got {n0!r}")
    lo, hi = domain
    if not lo <= n0 <= hi:
        raise ValueError(f"n0 = {n0!r} is outside the domain [{lo}, {hi}]")
    return n0
