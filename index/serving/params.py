"""What an index's anytime walks read about feature costs, as one typed record.

A classifier's fit measures, per feature, how a serving call's time compares with the fitted
cost curve; the walks read it back from ``index.params`` (:meth:`CostSensitiveIndex.cost_guards
<polydom.index.protocol.CostSensitiveIndex.cost_guards>`, ``cost_laws``, ``start_cap``).
:class:`ServingParams` is that record with its meaning in the names: a *guard ratio* is a factor
``>= 1`` on a predicted cost, taken at the *guard quantile* of measured over predicted times
(``Serving(guard=q)``'s ``q`` where the user asked for a per-start cap). The stored keys and their
format are those indexes have always been saved with, so older indexes read the same.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["ServingParams"]


@dataclass(frozen=True)
class ServingParams:
    """The cost measurements an index's walks read, per item in index order.

    Attributes
    ----------
    guard_ratios : tuple of float
        Each item's guard: a ratio ``>= 1`` on its predicted cost, the :attr:`guard_quantile` of
        measured over predicted serving times.
    guard_quantile : float
        The quantile (in ``(0, 1)``) the ratios were taken at.
    learn_guards : bool
        Whether a server learns its own guards from its requests, at the same quantile.
    guard_sizes, guard_rows : tuple
        Per-size guard ratios: sizes ascending, one row per size (empty: one ratio per item).
    laws, law_sizes, law_rows : tuple
        Each item's law of a serving call's time over its predicted cost (ascending quantiles,
        or None for an item without one), over all sizes and per size.
    start_cap : bool
        Whether each start is capped by its guard (``Serving(guard=...)`` given).
    """

    guard_ratios: tuple
    guard_quantile: float
    learn_guards: bool = True
    guard_sizes: tuple = ()
    guard_rows: tuple = ()
    laws: tuple = ()
    law_sizes: tuple = ()
    law_rows: tuple = ()
    start_cap: bool = False

    def __post_init__(self):
        self.check()

    def check(self) -> None:
        """The invariants: ratios finite and ``>= 1``, a quantile in ``(0, 1)``, one row per size
        (sizes ascending) of as many items as the ratios, laws ascending and ``>= 0``.

        Raises
        ------
        ValueError
            Naming the field that breaks one.
        """
        n = len(self.guard_ratios)
        if not all(isinstance(g, (int, float)) and math.isfinite(g) and g >= 1.0 for g in self.guard_ratios):
            raise ValueError(f"guard_ratios must be finite ratios >= 1, got {self.guard_ratios!r}")
        if not 0.0 < self.guard_quantile < 1.0:
            raise ValueError(f"guard_quantile must lie in (0, 1), got {self.guard_quantile!r}")
        for sizes, rows, what in ((self.guard_sizes, self.guard_rows, "guard"), (self.law_sizes, self.law_rows, "law")):
            if len(rows) != len(sizes) or list(sizes) != sorted(sizes) or any(len(row) != n for row in rows):
                raise ValueError(f"{what}_rows must hold one row of {n} items per size of {what}_sizes (ascending)")
        for row in self.guard_rows:
            if not all(math.isfinite(g) and g >= 1.0 for g in row):
                raise ValueError(f"guard_rows must hold finite ratios >= 1, got {row!r}")
        if self.laws and len(self.laws) != n:
            raise ValueError(f"laws must hold one law (or None) per item: {n}, got {len(self.laws)}")
        for law in (*self.laws, *(law for row in self.law_rows for law in row)):
            if law is not None and (any(q < 0 for q in law) or list(law) != sorted(law)):
                raise ValueError(f"a law must hold ascending quantiles >= 0, got {law!r}")

    @classmethod
    def from_tables(cls, guard_ratios: Sequence[float], guard_quantile: float, *, learn_guards: bool,
                    guard_table: Mapping, law_table: Mapping, start_cap: bool) -> "ServingParams":
        """The record from the calibration's tables (:func:`polydom.costs.calibration.guard_table`
        and ``law_table``, in their stored form)."""
        def rows(table, key):
            return tuple(tuple(row) for row in table.get(key, ()))

        def law(value):
            return None if value is None else tuple(float(q) for q in value)

        return cls(
            guard_ratios=tuple(float(g) for g in guard_ratios), guard_quantile=float(guard_quantile),
            learn_guards=bool(learn_guards),
            guard_sizes=tuple(float(n) for n in guard_table.get("cost_guard_sizes", ())),
            guard_rows=tuple(tuple(float(g) for g in row) for row in rows(guard_table, "cost_guard_by_size")),
            laws=tuple(law(v) for v in (law_table.get("cost_law") or ())),
            law_sizes=tuple(float(n) for n in law_table.get("cost_law_sizes", ())),
            law_rows=tuple(tuple(law(v) for v in row) for row in rows(law_table, "cost_law_by_size")),
            start_cap=bool(start_cap),
        )

    def to_params(self) -> dict:
        """The index params a walk reads (the format indexes are saved with)."""
        # In the order fits have always stored them.
        out = {
            "cost_guard": list(self.guard_ratios),
            # A server learns its guards at the quantile the fit's ratios were taken at.
            "cost_guard_quantile": self.guard_quantile if self.learn_guards else None,
        }
        if self.guard_sizes:
            out["cost_guard_sizes"] = list(self.guard_sizes)
            out["cost_guard_by_size"] = [list(row) for row in self.guard_rows]
        if self.laws:
            out["cost_law"] = [None if law is None else list(law) for law in self.laws]
            if self.law_sizes:
                out["cost_law_sizes"] = list(self.law_sizes)
                out["cost_law_by_size"] = [[None if law is None else list(law) for law in row]
                                           for row in self.law_rows]
        out["start_cap"] = self.start_cap
        return out
