"""Budgets over a stream: a mean cost per item, met by serving each item at one fitted price.

Serving every item the best set under ``mean_budget`` spends the budget evenly but badly: items
of different sizes gain differently from the same spend, and even at one size mixing a cheap
and a dear set can beat the set in between. Pricing fixes both. With a price ``p`` per unit
of predicted cost, each item is served ``argmax accuracy - p * cost`` among its options; ``p``
is the dual price of the batch plan's budget constraint (see :mod:`polydom.index.planning`),
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

import numpy as np

from polydom.index.planning import hull_steps, option_table, upper_hull
from polydom.index.queries import Batch, as_real
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
    """Per item the hull points' costs, accuracies and masks, and the steps' slopes."""
    table = option_table(index, sizes, max_item_budget=cap)
    positions, lengths = upper_hull(table)
    _, _, _, slope = hull_steps(table, positions, lengths)
    rows = np.arange(len(table))[:, None]
    return table, table.costs[rows, positions], table.accuracy[rows, positions], table.masks[rows, positions], slope


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

        ``O(M log M)`` for ``M`` options at the size, plus one :meth:`options_at` call.
        """
        return self.choose_many([size])[0]

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
        acc = hull_acc[rows, cheap]
        key = hull_mask[rows, cheap]
        extra = np.where(dear > cheap, hull_cost[rows, dear] - cost, 0.0)
        cap = None if self.horizon is None else self.horizon * self.mean_budget
        fraction, alternate = self.tie_fraction_, self.tie_rule == "alternate"
        with self._lock:
            for i in range(n):
                dearer = False
                if extra[i] > 0:
                    if alternate:
                        self._credit += fraction * extra[i]
                        dearer = self._credit >= extra[i]
                    else:
                        dearer = self._rng.random() < fraction
                c = cost[i] + extra[i] if dearer else cost[i]
                limit = cap if cap is not None else (
                    None if self.burst is None else (self.served + 1) * self.mean_budget + self.burst)
                if limit is not None and self.spent + c > limit:
                    dearer = False
                    c = self._fallback(table, i, limit - self.spent, cost, acc, key)
                if dearer:
                    j = dear[i]
                    cost[i], acc[i], key[i] = hull_cost[i, j], hull_acc[i, j], hull_mask[i, j]
                    if alternate:
                        self._credit -= extra[i]
                self._add(cost[i])
                if self.adapt is not None and self.mean_budget > 0:
                    scale = self.fitted_price_ if self.fitted_price_ > 0 else 1.0 / self.mean_budget
                    step = self.adapt * scale * (float(cost[i]) - self.mean_budget) / self.mean_budget
                    self.price_ = max(0.0, self.price_ + step)
        return Batch.of(self.index, key, acc, cost)

    def _fallback(self, table, i: int, left: float, cost, acc, key) -> float:
        """Serve item ``i`` the most accurate option costing at most ``left`` (cheapest among equals)."""
        fits = table.valid[i] & (table.costs[i] <= left)
        if not fits.any():
            raise RuntimeError(
                f"the stream's budget is spent: {float(left)!r} remains and the cheapest set for an item of size "
                f"{float(table.sizes[i])!r} costs {float(table.costs[i, 0])!r}"
            )
        j = int(np.argmax(np.where(fits, table.accuracy[i], -np.inf)))
        cost[i], acc[i], key[i] = table.costs[i, j], table.accuracy[i, j], table.masks[i, j]
        return cost[i]

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
