"""Budgets over a stream: a mean cost per item, met by serving each item at one fitted price.

Serving every item the best set under ``mean_budget`` spends the budget evenly but badly: items
of different sizes gain differently from the same spend, and even at one size mixing a cheap
and a dear set can beat the set in between. Pricing fixes both. With a price ``p`` per unit
of predicted cost, each item is served ``argmax accuracy - p * cost`` among its options; ``p``
is the dual price of the batch plan's budget constraint (see :mod:`polydom.index.serving.planning`),
fitted on a sample of the stream's sizes so the sample's mean cost meets ``mean_budget``.

At that price some items are indifferent between two sets (their hull step's gain per unit of
cost equals ``p``); the LP optimum serves a fixed fraction of those the dearer set. That
fraction is stored with the price and honoured, by default deterministically: each tied item
adds ``fraction * (extra cost)`` to a credit, and is served the dearer set when the credit
covers its extra cost. So at every point of the stream the extra spent on ties is at most the
fraction of what all ties so far could have spent, and (until a guard steps in) within one
item's extra cost of it, whatever the order of the sizes.
"""

from __future__ import annotations

import math
import threading
from itertools import islice
from operator import lt, sub, truediv

import numpy as np

from polydom.index.queries import Batch, as_real
from polydom.index.serving.optiontable import _check_cap, hull_columns, option_source, option_table
from polydom.index.values import Choice

__all__ = ["StreamBudget", "TIE_RULES", "fit_price"]

#: How items tied at the price are split: ``"alternate"`` (deterministic credit, the default)
#: or ``"random"`` (each tied item served the dearer set with probability ``tie_fraction_``).
TIE_RULES = ("alternate", "random")
#: Slopes within this relative distance of the price count as tied with it. The slopes of
#: equal-shaped items are computed by the same arithmetic and agree exactly; the band only
#: absorbs rounding between sizes whose curves give mathematically equal slopes.
_TIE_RTOL = 1e-9


def _positions(slope: np.ndarray, price: float) -> tuple[np.ndarray, np.ndarray]:
    """Hull points served at ``price``: ``(ties to the cheaper, ties to the dearer)``.

    Along a hull the slopes descend, so the steps worth taking at a price are a prefix: their
    count is the hull point served. NaN (no step) compares false.
    """
    with np.errstate(invalid="ignore"):
        cheap = (slope > price * (1 + _TIE_RTOL)).sum(axis=1)
        dear = (slope >= price * (1 - _TIE_RTOL)).sum(axis=1)
    return cheap, dear


def _hull_table(index, sizes, cap):
    """Per item the hull points' costs, accuracies and masks, and the steps' slopes (NaN past the last)."""
    table = option_table(index, sizes, max_item_budget=cap)
    positions, lengths, hull_cost, hull_acc = hull_columns(table)
    valid = np.arange(positions.shape[0] - 1)[:, None] < (lengths - 1)[None, :]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        slope = np.where(valid, np.diff(hull_acc, axis=0) / np.diff(hull_cost, axis=0), np.nan)
    masks = table.masks.T.reshape(-1)[positions * len(table) + np.arange(len(table))]
    # Item-major views of the option-major arrays (no copies).
    return table, hull_cost.T, hull_acc.T, masks.T, slope.T


def _one_hull(costs: list, accuracy: list) -> tuple[list[int], list[float], list[float]]:
    """:func:`~polydom.index.serving.optiontable.upper_hull` of one row, in plain Python: the same chain and
    the same chord test, so the same points. Returns their positions, costs and accuracies."""
    positions, hull_cost, hull_acc = [0], [costs[0]], [accuracy[0]]
    c1, a1 = costs[0], accuracy[0]  # the last point
    for j in range(1, len(costs)):
        aj = accuracy[j]
        if not aj > a1:
            continue  # dominated: no more accurate than the last point, and costs ascend
        cj = costs[j]
        while len(positions) >= 2:
            c0, a0 = hull_cost[-2], hull_acc[-2]
            if (a1 - a0) * (cj - c1) > (aj - a1) * (c1 - c0):
                break
            positions.pop(), hull_cost.pop(), hull_acc.pop()  # on or under the chord to j
            c1, a1 = c0, a0
        positions.append(j), hull_cost.append(cj), hull_acc.append(aj)
        c1, a1 = cj, aj
    return positions, hull_cost, hull_acc


def _fallback(costs, accuracy, masks, size: float, left: float):
    """The most accurate option costing at most ``left`` (the first among equals), as
    ``(cost, accuracy, mask)``; options cost ascending."""
    best = -1
    for j, c in enumerate(costs):
        if c <= left and (best < 0 or accuracy[j] > accuracy[best]):
            best = j
    if best < 0:
        raise RuntimeError(
            f"the stream's budget is spent: {float(left)!r} remains and the cheapest set for an item of size "
            f"{float(size)!r} costs {float(costs[0])!r}"
        )
    return costs[best], accuracy[best], masks[best]


#: Sizes :meth:`StreamBudget.choose` serves in plain Python; others (and invalid ones) go through
#: :meth:`StreamBudget.choose_many`, which converts and checks them.
_PLAIN = (float, int, np.float64)


def fit_price(hull_cost: np.ndarray, hull_accuracy: np.ndarray, slope: np.ndarray, mean_budget: float):
    """The price and tie fraction at which a sample's mean cost meets ``mean_budget``.

    Bisection over the sample's hull slopes (the only prices where any item's choice changes)
    for the lowest price whose choices, ties served the cheaper set, fit; the fraction of ties
    served the dearer set then fills the rest. ``O(K log K)`` for ``K`` hull steps.

    Returns
    -------
    price, tie_fraction, mean_cost, mean_accuracy : float
        ``mean_cost`` and ``mean_accuracy`` are the sample's with the fraction honoured in
        expectation (the LP optimum of the sample's batch plan at ``mean_budget`` per item).
    """
    rows = np.arange(len(hull_cost))

    def means(price):
        cheap, dear = _positions(slope, price)
        return (hull_cost[rows, cheap].mean(), hull_cost[rows, dear].mean(),
                hull_accuracy[rows, cheap].mean(), hull_accuracy[rows, dear].mean())

    cheapest = float(hull_cost[:, 0].mean())
    if cheapest > mean_budget:
        raise ValueError(
            f"mean_budget={mean_budget!r} is below the mean cost of the cheapest sets on the sample of sizes "
            f"({cheapest!r})"
        )
    prices = np.unique(slope[np.isfinite(slope)])
    if means(0.0)[0] <= mean_budget:
        price = 0.0  # the most accurate set for every item fits: the budget does not bind
    else:
        # Above the highest slope every item takes its cheapest set, which fits (checked above).
        lo, hi = 0, len(prices) - 1  # invariant: prices[hi] fits; every price below prices[lo] does not
        while lo < hi:
            mid = (lo + hi) // 2
            if means(prices[mid])[0] <= mean_budget:
                hi = mid
            else:
                lo = mid + 1
        price = float(prices[hi])
    cost_lo, cost_hi, acc_lo, acc_hi = means(price)
    fraction = min(1.0, max(0.0, (mean_budget - cost_lo) / (cost_hi - cost_lo))) if cost_hi > cost_lo else 0.0
    return (float(price), float(fraction), float(cost_lo + fraction * (cost_hi - cost_lo)),
            float(acc_lo + fraction * (acc_hi - acc_lo)))


class StreamBudget:
    """Serve a stream of items within a mean cost per item, at a price fitted on a sample.

    Each item is served ``argmax accuracy - price_ * cost`` at its size among the index's
    options costing at most ``max_item_budget``; items tied at the price are split between the
    two sets by ``tie_fraction_`` (see the module docstring for ``tie_rule``). With a
    ``horizon``, a guard keeps the total predicted spend at most ``horizon * mean_budget``: an
    item whose set does not fit what remains is served the most accurate option that does. An
    unbounded stream can have a token bucket instead (``burst``): the spend after ``k`` items
    never exceeds ``k * mean_budget + burst``, whatever the order of the sizes. With ``adapt``
    the price follows the stream: after each item it moves by ``adapt`` times the item's
    relative overspend, so a stream whose sizes drift from the sample still meets its mean.

    Parameters
    ----------
    index : CostSensitiveIndex
        Any backend (its :meth:`options_at` lists what an item may be served).
    mean_budget : float
        Target mean predicted cost per item.
    sizes : array-like of float
        A sample of the sizes the stream will bring; the price is fitted so that this sample's
        mean cost meets ``mean_budget``.
    max_item_budget : float, optional
        No item is served a set costing more than this at its size.
    horizon : int, optional
        Items the budget is for. The guard never lets the total exceed
        ``horizon * mean_budget``; items past the horizon draw on what is left.
    burst : float, optional
        Without a horizon: the token bucket's depth (predicted seconds an unbounded stream may
        run ahead of ``mean_budget`` per item). Give at least the dearest set's cost, or items
        that arrive with an empty bucket are served ``{}``.
    adapt : float, optional
        Online price update rate (e.g. 0.01): ``price += adapt * scale * (cost - mean_budget) /
        mean_budget`` after each item, never below 0, where ``scale`` is the fitted price (or
        ``1 / mean_budget`` when it is 0). Items are then priced one by one.
    seed : int or None, default 0
        Seeds the generator of ``tie_rule="random"``.
    tie_rule : {"alternate", "random"}, default "alternate"
        ``"alternate"``: a deterministic credit (ties' extra spend tracks the fraction within
        one item's extra cost, whatever the order of sizes). ``"random"``: a coin per tie.

    Attributes
    ----------
    price_ : float
        Accuracy per unit of predicted cost at which items are served.
    tie_fraction_ : float
        Fraction (by extra cost) of tied items served the dearer set.
    expected_cost_, expected_accuracy_ : float
        Mean cost and accuracy on the sample of sizes with the fraction honoured.
    spent, served, remaining
        Running totals of the stream (see the properties).

    Examples
    --------
    >>> import polydom
    >>> costs = {"a": [1.0], "b": [2.0], "c": [3.0]}
    >>> acc = {"a": .70, "b": .75, "c": .90}
    >>> index = polydom.build(costs, lambda s: max([acc[f] for f in s], default=.5))
    >>> stream = polydom.StreamBudget(index, 2.0, sizes=[1.0])
    >>> round(stream.price_, 9), stream.tie_fraction_
    (0.1, 0.5)
    >>> [sorted(stream.choose(1.0).features) for _ in range(4)]
    [['a'], ['c'], ['a'], ['c']]
    >>> stream.spent / stream.served
    2.0
    """

    def __init__(self, index, mean_budget: float, *, sizes, max_item_budget: float | None = None,
                 horizon: int | None = None, burst: float | None = None, adapt: float | None = None,
                 seed: int | None = 0, tie_rule: str = "alternate"):
        budget = as_real("mean_budget", mean_budget)
        if not (math.isfinite(budget) and budget >= 0):
            raise ValueError(f"mean_budget must be finite and >= 0, got {mean_budget!r}")
        if horizon is not None:
            if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)):
                raise TypeError(f"horizon must be a positive integer or None, got {horizon!r}")
            if horizon < 1:
                raise ValueError(f"horizon must be >= 1, got {horizon!r}")
        for name, value in (("burst", burst), ("adapt", adapt)):
            if value is not None and not (math.isfinite(as_real(name, value)) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0 or None, got {value!r}")
        if burst is not None and horizon is not None:
            raise ValueError("give horizon (a finite stream) or burst (an unbounded one), not both")
        if tie_rule not in TIE_RULES:
            raise ValueError(f"tie_rule must be one of {TIE_RULES}, got {tie_rule!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise TypeError(f"seed must be an integer or None, got {seed!r}")
        if sizes is None or np.ndim(sizes) != 1 or len(sizes) == 0:
            raise ValueError("sizes must be a non-empty 1-D sample of the sizes the stream will bring")
        self.index, self.mean_budget, self.max_item_budget = index, budget, max_item_budget
        self.horizon, self.seed, self.tie_rule = horizon, seed, tie_rule
        self.burst, self.adapt = (None if burst is None else float(burst)), (None if adapt is None else float(adapt))
        _, hull_cost, hull_acc, _, slope = _hull_table(index, sizes, max_item_budget)
        self.price_, self.tie_fraction_, self.expected_cost_, self.expected_accuracy_ = fit_price(
            hull_cost, hull_acc, slope, budget)
        self.fitted_price_ = self.price_
        self._cap = (max_item_budget, _check_cap(max_item_budget))  # the cap choose() applies, checked once
        self._source = None  # the index's option tables, once choose() needs them
        self._lock = threading.Lock()
        self.reset()

    # ------------------------------------------------------------------ spend

    def reset(self) -> None:
        """Start a new stream: zero spend and count, a fresh tie credit and generator."""
        self._spent, self._spent_error, self._served = 0.0, 0.0, 0
        self._credit = 0.0
        self._rng = np.random.default_rng(self.seed)
        self.price_ = self.fitted_price_  # an online price starts again from the fitted one

    @property
    def spent(self) -> float:
        """Total predicted cost served so far."""
        return self._spent + self._spent_error

    @property
    def served(self) -> int:
        """Items served so far."""
        return self._served

    @property
    def remaining(self) -> float | None:
        """What the guard still allows: ``horizon * mean_budget - spent``, or the tokens in the
        bucket (``served * mean_budget + burst - spent``); None without either."""
        if self.horizon is not None:
            return max(0.0, self.horizon * self.mean_budget - self.spent)
        if self.burst is not None:
            return max(0.0, self.served * self.mean_budget + self.burst - self.spent)
        return None

    def summary(self) -> dict:
        """What a service reports: budget, price, tie fraction, items served, spend and mean cost."""
        return {
            "mean_budget": self.mean_budget,
            "price": self.price_,
            "tie_fraction": self.tie_fraction_,
            "served": self.served,
            "spent": self.spent,
            "mean_cost": self.spent / self.served if self.served else 0.0,
            "horizon": self.horizon,
            "burst": self.burst,
            "remaining": self.remaining,
        }

    def __repr__(self) -> str:
        return (f"StreamBudget(mean_budget={self.mean_budget!r}, price={self.price_:.6g}, "
                f"tie_fraction={self.tie_fraction_:.6g}, served={self.served}, spent={self.spent:.6g})")

    # ------------------------------------------------------------------ serving

    def choose(self, size: float) -> Choice:
        """The set to serve the next item, of size ``size``; its predicted cost is recorded as spent.

        ``O(M^2)`` in the worst case (``O(M)`` typically) for ``M`` options at the size, in plain
        Python: a few microseconds per item on the demo's indexes. The same choice as
        ``choose_many([size])[0]``, which serves the sizes this path does not take (numbers of
        other types, invalid sizes: it raises the error).
        """
        choice = self._choose_one(size)
        return choice if choice is not None else self.choose_many([size])[0]

    def choose_many(self, sizes) -> Batch:
        """:meth:`choose` for the next items of the stream, in order; a ``Batch`` of columns.

        The price rule is applied to all items at once; ties and the guard then go item by item,
        in order, since each depends on what was spent before. With ``adapt`` the price moves
        after every item, so items are priced one by one.
        """
        if self.adapt is not None and np.ndim(sizes) == 1 and len(sizes) > 1:
            parts = [self.choose_many([size]) for size in sizes]
            return Batch.of(self.index, np.concatenate([b.keys for b in parts]),
                            np.concatenate([b.accuracy for b in parts]), np.concatenate([b.cost for b in parts]))
        table, hull_cost, hull_acc, hull_mask, slope = _hull_table(self.index, sizes, self.max_item_budget)
        n = len(table)
        cheap, dear = _positions(slope, self.price_)
        rows = np.arange(n)
        cost = hull_cost[rows, cheap]
        extra = np.where(dear > cheap, hull_cost[rows, dear] - cost, 0.0)
        # Plain numbers for the item-by-item part: indexing numpy arrays one element at a time
        # costs more than the rule itself.
        columns = zip(cost.tolist(), hull_acc[rows, cheap].tolist(), hull_mask[rows, cheap].tolist(), extra.tolist(),
                      hull_cost[rows, dear].tolist(), hull_acc[rows, dear].tolist(), hull_mask[rows, dear].tolist())
        out_cost, out_acc, out_key = np.empty(n), np.empty(n), np.empty(n, dtype=np.int64)
        with self._lock:
            for i, (c, a, k, x, dc, da, dk) in enumerate(columns):
                out_cost[i], out_acc[i], out_key[i] = self._book(c, a, k, x, (dc, da, dk), table, i)
        return Batch.of(self.index, out_key, out_acc, out_cost)

    def _choose_one(self, size):
        """:meth:`choose` in plain Python, or None where ``choose_many`` must serve the item: a size
        it does not take as a plain number or that is invalid, an index whose options it cannot
        gather, no option under ``max_item_budget`` (it raises the error)."""
        if type(size) not in _PLAIN:
            return None
        index = self.index
        size = float(size)
        lo, hi = index.domain
        if not (lo <= size <= hi and 0.0 <= size < math.inf):  # NaN fails too
            return None
        source = self._source
        if source is None or not source.current(index):  # the first item, or the index was refreshed
            source = self._source = option_source(index)
            if source is None:
                return None
        if self.max_item_budget is not self._cap[0]:  # reassigned since: check it as option_table does
            self._cap = (self.max_item_budget, _check_cap(self.max_item_budget))
        cap = self._cap[1]
        measured_lo, measured_hi = index.measured_range()
        if not measured_lo <= size <= measured_hi:
            index._outside_measured(size)  # the index's own policy, as option_table applies it
        masks, costs, accuracy = source.one(size)
        if cap is not None and not all(map(cap.__ge__, costs)):
            kept = [j for j, c in enumerate(costs) if c <= cap]
            if not kept:
                return None
            masks, costs, accuracy = [masks[j] for j in kept], [costs[j] for j in kept], [accuracy[j] for j in kept]
        # option_table's order, (cost, accuracy descending), stable. Rows whose costs strictly
        # ascend are in it (checked at C speed); the rest are checked pair by pair.
        if not all(map(lt, costs, islice(costs, 1, None))) and any(
                c1 < c0 or c1 == c0 and a1 > a0 for c0, c1, a0, a1 in zip(costs, costs[1:], accuracy, accuracy[1:])):
            order = sorted(range(len(costs)), key=lambda j: (costs[j], -accuracy[j]))
            masks, costs, accuracy = [masks[j] for j in order], [costs[j] for j in order], [accuracy[j] for j in order]
        hull, hull_cost, hull_acc = _one_hull(costs, accuracy)
        dc = list(map(sub, islice(hull_cost, 1, None), hull_cost))
        if 0.0 in dc:
            return None  # not a hull numpy builds (costs ascend strictly along one); let it decide
        slopes = list(map(truediv, map(sub, islice(hull_acc, 1, None), hull_acc), dc))
        price = self.price_
        cheap = sum(map((price * (1 + _TIE_RTOL)).__lt__, slopes))  # slopes above the price
        dear = sum(map((price * (1 - _TIE_RTOL)).__le__, slopes))  # and those tied with it
        c, a, key = hull_cost[cheap], hull_acc[cheap], masks[hull[cheap]]
        extra = hull_cost[dear] - c if dear > cheap else 0.0
        with self._lock:
            c, a, key = self._book(c, a, key, extra, (hull_cost[dear], hull_acc[dear], masks[hull[dear]]),
                                   (costs, accuracy, masks, size), 0)
        names = source.names.get(key)
        if names is None:
            names = source.names[key] = index.space.frozenset(key)
        return Choice(names, float(a), float(c), key, index.models, index.std_error.get(key))

    def _book(self, cost, acc, key, extra, dearer_set, options, i):
        """One item's turn, under the lock: its tie, the guard, the spend and the online price.

        ``(cost, acc, key)`` is the set the price serves (the cheaper on a tie), ``extra`` what
        the dearer set of a tie costs more (0 without one), ``dearer_set`` that set; ``options``
        an :class:`~polydom.index.serving.optiontable.OptionTable` and ``i`` the item's row, or the
        item's ``(costs, accuracies, masks, size)``, for the guard's fallback.
        Returns the served ``(cost, accuracy, mask)``.
        """
        alternate = self.tie_rule == "alternate"
        dearer = False
        if extra > 0:
            if alternate:
                self._credit += self.tie_fraction_ * extra
                dearer = self._credit >= extra
            else:
                dearer = self._rng.random() < self.tie_fraction_
        c = cost + extra if dearer else cost
        limit = self.horizon * self.mean_budget if self.horizon is not None else (
            None if self.burst is None else (self.served + 1) * self.mean_budget + self.burst)
        if limit is not None and self.spent + c > limit:
            dearer = False
            if isinstance(options, tuple):
                row = options
            else:
                k = int(options.counts[i])
                row = (options.costs[i, :k].tolist(), options.accuracy[i, :k].tolist(), options.masks[i, :k].tolist(),
                       options.sizes[i])
            cost, acc, key = _fallback(*row, limit - self.spent)
        if dearer:
            cost, acc, key = dearer_set
            if alternate:
                self._credit -= extra
        self._add(cost)
        if self.adapt is not None and self.mean_budget > 0:
            scale = self.fitted_price_ if self.fitted_price_ > 0 else 1.0 / self.mean_budget
            step = self.adapt * scale * (float(cost) - self.mean_budget) / self.mean_budget
            self.price_ = max(0.0, self.price_ + step)
        return cost, acc, key

    def _add(self, value: float) -> None:
        # Compensated summation: a long stream's total stays exact to an ulp, so the guard's
        # comparison with the cap is not skewed by rounding accumulated over millions of items.
        value = float(value)
        total = self._spent + value
        if abs(self._spent) >= abs(value):
            self._spent_error += (self._spent - total) + value
        else:
            self._spent_error += (value - total) + self._spent
        self._spent = total
        self._served += 1
