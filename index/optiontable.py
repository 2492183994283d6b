"""The options a batch plan chooses among: every item's servable sets at its own size, and the
upper convex hull of each item's (cost, accuracy) options that the greedy solver walks.

Split from :mod:`polydom.index.planning` so that gathering options and solving are separate jobs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .queries import as_real, check_queries

__all__ = ["OptionTable", "option_table", "upper_hull", "hull_steps"]


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
        dc = np.diff(self.costs, axis=1)
        assert (dc[both] >= 0).all(), "costs ascend"
        tie = both & (dc == 0)
        assert (np.diff(self.accuracy, axis=1)[tie] <= 0).all(), "equal costs: accuracy descends"


def option_table(index, sizes, *, max_item_budget: float | None = None, accuracy=None) -> OptionTable:
    """Every item's options at its size: one :meth:`options_at` call per distinct size.

    Parameters
    ----------
    index : CostSensitiveIndex
    sizes : array-like of float, shape (N,)
        Item sizes, inside the index's domain.
    max_item_budget : float, optional
        Options costing more than this at the item's size are dropped.
    accuracy : array-like of shape (N, M), sequence of N sequences, or callable, optional
        Per-item accuracy overrides, see :func:`plan_batch`.

    Returns
    -------
    OptionTable

    Raises
    ------
    ValueError, TypeError
        Invalid sizes (naming the position), a negative or NaN cap, an item left without an
        option under the cap, overrides of the wrong shape or outside ``[0, 1]``.
    """
    options_at = getattr(index, "options_at", None)
    if not callable(options_at) or not hasattr(index, "domain"):
        raise TypeError(f"index must be a polydom index (a CostSensitiveIndex), got {type(index).__name__}")
    sizes, _ = check_queries(sizes, 0.0, index.domain)
    cap = _check_cap(max_item_budget)
    if len(sizes) and hasattr(index, "measured_range"):
        lo, hi = index.measured_range()
        outside = (sizes < lo) | (sizes > hi)
        if outside.any():
            index._outside_measured(float(sizes[np.argmax(outside)]))  # the index's own policy: warn, raise or allow
    unique, inverse = np.unique(sizes, return_inverse=True)
    rows = [options_at(float(s)) for s in unique]
    width = max((len(r[0]) for r in rows), default=1)
    masks = np.full((len(unique), width), -1, dtype=np.int64)
    costs = np.full((len(unique), width), np.inf)
    acc = np.full((len(unique), width), np.nan)
    counts = np.empty(len(unique), dtype=np.intp)
    for u, (m, c, a) in enumerate(rows):
        k = counts[u] = len(m)
        masks[u, :k], costs[u, :k], acc[u, :k] = m, c, a
    masks, costs, acc, counts = masks[inverse], costs[inverse], acc[inverse], counts[inverse]
    if accuracy is not None:
        acc = _overrides(accuracy, masks, counts)
    keep = np.arange(width) < counts[:, None]
    if cap is not None:
        keep &= costs <= cap
        empty = ~keep.any(axis=1)
        if empty.any():
            i = int(np.argmax(empty))
            raise ValueError(
                f"no option of item {i} (size {float(sizes[i])!r}) costs at most max_item_budget={cap!r}; "
                f"its cheapest costs {float(costs[i, 0])!r}"
            )
    return _packed(sizes, masks, costs, acc, keep)


def _packed(sizes, masks, costs, acc, keep) -> OptionTable:
    """The kept entries of each row first, cost ascending (equal costs: accuracy descending)."""
    costs = np.where(keep, costs, np.inf)
    acc = np.where(keep, acc, np.nan)
    masks = np.where(keep, masks, -1)
    # lexsort's last key is the primary one; padding (infinite cost) sorts last.
    order = np.lexsort((-np.nan_to_num(acc, nan=-np.inf), costs), axis=-1)
    pick = np.take_along_axis
    return OptionTable(sizes, pick(masks, order, 1), pick(costs, order, 1), pick(acc, order, 1),
                       keep.sum(axis=1).astype(np.intp))


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
    costs, acc = table.costs, table.accuracy
    n, width = costs.shape
    rows = np.arange(n)
    stack = np.zeros((n, width), dtype=np.intp)
    top = np.ones(n, dtype=np.intp)
    with np.errstate(invalid="ignore"):
        for j in range(1, width):
            cj, aj = costs[:, j], acc[:, j]
            # A point no more accurate than the hull's last is dominated (costs ascend); padding is NaN.
            live = (j < table.counts) & (aj > acc[rows, stack[rows, top - 1]])
            while True:
                can = np.flatnonzero(live & (top >= 2))
                if not len(can):
                    break
                p1, p0 = stack[can, top[can] - 1], stack[can, top[can] - 2]
                c0, a0, c1, a1 = costs[can, p0], acc[can, p0], costs[can, p1], acc[can, p1]
                # p1 on or under the chord p0 -> j; cross-multiplied (both cost steps are > 0).
                under = (a1 - a0) * (cj[can] - c1) <= (aj[can] - a1) * (c1 - c0)
                if not under.any():
                    break
                top[can[under]] -= 1
            stack[rows[live], top[live]] = j
            top[live] += 1
    return stack, top


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
