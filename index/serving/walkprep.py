"""What an anytime walk reads of an index, prepared once per index version, and the room scan.

A walk asks the same questions of the same index many times: each feature's predicted cost and
guard at the item's size, the candidate id of a set, which sets still have room. This module
keeps the answers that do not change between walks (:class:`_Prepared`), prices a set's room
(:class:`_Need`) and finds the most accurate set that still has room (:func:`_best_with_room`).
Per item size it also keeps the walks' traces (:mod:`polydom.index.serving.walktrace`).
"""

from __future__ import annotations

import operator
from bisect import bisect_right
from statistics import NormalDist
from typing import NamedTuple

from polydom.index.serving.params import DEFAULT_GUARD_QUANTILE  # noqa: F401 - read from here too

#: The standard normal law, built once (a walk reads it at every stake).
_NORMAL = NormalDist()


def _guard_z(quantile: float) -> float:
    """The standard normal quantile of a guard quantile (the log-normal fallback's scale)."""
    return _NORMAL.inv_cdf(min(max(quantile, 0.5 + 1e-9), 1.0 - 1e-9))


class _AtSize(NamedTuple):
    """What a walk reads of an index at one item size, prepared at the size's first walk."""

    costs: list  # each feature's predicted cost
    guards: tuple  # the fit's guards
    laws: tuple | None  # the cost laws
    totals: dict  # a set's total predicted cost, as walks met them
    needs: dict  # per guards (the fit's or none), a set's need from what is computed
    traces: dict  # (budget, guarded, price) -> the walks' trace (polydom.index.serving.walktrace)


class _Prepared:
    """What a walk reads of an index that does not change between walks, prepared once per index
    version: the candidate id of each mask, the guards' normal quantile, whether starts are
    capped, the cost laws' table; and per item size (up to :data:`_SIZES_KEPT` of them) the
    features' predicted costs, the fit's guards and the laws there. So a walk's own bookkeeping
    is its decisions, not reading params (``docs/decisions/walk-bookkeeping.md``)."""

    __slots__ = ("key", "position", "z", "start_cap", "ones", "serving", "by_size", "traced", "containing", "rank")

    def __init__(self, index, key):
        self.key = key
        self.position = {m: i for i, m in enumerate(index.candidates)}
        # Per feature, the ranked prefixes that hold it, most accurate first (_best_computed_adding).
        ranked = index.ranked_prefixes
        self.containing = tuple(tuple(item for item in ranked if item[0] >> i & 1) for i in range(len(index.costs)))
        # Each ranked prefix's place in the ranking and its accuracy (ties go to the earlier place).
        self.rank = {mask: (place, acc) for place, (mask, acc) in enumerate(ranked)}
        self.serving = serving = index.serving_params
        self.z = _guard_z(serving.guard_quantile)
        self.start_cap = serving.start_cap
        self.ones = (1.0,) * len(index.costs)
        self.by_size: dict = {}
        self.traced = 0  # traces made since the last time all were dropped (polydom.index.serving.anytime)

    def at(self, index, size: float) -> _AtSize:
        """What a walk reads at ``size`` (:class:`_AtSize`), prepared at the size's first walk."""
        found = self.by_size.get(size)
        if found is None:
            if len(self.by_size) >= _SIZES_KEPT:
                self.by_size.clear()
            found = self.by_size[size] = _AtSize([curve(size) for curve in index.costs], self.serving.guards_at(size),
                                                 self.serving.laws_at(size), {}, {}, {})
        return found


#: Item sizes whose costs a prepared index keeps (natural images each have a size of their own:
#: the table is cleared when full rather than grown without bound).
_SIZES_KEPT = 1024


def prepared(index) -> _Prepared:
    """The :class:`_Prepared` of ``index``, made at its first walk and kept on it while its
    params, costs and candidates stay the same objects (a refresh replaces them)."""
    # What a walk reads, by identity: a serving record read anew (a refresh set new guards)
    # makes the walk prepare the index again.
    key = (index.params, index.serving_params, index.costs, index.candidates)
    prep = index.__dict__.get("_walk_prepared")
    if prep is None or not all(map(operator.is_, prep.key, key)):
        prep = _Prepared(index, key)
        index.__dict__["_walk_prepared"] = prep
    return prep


class _Need:
    """Seconds a walk must have left to finish a set from what is computed: the uncomputed
    features' predicted costs, plus room for the last one started to take its guard's share
    (the largest ``(guard - 1) * cost`` among them; 0 with guards of 1)."""

    def __init__(self, cost, guards, totals=None, needs=None):
        self.cost = cost
        self.share = [(g - 1.0) * c for g, c in zip(guards, cost)]
        self.least_share = min(0.0, *self.share)  # a learned guard below 1 makes a share negative
        self.totals = {} if totals is None else totals  # mask -> total, kept per item size
        self.needs = {} if needs is None else needs  # uncomputed mask -> need, per size and guards

    def total(self, mask: int) -> float:
        """The predicted cost of every feature of ``mask``, computed or not."""
        found = self.totals.get(mask)
        if found is None:
            found = self.totals[mask] = self._total(mask)
        return found

    def _total(self, mask: int) -> float:
        total = 0.0
        while mask:
            low = mask & -mask
            total += self.cost[low.bit_length() - 1]
            mask ^= low
        return total

    def __call__(self, mask: int, computed: int) -> float:
        rest = mask & ~computed
        found = self.needs.get(rest)
        if found is None:
            found = self.needs[rest] = self._need(rest)
        return found

    def _need(self, rest: int) -> float:
        # The lowest bit first (ascending feature index), without building a tuple.
        bits = []
        while rest:
            low = rest & -rest
            bits.append(low.bit_length() - 1)
            rest ^= low
        if not bits:
            return 0.0
        # sum() as before: its rounding (compensated from Python 3.12 on) decides exact fits.
        return sum(map(self.cost.__getitem__, bits)) + max(map(self.share.__getitem__, bits))


def _best_with_room(index, size: float, computed: int, remaining: float, need, beats,
                    floor: float | None = None) -> int | None:
    """The most accurate servable set at ``size`` with ``beats(candidate id, accuracy)`` that can
    still be finished in ``remaining`` (:class:`_Need`); None if there is none. The retarget
    (beats what is computed), the upgrade (beats the target by more than the tie tolerance) and
    the first target (any set) are this one scan of the skyline. ``floor``: ``beats`` holds only
    above this accuracy, so the scan stops where the skyline falls to it."""
    ids = index.skyline_ids_at(size)
    accuracy = index.candidate_accuracy
    if floor is not None:
        # A skyline's accuracies strictly ascend: the sets at or below the floor are cut off.
        ids = ids[bisect_right(ids, floor, key=accuracy.__getitem__):]
        if not ids:
            return None
    # Costs ascend along the skyline too, and a set needs at least its cost less all that is
    # computed (less the most negative guard share): when even the cheapest set left is dearer
    # than that reach, none has room (the walk asks this after every feature; usually none has).
    # The margin keeps rounding from skipping a set that fits exactly.
    reach = (remaining + need.total(computed) - need.least_share) * (1.0 + 1e-9) + 1e-12
    if need.total(index.candidates[ids[0]]) > reach:
        return None
    # A skyline's accuracies strictly ascend, so the first match from the top is the best.
    for c in reversed(ids):
        if beats(c, accuracy[c]):
            needed = need(index.candidates[c], computed)
            if needed <= remaining:
                return index.candidates[c]
            if needed > 2.0 * remaining:
                break  # far out of reach: a bisection pays
    else:
        return None
    # The sets dearer than the reach are skipped.
    top = bisect_right(ids, reach, hi=ids.index(c), key=lambda other: need.total(index.candidates[other]))
    for c in reversed(ids[:top]):
        if beats(c, index.candidate_accuracy[c]) and need(index.candidates[c], computed) <= remaining:
            return index.candidates[c]
    return None

