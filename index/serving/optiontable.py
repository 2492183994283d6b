"""The options a batch plan chooses among: every item's servable sets at its own size, and the
upper convex hull of each item's (cost, accuracy) options that the greedy solver walks.

Split from :mod:`polydom.index.serving.planning` so that gathering options and solving are separate jobs.

Plans over a million items are a realistic nightly job, so nothing here runs per item in Python:
the options of all distinct sizes come from per-index tables built once (:func:`option_source`),
evaluated with numpy, and the hull runs over all items at once. Every result is bit-identical to
gathering with one ``options_at`` call per size (``option_table(..., per_size=True)``).
"""

from __future__ import annotations

import math
import weakref
from bisect import bisect_right
from dataclasses import dataclass
from operator import is_

import numpy as np

from polydom.index.costs.curve import set_cost_matrix
from polydom.index.queries import as_real, check_queries

__all__ = ["OptionTable", "option_table", "options_many", "options_per_size", "option_source", "SkylineOptions",
           "FixedOptions", "upper_hull", "hull_columns", "hull_steps"]


@dataclass(frozen=True)
class OptionTable:
    """Each item's options at its size, padded to a common width.

    Attributes
    ----------
    sizes : ndarray of float, shape (N,)
    masks : ndarray of int64, shape (N, M)
        Feature-set bitmasks; ``-1`` past an item's count.
    costs : ndarray of float, shape (N, M)
        Predicted cost at the item's size; ``inf`` past the count.
    accuracy : ndarray of float, shape (N, M)
        The accuracy a plan maximises (the index's, or the caller's overrides); ``nan`` past
        the count.
    counts : ndarray of intp, shape (N,)
        Options per item, each ``>= 1``.

    Invariant (:meth:`check_invariants`): in every row the first ``counts[i]`` entries are
    finite, costs ``>= 0`` and ascending, equal costs ordered by accuracy descending; padding
    fills the rest.
    """

    sizes: np.ndarray
    masks: np.ndarray
    costs: np.ndarray
    accuracy: np.ndarray
    counts: np.ndarray

    def __len__(self) -> int:
        return len(self.counts)

    @property
    def valid(self) -> np.ndarray:
        """Boolean (N, M): which entries are options rather than padding."""
        return np.arange(self.costs.shape[1]) < self.counts[:, None]

    def check_invariants(self) -> None:
        """Assert the invariant stated in the class docstring."""
        valid = self.valid
        assert (self.counts >= 1).all(), "every item has an option"
        assert np.isfinite(self.costs[valid]).all() and (self.costs[valid] >= 0).all()
        assert np.isfinite(self.accuracy[valid]).all()
        assert np.isinf(self.costs[~valid]).all() and (self.masks[~valid] == -1).all()
        both = valid[:, 1:]
        with np.errstate(invalid="ignore"):  # the padding's inf - inf and NaN: not compared
            dc = np.diff(self.costs, axis=1)
            da = np.diff(self.accuracy, axis=1)
        assert (dc[both] >= 0).all(), "costs ascend"
        tie = both & (dc == 0)
        assert (da[tie] <= 0).all(), "equal costs: accuracy descends"


def option_table(index, sizes, *, max_item_budget: float | None = None, accuracy=None,
                 per_size: bool = False) -> OptionTable:
    """Every item's options at its size, gathered for all distinct sizes at once (:func:`options_many`).

    Parameters
    ----------
    index : CostSensitiveIndex
    sizes : array-like of float, shape (N,)
        Item sizes, inside the index's domain.
    max_item_budget : float, optional
        Options costing more than this at the item's size are dropped.
    accuracy : array-like of shape (N, M), sequence of N sequences, or callable, optional
        Per-item accuracy overrides, see :func:`plan_batch`.
    per_size : bool, default False
        Gather with one :meth:`options_at` call per distinct size instead (:func:`options_per_size`):
        the reference the vectorised gathering is tested and benchmarked against. The table is
        the same either way.

    Returns
    -------
    OptionTable

    Raises
    ------
    ValueError, TypeError
        Invalid sizes (naming the position), a negative or NaN cap, an item left without an
        option under the cap, overrides of the wrong shape or outside ``[0, 1]``.
    """
    try:  # the contract's parts this reads (a CostSensitiveIndex, or a proxy of one)
        index.options_at, index.domain, index.option_kind
    except AttributeError:
        raise TypeError(f"index must be a polydom index (a CostSensitiveIndex), got {type(index).__name__}") from None
    sizes, _ = check_queries(sizes, 0.0, index.domain)
    cap = _check_cap(max_item_budget)
    if len(sizes):
        lo, hi = index.measured_range()
        outside = (sizes < lo) | (sizes > hi)
        if outside.any():
            index._outside_measured(float(sizes[np.argmax(outside)]))  # the index's own policy: warn, raise or allow
    unique, inverse = np.unique(sizes, return_inverse=True)
    masks, costs, acc, counts = (options_per_size if per_size else options_many)(index, unique)
    width = masks.shape[1]
    if len(unique) < len(sizes) or len(unique) and (np.diff(inverse) != 1).any():
        masks, costs, acc, counts = masks[inverse], costs[inverse], acc[inverse], counts[inverse]
    if accuracy is not None:
        acc = _overrides(accuracy, masks, counts)
    keep = np.arange(width) < counts[:, None]
    if cap is None:
        return _packed(sizes, masks, costs, acc, keep, counts)
    keep &= costs <= cap
    empty = ~keep.any(axis=1)
    if empty.any():
        i = int(np.argmax(empty))
        raise ValueError(
            f"no option of item {i} (size {float(sizes[i])!r}) costs at most max_item_budget={cap!r}; "
            f"its cheapest costs {float(costs[i, 0])!r}"
        )
    return _packed(sizes, masks, costs, acc, keep)


# --------------------------------------------------------------------------- gathering options


def options_many(index, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``index.options_at(s)`` for every ``s`` of ``sizes``, as padded arrays, computed at once.

    Row ``i`` holds exactly what ``options_at(sizes[i])`` lists, in its order, with bit-identical
    costs (the same Horner steps in float64). A PolyDom index gathers each size's skyline from
    per-range tables; an index with ``option_sets()`` (Greedy: the same sets at every size) has
    their cost matrix evaluated and each row sorted as its ``options_at`` sorts. Any other index
    falls back to :func:`options_per_size`.

    Parameters
    ----------
    index : CostSensitiveIndex
    sizes : ndarray of float, shape (N,)
        Already validated (inside the domain).

    Returns
    -------
    masks : ndarray of int64, shape (N, M)
        ``-1`` past a row's count; ``M`` is the largest count (1 for no sizes).
    costs : ndarray of float, shape (N, M)
        ``inf`` past the count.
    accuracy : ndarray of float, shape (N, M)
        ``nan`` past the count.
    counts : ndarray of intp, shape (N,)
    """
    source = option_source(index)
    if source is None:
        return options_per_size(index, sizes)
    return source.many(np.asarray(sizes, dtype=float))


def options_per_size(index, sizes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`options_many` by one ``index.options_at`` call per size: slow, for any index."""
    rows = [index.options_at(float(s)) for s in sizes]
    width = max((len(r[0]) for r in rows), default=1)
    masks = np.full((len(rows), width), -1, dtype=np.int64)
    costs = np.full((len(rows), width), np.inf)
    acc = np.full((len(rows), width), np.nan)
    counts = np.empty(len(rows), dtype=np.intp)
    for u, (m, c, a) in enumerate(rows):
        k = counts[u] = len(m)
        masks[u, :k], costs[u, :k], acc[u, :k] = m, c, a
    return masks, costs, acc, counts


def option_source(index):
    """The precomputed option tables of ``index`` (:class:`SkylineOptions` or :class:`FixedOptions`),
    or None for an index of another kind.

    Built once per index and kept while the index's state is the same objects: a refresh (which
    replaces them) or another index gets new tables.
    """
    kind = {"skyline": SkylineOptions, "fixed": FixedOptions}.get(index.option_kind)
    if kind is None:
        return None
    try:
        cached = _SOURCES.get(index)
    except TypeError:  # not weakly referenceable: build every time
        cached = None
    if type(cached) is kind and cached.current(index):
        return cached
    source = kind(index, kind.state(index))
    try:
        _SOURCES[index] = source
    except TypeError:
        pass
    return source


_SOURCES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _horner_columns(plane, degrees: int, x: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Polynomials at ``x`` (shape (N,)) by Horner's rule from ``0.0`` -- the steps of
    :func:`~polydom.index.costs.poly.horner_scalar`, so bit-identical. ``plane(k)`` gives the degree-``k``
    coefficients, of shape ``shape`` = (N, M) or broadcastable to it, one degree at a time (all
    of them gathered at once would hold ``degrees`` more (N, M) arrays)."""
    x = x[:, None]
    out = np.zeros(shape)
    for k in range(degrees - 1, -1, -1):
        out *= x
        out += plane(k)
    return out


class _Source:
    """What both kinds of option tables share: the index state they were built from."""

    key: tuple
    #: mask -> feature names, filled by callers that decode masks (the index's space is in ``key``).
    names: dict

    @staticmethod
    def state(index) -> tuple:
        raise NotImplementedError

    def current(self, index) -> bool:
        """Whether ``index`` still holds the state these tables were built from (a refresh replaces it)."""
        return all(map(is_, self.key, self.state(index)))


class SkylineOptions(_Source):
    """A PolyDom index's options: the skyline of the range holding each size.

    Per range ``r`` (of ``bounds``) its entries' masks, accuracies and cost coefficients, padded
    to the longest skyline; and the same as Python lists for one size at a time (:meth:`one`).
    """

    @staticmethod
    def state(index) -> tuple:
        """The index's attributes these tables are built from (compared by identity)."""
        return (index.bounds, index.skylines, index.candidate_coefficients, index.candidates,
                index.candidate_accuracy, index.space)

    def __init__(self, index, key: tuple):
        bounds, skylines, coef, candidates, accuracy, _ = self.key = key
        self.names: dict[int, frozenset] = {}  # mask -> feature names, filled by callers that decode masks
        longest = max((len(s) for s in skylines), default=1) or 1
        self.bounds = np.asarray(bounds, dtype=float)
        self.counts = np.array([len(s) for s in skylines], dtype=np.intp)
        self.masks = np.full((len(skylines), longest), -1, dtype=np.int64)
        self.accuracy = np.full((len(skylines), longest), np.nan)
        self.coef = np.zeros((coef.shape[1], len(skylines), longest))
        cand, acc = np.asarray(candidates, dtype=np.int64), np.asarray(accuracy, dtype=float)
        for r, sky in enumerate(skylines):
            self.masks[r, : len(sky)] = cand[sky]
            self.accuracy[r, : len(sky)] = acc[sky]
            self.coef[:, r, : len(sky)] = coef[sky].T
        # One size at a time: plain floats and lists, Horner rows highest degree first.
        rows = [tuple(reversed(row)) for row in coef.tolist()]
        self._bounds = list(bounds)
        self._rows = [[rows[c] for c in sky] for sky in skylines]
        self._masks = [[candidates[c] for c in sky] for sky in skylines]
        self._accuracy = [[accuracy[c] for c in sky] for sky in skylines]

    def many(self, sizes: np.ndarray):
        """See :func:`options_many`."""
        # bisect_right - 1, as ``skyline_ids_at`` finds the range.
        r = np.searchsorted(self.bounds, sizes, side="right") - 1
        counts = self.counts[r]
        width = max(int(counts.max()), 1) if len(sizes) else 1
        valid = np.arange(width) < counts[:, None]
        costs = _horner_columns(lambda k: self.coef[k][r, :width], self.coef.shape[0], sizes, (len(sizes), width))
        costs[~valid] = np.inf
        return self.masks[r, :width], costs, self.accuracy[r, :width], counts

    def one(self, size: float) -> tuple[list[int], list[float], list[float]]:
        """``options_at(size)`` for a validated ``size``, in plain Python (no numpy call)."""
        r = bisect_right(self._bounds, size) - 1
        costs = []
        for row in self._rows[r]:
            c = 0.0  # poly.horner_scalar, inlined: one call per option
            for a in row:
                c = c * size + a
            costs.append(c)
        return self._masks[r], costs, self._accuracy[r]


class FixedOptions(_Source):
    """The options of an index that lists the same sets at every size (Greedy's prefixes), ordered
    at each size by cost there, then accuracy descending, then mask.

    The index supplies ``option_sets() -> (masks, accuracies)``; the sets' cost polynomials are
    summed as the index's ``cost_of`` sums them (:func:`set_cost_matrix`).
    """

    @staticmethod
    def state(index) -> tuple:
        """The index's attributes these tables are built from (compared by identity): Greedy's
        sequences and accuracies, which ``option_sets`` reads, and the cost curves."""
        return index.sequences, index.accuracy, index.costs, index.space

    def __init__(self, index, key: tuple):
        self.key = key
        self.names: dict[int, frozenset] = {}  # mask -> feature names, filled by callers that decode masks
        masks, accuracy = index.option_sets()
        masks = np.asarray(masks, dtype=np.int64)
        accuracy = np.asarray(accuracy, dtype=float)
        # Presorted by (accuracy descending, mask): a stable sort by cost then gives the order
        # ``options_at`` sorts by, (cost, -accuracy, mask).
        order = np.lexsort((masks, -accuracy))
        self.masks, self.accuracy = masks[order], accuracy[order]
        coef = set_cost_matrix(index.costs, self.masks.tolist()) if len(masks) else np.zeros((0, 1))
        self.coef = np.ascontiguousarray(coef.T)  # (degree + 1, M)
        self._rows = [tuple(reversed(row)) for row in coef.tolist()]
        self._masks, self._accuracy = self.masks.tolist(), self.accuracy.tolist()

    def many(self, sizes: np.ndarray):
        """See :func:`options_many`."""
        n, width = len(sizes), len(self.masks)
        if n == 0:  # options_at's width for no sizes
            return (np.full((0, 1), -1, dtype=np.int64), np.full((0, 1), np.inf), np.full((0, 1), np.nan),
                    np.zeros(0, dtype=np.intp))
        # The same sets at every size: each degree's coefficients are one row, broadcast.
        costs = _horner_columns(self.coef.__getitem__, self.coef.shape[0], sizes, (n, width))
        order = np.argsort(costs, axis=1, kind="stable")
        costs = np.take_along_axis(costs, order, axis=1)
        return self.masks[order], costs, self.accuracy[order], np.full(n, width, dtype=np.intp)

    def one(self, size: float) -> tuple[list[int], list[float], list[float]]:
        """``options_at(size)`` for a validated ``size``, in plain Python (no numpy call)."""
        costs = []
        for row in self._rows:
            c = 0.0  # poly.horner_scalar, inlined: one call per option
            for a in row:
                c = c * size + a
            costs.append(c)
        order = sorted(range(len(costs)), key=costs.__getitem__)  # stable: ties keep (-accuracy, mask)
        masks, accuracy = self._masks, self._accuracy
        return [masks[j] for j in order], [costs[j] for j in order], [accuracy[j] for j in order]


def _packed(sizes, masks, costs, acc, keep, counts=None) -> OptionTable:
    """The kept entries of each row first, cost ascending (equal costs: accuracy descending).

    ``counts``, when given, says ``keep`` is exactly each row's first ``counts`` entries (no cap
    dropped any), so the padding is already in place.
    """
    if counts is None:
        costs = np.where(keep, costs, np.inf)
        acc = np.where(keep, acc, np.nan)
        masks = np.where(keep, masks, -1)
        counts = keep.sum(axis=1).astype(np.intp)
    # The order is lexsort's on (cost, -accuracy), padding (infinite cost) last. A stable sort
    # leaves a row already in that order as it is, so only the rows out of order are sorted:
    # gathered options are mostly in order already, and sorting millions of rows is most of the cost.
    second = -np.nan_to_num(acc, nan=-np.inf)
    c0, c1, k0, k1 = costs[:, :-1], costs[:, 1:], second[:, :-1], second[:, 1:]
    with np.errstate(invalid="ignore"):  # inf - inf never happens: only comparisons here
        out = ((c1 < c0) | ((c1 == c0) & (k1 < k0))).any(axis=1)
    bad = np.flatnonzero(out)
    if len(bad):
        order = np.lexsort((second[bad], costs[bad]), axis=-1)
        pick = np.take_along_axis
        masks, costs, acc = masks.copy(), costs.copy(), acc.copy()
        for column in (masks, costs, acc):
            column[bad] = pick(column[bad], order, 1)
    return OptionTable(sizes, masks, costs, acc, np.asarray(counts, dtype=np.intp))


def _overrides(accuracy, masks: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The caller's per-item accuracies, aligned with each item's options as ``options_at`` lists them."""
    n, width = masks.shape
    out = np.full((n, width), np.nan)
    if callable(accuracy):
        for i in range(n):
            k = int(counts[i])
            row = np.asarray(accuracy(i, masks[i, :k].copy()), dtype=float)
            if row.shape != (k,):
                raise ValueError(f"accuracy({i}, masks) returned shape {row.shape}; item {i} has {k} options")
            out[i, :k] = row
    elif isinstance(accuracy, np.ndarray) and accuracy.ndim == 2 or _rectangular(accuracy):
        arr = np.asarray(accuracy, dtype=float)
        if arr.shape != (n, width):
            raise ValueError(
                f"accuracy must have shape (items, widest option count) = {(n, width)}, got {arr.shape}; "
                f"entries past an item's own option count are ignored"
            )
        out = np.where(np.arange(width) < counts[:, None], arr, np.nan)
    else:
        try:
            rows = list(accuracy)
        except TypeError:
            raise TypeError(
                f"accuracy must be an (items, options) array, a sequence of per-item rows or a callable, "
                f"got {type(accuracy).__name__}"
            ) from None
        if len(rows) != n:
            raise ValueError(f"accuracy has {len(rows)} rows for {n} items")
        for i, row in enumerate(rows):
            row = np.asarray(row, dtype=float)
            if row.shape != (counts[i],):
                raise ValueError(f"accuracy row {i} has shape {row.shape}; item {i} has {counts[i]} options")
            out[i, : counts[i]] = row
    valid = np.arange(width) < counts[:, None]
    bad = valid & ~((out >= 0) & (out <= 1))
    if bad.any():
        i, j = map(int, np.argwhere(bad)[0])
        raise ValueError(f"accuracy of item {i}, option {j} is {float(out[i, j])!r}; it must be finite and in [0, 1]")
    return out


def _rectangular(value) -> bool:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return False
    return arr.ndim == 2


def _check_cap(value) -> float | None:
    if value is None:
        return None
    cap = as_real("max_item_budget", value)
    if math.isnan(cap) or cap < 0:
        raise ValueError(f"max_item_budget must be >= 0, got {value!r}")
    return cap


# --------------------------------------------------------------------------- the hull


def upper_hull(table: OptionTable) -> tuple[np.ndarray, np.ndarray]:
    """Each item's upper convex hull of ``(cost, accuracy)``, from its cheapest option up.

    A monotone chain run on all items at once: column by column, each item pops the points
    that fall on or under the chord to the new point. ``O(N * M^2)`` elementary steps in the
    worst case, in ``O(M^2)`` vectorised passes.

    Returns
    -------
    positions : ndarray of intp, shape (N, M)
        Hull points as positions into the table's rows, cost and accuracy strictly ascending,
        the gain per unit of cost strictly descending; meaningful up to ``lengths``.
    lengths : ndarray of intp, shape (N,)
    """
    positions, lengths, _, _ = hull_columns(table)
    return positions.T, lengths


def hull_columns(table: OptionTable) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`upper_hull` with the hull points' costs and accuracies, each array transposed.

    Item-major arrays make every column of the chain a strided gather; option-major ones (one
    contiguous row per option position) make it a contiguous slice, which is what lets millions
    of items be planned in seconds.

    Returns
    -------
    positions : ndarray of intp, shape (M, N)
    lengths : ndarray of intp, shape (N,)
    costs, accuracy : ndarray of float, shape (M, N)
        Per hull point its cost and accuracy; meaningful up to ``lengths``.
    """
    n, width = table.costs.shape
    costs, acc = np.ascontiguousarray(table.costs.T), np.ascontiguousarray(table.accuracy.T)
    positions = np.zeros((width, n), dtype=np.intp)
    hull_cost, hull_acc = np.zeros((width, n)), np.zeros((width, n))
    hull_cost[0], hull_acc[0] = costs[0], acc[0]
    flat_pos, flat_cost, flat_acc = positions.reshape(-1), hull_cost.reshape(-1), hull_acc.reshape(-1)
    top = np.ones(n, dtype=np.intp)
    top_cost, top_acc = costs[0].copy(), acc[0].copy()  # each item's last hull point
    counts = table.counts
    with np.errstate(invalid="ignore"):
        for j in range(1, width):
            cj, aj = costs[j], acc[j]
            # A point no more accurate than the hull's last is dominated (costs ascend); padding is NaN.
            live = (j < counts) & (aj > top_acc)
            can = np.flatnonzero(live & (top >= 2))
            while len(can):
                below = (top[can] - 2) * n + can
                c0, a0, c1, a1 = flat_cost[below], flat_acc[below], top_cost[can], top_acc[can]
                # The last point on or under the chord from the one before it to j; cross-multiplied
                # (both cost steps are > 0).
                under = (a1 - a0) * (cj[can] - c1) <= (aj[can] - a1) * (c1 - c0)
                # An item that keeps its last point stops popping: its next test would be this one.
                can = can[under]
                top[can] -= 1
                top_cost[can], top_acc[can] = c0[under], a0[under]
                can = can[top[can] >= 2]
            grow = np.flatnonzero(live)
            at = top[grow] * n + grow
            flat_pos[at], flat_cost[at], flat_acc[at] = j, cj[grow], aj[grow]
            top_cost[grow], top_acc[grow] = cj[grow], aj[grow]
            top[grow] += 1
    return positions, top, hull_cost, hull_acc


def hull_steps(table: OptionTable, positions: np.ndarray, lengths: np.ndarray):
    """The steps between consecutive hull points: ``(valid, cost step, accuracy step, slope)``.

    Arrays of shape (N, M - 1); step ``s`` of item ``i`` moves from hull point ``s`` to
    ``s + 1``. Invalid steps hold NaN.
    """
    rows = np.arange(len(table))[:, None]
    hc, ha = table.costs[rows, positions], table.accuracy[rows, positions]
    valid = np.arange(positions.shape[1] - 1) < (lengths - 1)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        dc = np.where(valid, np.diff(hc, axis=1), np.nan)
        da = np.where(valid, np.diff(ha, axis=1), np.nan)
        slope = da / dc
    return valid, dc, da, slope


# --------------------------------------------------------------------------- the plan
