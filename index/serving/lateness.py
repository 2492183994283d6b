"""A late-share budget: a price of lateness that a server adjusts so that its late answers stay
near a share the user sets.

A walk weighs each start by the accuracy it expects on time (:mod:`polydom.index.serving.anytime`):
start when ``p * a(target) > a(served)``, ``p`` the chance the start finishes in time. That rule
maximises on-time accuracy, whatever share of answers it makes late. A service with a service
level (at most 2% of answers late, say) asks for a late-share budget instead. The walk then
charges a late answer a price ``lam`` on top of its being wrong, and starts when

    p * a(target) - lam * (1 - p) > a(served).

``lam`` is a Lagrange multiplier for the constraint "late share <= s": :class:`LatePrice`
raises it after every late answer and lowers it after every answer on time,

    lam <- max(0, lam + rate * (late - s)),

so that where answers come late more often than ``s`` the price climbs until the walk refuses
the riskiest starts, and where they come late less often it falls back to 0 (the plain rule).
Each cell of (size band, budget band) keeps its own price: a tight budget on large images gets
starts on a share of its items instead of none, and a generous budget pays nothing for a tight
one's risk.

How fast it adapts: one late answer raises the price by ``rate * (1 - s)``; it takes
``1 / (rate * s)`` answers on time to lower it by 1 (at the defaults, ``rate`` 0.5 and ``s``
0.02: a late answer adds 0.49, and 100 answers on time take a price of 1 back to 0). A price of
1 already asks a start to finish with chance ``(a(served) + 1) / (a(target) + 1)``: 0.58 where
the target gives 0.9 and the fall-back 0.1.
"""

from __future__ import annotations

import math
import threading

__all__ = ["LatePrice"]


class LatePrice:
    """The price of a late answer per cell of (size band, budget band), adjusted from the
    answers served so that each cell's late share tends to ``share``.

    Parameters
    ----------
    share : float in (0, 1)
        The late share to hold.
    rate : float, default 0.5
        The step of the price per answer (module docstring: how fast it adapts).
    bands_per_octave : int, default 2
        Sizes and budgets within a factor ``2 ** (1 / bands_per_octave)`` share a cell.

    Invariant (checked by :meth:`check`): every price is finite and >= 0.
    """

    def __init__(self, share: float, rate: float = 0.5, bands_per_octave: int = 2):
        if not 0.0 < share < 1.0:
            raise ValueError(f"share must be in (0, 1), got {share!r}")
        if not rate > 0.0:
            raise ValueError(f"rate must be > 0, got {rate!r}")
        self.share, self.rate, self.bands = float(share), float(rate), int(bands_per_octave)
        self._prices: dict[tuple[int, int], float] = {}
        self._counts: dict[tuple[int, int], list[int]] = {}
        self._lock = threading.Lock()

    def _cell(self, size: float, budget: float) -> tuple[int, int]:
        band = lambda x: round(math.log2(x) * self.bands) if x > 0 else -10**6  # noqa: E731
        return band(size), band(budget)

    def price(self, size: float, budget: float) -> float:
        """The price of a late answer for an item of ``size`` at ``budget`` (0 with no limit)."""
        if not math.isfinite(budget):
            return 0.0
        return self._prices.get(self._cell(size, budget), 0.0)

    def observe(self, size: float, budget: float, late: bool) -> None:
        """Adjust the cell's price by one answer, ``late`` or on time."""
        if not math.isfinite(budget):
            return
        cell = self._cell(size, budget)
        with self._lock:
            self._prices[cell] = max(0.0, self._prices.get(cell, 0.0) + self.rate * (float(late) - self.share))
            counts = self._counts.setdefault(cell, [0, 0])
            counts[0] += 1
            counts[1] += bool(late)

    def late_shares(self) -> dict:
        """Per cell ``(size band, budget band)``: ``(answers, late share)`` observed so far."""
        with self._lock:
            return {cell: (n, late / n) for cell, (n, late) in self._counts.items() if n}

    def check(self) -> None:
        """Assert the invariant."""
        assert all(math.isfinite(p) and p >= 0.0 for p in self._prices.values()), self._prices
