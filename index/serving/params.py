"""What an index's anytime walks read about feature costs, as one typed record.

A classifier's fit measures, per feature, how a serving call's time compares with the fitted
cost curve, and hands the build a :class:`ServingParams` (``polydom.build(..., serving=...)``).
The walks, the planner and the reader read the same record back
(:attr:`CostSensitiveIndex.serving_params <polydom.index.protocol.CostSensitiveIndex.serving_params>`).
Its names carry their meaning: a *guard ratio* is a factor ``>= 1`` on a predicted cost, taken at
the *guard quantile* of measured over predicted times (``Serving(guard=q)``'s ``q`` where the user
asked for a per-start cap). Only this module knows the stored keys (:meth:`ServingParams.to_params`,
:meth:`ServingParams.from_params`); they and their format are those indexes have always been
saved with, so older indexes read the same.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["DEFAULT_GUARD_QUANTILE", "ServingParams", "law_row"]

#: The share of measured calls a guarded start covers -- one minus the late share a start may
#: risk: the classifier's guards are taken at it (:mod:`polydom.costs.calibration`), and a walk reads an
#: index's guards as it when the index states none. ``docs/decisions/start-rule.md`` has the evidence.
DEFAULT_GUARD_QUANTILE = 0.9

#: The stored keys a walk reads, in the order fits have always stored them.
SERVING_KEYS = ("cost_guard", "cost_guard_quantile", "cost_guard_sizes", "cost_guard_by_size", "cost_law",
                "cost_law_sizes", "cost_law_by_size", "start_cap")


@dataclass(frozen=True)
class ServingParams:
    """The cost measurements an index's walks read, per item in index order.

    Attributes
    ----------
    guard_ratios : tuple of float
        Each item's guard: a ratio ``>= 1`` on its predicted cost, the :attr:`guard_quantile` of
        measured over predicted serving times.
    guard_quantile : float
        The quantile (in ``[0.5, 1]``) the ratios were taken at.
    learn_guards : bool
        Whether a server learns its own guards from its requests, at the same quantile (never
        where the index has no guards).
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
    #: Per item size, the guard ratios there (:meth:`guards_at`), as walks asked for them.
    _at: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self):
        self.check()

    def check(self) -> None:
        """The invariants: ratios finite and ``>= 1``, a quantile in ``[0.5, 1]``, one row per size
        (sizes ascending) of as many items as the ratios, laws ascending and ``>= 0``.

        Raises
        ------
        ValueError
            Naming the field that breaks one.
        """
        n = len(self.guard_ratios)
        if not all(map(_fine_ratio, self.guard_ratios)):
            raise ValueError(f"guard_ratios must be finite ratios >= 1, got {self.guard_ratios!r}")
        if not 0.5 <= self.guard_quantile <= 1.0:
            raise ValueError(f"guard_quantile must lie in [0.5, 1], got {self.guard_quantile!r}")
        for sizes, rows, what in ((self.guard_sizes, self.guard_rows, "guard"), (self.law_sizes, self.law_rows, "law")):
            if len(rows) != len(sizes) or list(sizes) != sorted(sizes) or any(len(row) != n for row in rows):
                raise ValueError(f"{what}_rows must hold one row of {n} items per size of {what}_sizes (ascending)")
        for row in self.guard_rows:
            if not all(map(_fine_ratio, row)):
                raise ValueError(f"guard_rows must hold finite ratios >= 1, got {row!r}")
        if self.laws and len(self.laws) != n:
            raise ValueError(f"laws must hold one law (or None) per item: {n}, got {len(self.laws)}")
        for law in (*self.laws, *(law for row in self.law_rows for law in row)):
            if law is not None and not _fine_law(law):
                raise ValueError(f"a law must hold two or more ascending finite quantiles >= 0, got {law!r}")

    def guards_at(self, size: float | None = None) -> tuple[float, ...]:
        """Each item's guard ratio at ``size``: that of the nearest calibrated size, the larger of
        two between two, the last beyond the largest; :attr:`guard_ratios` without ``size`` or
        without per-size rows."""
        found = self._at.get(size)
        if found is None:
            if len(self._at) >= 1024:  # natural images each have a size: bounded, not grown
                self._at.clear()
            found = self._at[size] = self._guards_at(size)
        return found

    def _guards_at(self, size):
        sizes, rows = self.guard_sizes, self.guard_rows
        if size is None or not sizes:
            return self.guard_ratios
        at = bisect_left(sizes, size)
        if at < len(sizes) and sizes[at] == size or at == 0:
            return rows[at]
        if at == len(sizes):
            return rows[-1]
        return tuple(max(a, b) for a, b in zip(rows[at - 1], rows[at]))  # between two: the larger

    def laws_at(self, size: float | None = None) -> tuple | None:
        """Each item's cost law at ``size`` (that of the size or the next larger calibrated one,
        the last beyond the largest); the laws over all sizes without ``size``; None where the
        index has none."""
        if not self.laws:
            return None
        if size is None or not self.law_sizes:
            return self.laws
        return law_row(self.law_sizes, self.law_rows, size)

    @classmethod
    def from_params(cls, params: Mapping, count: int) -> "ServingParams":
        """The record of an index's stored ``params`` for ``count`` items. Keys an older index
        lacks take the values it was served with: no guards (ratios of 1, nothing learned), the
        default quantile, each start capped.

        Raises
        ------
        ValueError
            Naming the stored key that is malformed.
        """
        guards = params.get("cost_guard")
        quantile = params.get("cost_guard_quantile", DEFAULT_GUARD_QUANTILE)
        if quantile is not None and (isinstance(quantile, bool) or not isinstance(quantile, (int, float))
                                     or not 0.5 <= quantile <= 1.0):
            raise ValueError(f"params['cost_guard_quantile'] must be null or a number in [0.5, 1], got {quantile!r:.80}")
        sizes, rows = (), ()
        if guards:
            guards = _ratios(guards, count, "params['cost_guard']")
            sizes, rows = _rows(params, "cost_guard", count)
            rows = tuple(_ratios(row, count, "params['cost_guard_by_size']") for row in rows)
        laws, law_sizes, law_rows = _stored_laws(params, count)
        return cls(guard_ratios=guards or (1.0,) * count,
                   guard_quantile=float(DEFAULT_GUARD_QUANTILE if quantile is None else quantile),
                   learn_guards=bool(guards) and quantile is not None, guard_sizes=sizes, guard_rows=rows,
                   laws=laws, law_sizes=law_sizes, law_rows=law_rows, start_cap=bool(params.get("start_cap", True)))

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


def law_row(sizes, rows, size: float):
    """The row of ``rows`` (one per calibrated size, ``sizes`` ascending) that serves ``size``: that
    of the size itself or of the next larger one, the last beyond the largest."""
    return rows[min(bisect_left(sizes, size), len(rows) - 1)]


def _fine_law(law) -> bool:
    return (isinstance(law, (list, tuple)) and len(law) >= 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
                    for v in law)
            and all(a <= b for a, b in zip(law, law[1:])))


def _fine_ratio(g) -> bool:
    return isinstance(g, (int, float)) and not isinstance(g, bool) and math.isfinite(g) and g >= 1.0


def _ratios(values, count: int, where: str) -> tuple:
    """One finite number >= 1 per item, as floats, or a clear error naming ``where``."""
    if not isinstance(values, (list, tuple)) or len(values) != count or not all(map(_fine_ratio, values)):
        raise ValueError(f"{where} must hold one number >= 1 per feature, got {values!r:.120}")
    return tuple(float(g) for g in values)


def _rows(params: Mapping, what: str, count: int) -> tuple[tuple, tuple]:
    """``(sizes, rows)`` of the per-size table ``{what}_sizes`` / ``{what}_by_size``: finite sizes
    ascending, one row per size; empty where the params hold none."""
    sizes, rows = params.get(f"{what}_sizes"), params.get(f"{what}_by_size")
    if not sizes:
        return (), ()
    if not isinstance(sizes, (list, tuple)) or not all(
            isinstance(n, (int, float)) and not isinstance(n, bool) and math.isfinite(n) for n in sizes):
        raise ValueError(f"params['{what}_sizes'] must be a list of finite sizes, got {sizes!r:.80}")
    if not isinstance(rows, (list, tuple)) or len(rows) != len(sizes) or list(sizes) != sorted(sizes):
        raise ValueError(f"params['{what}_by_size'] must hold one row per size of params['{what}_sizes'] "
                         f"(ascending), got {sizes!r:.80} and {rows!r:.80}")
    return tuple(float(n) for n in sizes), tuple(rows)


def _stored_laws(params: Mapping, count: int) -> tuple[tuple, tuple, tuple]:
    """``(laws, law sizes, law rows)`` of the stored params; empty where they hold none."""
    def row(laws) -> tuple:
        if not isinstance(laws, (list, tuple)) or len(laws) != count or not all(
                law is None or _fine_law(law) for law in laws):
            raise ValueError(f"params['cost_law'] must hold one law (ascending quantiles >= 0) or null per "
                             f"feature, got {laws!r:.120}")
        return tuple(None if law is None else tuple(float(q) for q in law) for law in laws)

    laws = params.get("cost_law")
    if not laws:
        return (), (), ()
    sizes, rows = _rows(params, "cost_law", count)
    return row(laws), sizes, tuple(row(r) for r in rows)
