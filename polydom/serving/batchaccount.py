"""The running account of a batch under one total budget: what serving delivers, the plan, the re-plans.

An image is served through the index's :meth:`select`, which decides at the budget it is given:
at a budget equal to a set's predicted cost, the index's lookup may serve another, cheaper set
(its tie rule serves the cheapest set within the tolerance of the most accurate one), and some
sets it lists in ``options_at`` it never serves at all. So a batch is planned over *what serving
delivers* (:func:`served_options`): per item, each set the lookup serves at one of its options'
costs, with that set's predicted cost and accuracy, and the least budget that gets it served.
The plan is solved by :func:`polydom.index.serving.planning.solve` (greedy, or the integer program) --
the solver behind ``index.plan_batch`` -- on that table. On a PolyDom index the equal split
(every item looked up with ``total / N``) is one of its feasible plans, since a lookup at a
budget serves what a lookup at the cost of the best set within it serves; so the exact plan is
never below the equal split, and the greedy one at most one item's accuracy range below.

Real extraction times differ from predicted ones, so :class:`BatchAccount` revises the plan as
the batch goes. After each image its measured seconds are booked; the remaining images are
planned again over the time actually left (``total_budget`` minus the measured seconds so far)
once a quarter of the images left at the last plan are served (or every ``replan_every``
images), and at once when the spend since the last plan has drifted from what that plan
expected by more than ``drift`` times the time it had. A re-plan solves the remaining rows of
the table built once (nothing is asked of the index again), ``O(K log K)`` for the remaining
``K`` options. On the quarter schedule the batch left shrinks geometrically, so the re-plans
together solve about three first plans' worth of options, and they come most often near the
end, where a miscount would otherwise fall on the last images.

Re-plans are *calibrated*: when the sets served so far took longer than predicted (by the ratio
of the sums, ``slowdown >= 1``), the rest is planned for ``time left / slowdown`` of predicted
cost, so that a machine slower than its cost curves thins every remaining image's set instead
of spending the budget on the first images and serving the last ones nothing. A batch served
faster than predicted gets its savings back through the time left (the factor never goes below
1, so no plan counts on more time than is left).

Plans see the items in a bit-reversed order (:func:`spread_order`). The solvers break ties
between equally worthwhile items by position, and ties are the rule among images of one size:
in input order the first images would get the dearer sets and, should the time run short, the
last ones nothing; in spread order every k-th image gets them, all along the batch.

Invariant: no image is given a budget above the time left before it, ``max(0, total_budget -
measured so far)``. So the realised total exceeds ``total_budget`` by at most one image's overrun
of its own budget (a feature slower than its curve, which the clock cannot stop once started),
and not at all when no feature outruns its curve. With cost curves that track the median (the
classifier's default) and calibration, the expected spend stays within the total.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np

from polydom.index.queries import Batch, as_real
from polydom.index.serving.planning import BatchPlan, OptionTable, option_table, solve_table

__all__ = ["BatchAccount", "BatchSpend", "DEFAULT_DRIFT", "REPLAN_FRACTION", "check_total_budget", "served_options",
           "spread_order"]

#: Re-plan at once when the spend since the last plan is off what it expected by more than this
#: fraction of the time that plan had: small enough that a slow machine is noticed within a few
#: per cent of the budget, large enough that one slow image among many does not trigger it.
DEFAULT_DRIFT = 0.05
#: Without ``replan_every``, re-plan once this fraction of the items left at the last plan are
#: served: the re-plans then solve about ``1 / REPLAN_FRACTION - 1`` first plans' worth of
#: options in all. Measured on 10,000 items of 73 options each: 29 re-plans in 0.8 s, against
#: 8.4 s for a re-plan every ``ceil(sqrt(N))`` items.
REPLAN_FRACTION = 0.25


def check_total_budget(value) -> float:
    """``value`` as seconds ``>= 0`` (``inf`` allowed), or one clear ``TypeError``/``ValueError``."""
    total = as_real("total_budget", value)
    if math.isnan(total) or total < 0:
        raise ValueError(f"total_budget must be >= 0 seconds for the whole batch, got {value!r}")
    return total


def spread_order(n: int) -> np.ndarray:
    """Positions ``0..n-1`` ordered by their bit-reversed binary form: ``0, n/2, n/4, 3n/4, ...``.

    Every prefix of the order is spread evenly over ``[0, n)`` (a van der Corput sequence), so a
    solver that favours earlier positions among ties favours positions all along the batch.
    ``O(n log n)``.

    >>> spread_order(8).tolist()
    [0, 4, 2, 6, 1, 5, 3, 7]
    """
    i = np.arange(n, dtype=np.int64)
    bits = max(1, (n - 1).bit_length())
    reversed_ = np.zeros(n, dtype=np.int64)
    for b in range(bits):
        reversed_ |= ((i >> b) & 1) << (bits - 1 - b)
    return np.argsort(reversed_, kind="stable")


def served_options(index, sizes, *, max_item_budget: float | None = None) -> tuple[OptionTable, np.ndarray]:
    """What serving delivers to each item: the sets ``index.lookup`` serves at its options' costs.

    For every option of an item (``options_at`` at its size, under ``max_item_budget``), the set
    the lookup serves at a budget of that option's cost; each distinct served set once, with its
    own predicted cost and accuracy, and the least of those budgets that serves it. The options of
    all distinct sizes are gathered at once (:func:`~polydom.index.serving.optiontable.options_many`),
    then one ``lookup_many`` over all of them; the rest is vectorised too.

    Returns
    -------
    table : OptionTable
        Per item the served sets (the invariant of :class:`OptionTable` holds); ``costs`` are
        what serving them is predicted to spend.
    budgets : ndarray of float, shape (N, M)
        Aligned with ``table``: the budget to give an item for that set to be served
        (``>= costs``; ``inf`` in the padding).
    """
    options = option_table(index, sizes, max_item_budget=max_item_budget)  # validates sizes and the cap
    unique, first, inverse = np.unique(options.sizes, return_index=True, return_inverse=True)
    width = options.costs.shape[1]
    valid = options.valid[first]
    row, column = np.nonzero(valid)  # row-major: each row's options in ascending cost
    asked = options.costs[first][row, column]
    served = index.lookup_many(unique[row], asked)  # one lookup per option per distinct size
    shape = (len(unique), width)
    keys, costs, accuracy, budgets = (np.full(shape, -1, dtype=np.int64), np.full(shape, np.inf),
                                      np.full(shape, np.nan), np.full(shape, np.inf))
    # A lookup may serve a set up to the protocol's slack above its budget (its cost summed in
    # another order than the option's): such a set's budget is its own cost, so budgets >= costs.
    keys[row, column], costs[row, column], accuracy[row, column], budgets[row, column] = (
        served.keys, served.cost, served.accuracy, np.maximum(asked, served.cost))
    # Each distinct served set once: its first entry in the row, whose budget is the least
    # (budgets ascend along a row). A stable sort by set puts each set's first entry first.
    by_set = np.argsort(np.where(valid, keys, np.iinfo(np.int64).max), axis=1, kind="stable")
    sorted_keys = np.take_along_axis(keys, by_set, axis=1)
    leads = np.take_along_axis(valid, by_set, axis=1)
    leads[:, 1:] &= sorted_keys[:, 1:] != sorted_keys[:, :-1]
    keep = np.zeros(shape, dtype=bool)
    np.put_along_axis(keep, by_set, leads, axis=1)
    # Then by (cost, accuracy descending, budget), ties in row order; the rest after.
    order = np.lexsort((np.broadcast_to(np.arange(width), shape), np.where(keep, budgets, np.inf),
                        np.where(keep, -accuracy, np.inf), np.where(keep, costs, np.inf)), axis=-1)
    counts = keep.sum(axis=1).astype(np.intp)
    filled = np.arange(width) < counts[:, None]
    pick = np.take_along_axis
    masks = np.where(filled, pick(keys, order, 1), -1)
    costs = np.where(filled, pick(costs, order, 1), np.inf)
    accuracy = np.where(filled, pick(accuracy, order, 1), np.nan)
    budgets = np.where(filled, pick(budgets, order, 1), np.inf)
    table = OptionTable(options.sizes, masks[inverse], costs[inverse], accuracy[inverse], counts[inverse])
    return table, budgets[inverse]


def _rows(table: OptionTable, rows: np.ndarray) -> OptionTable:
    return OptionTable(table.sizes[rows], table.masks[rows], table.costs[rows], table.accuracy[rows],
                       table.counts[rows])


@dataclass(frozen=True)
class BatchSpend:
    """What a batch served under one total budget realised.

    Attributes
    ----------
    total_budget : float
        Seconds of feature extraction for the whole batch.
    items : int
    spent : float
        Measured extraction seconds, summed over the items.
    planned_cost, planned_accuracy : float
        The first plan's total predicted cost and mean accuracy.
    served_accuracy : float
        Mean estimated accuracy of the sets actually served (fallbacks and upgrades included).
    replans : int
        Plans made after the first.
    slowdown : float
        Measured over predicted seconds of the sets served (``>= 1``; 1 when calibration is off
        or nothing was computed).
    planning_seconds : float
        Wall-clock seconds spent planning (not part of ``spent``).
    """

    total_budget: float
    items: int
    spent: float
    planned_cost: float
    planned_accuracy: float
    served_accuracy: float
    replans: int
    slowdown: float
    planning_seconds: float

    @property
    def left(self) -> float:
        """Seconds of the total not spent (negative after an overrun)."""
        return self.total_budget - self.spent

    @property
    def within_budget(self) -> bool:
        return self.spent <= self.total_budget

    def as_dict(self) -> dict:
        """The fields and ``left``, ``within_budget``, as plain values."""
        return {**asdict(self), "left": self.left, "within_budget": self.within_budget}


class BatchAccount:
    """The running account of one batch: the current plan, the time left, each next item's budget.

    Items are served in order: for item ``i`` call :meth:`budget` and, once it is served,
    :meth:`record`. See the module docstring for the plan, the re-plans and the invariant.

    Parameters
    ----------
    index : CostSensitiveIndex
    sizes : array-like of float, shape (N,)
    total_budget : float
        Seconds for the whole batch (``inf``: each item its most accurate set and no limit on the
        clock; never re-plans).
    replan_every : int, optional
        Re-plan after this many items at the latest. ``None``: once a quarter of the items left
        at the last plan are served (:data:`REPLAN_FRACTION`).
    drift : float, default :data:`DEFAULT_DRIFT`
        Re-plan at once when the realised spend since the last plan differs from the expected
        by more than this fraction of the time that plan had (``inf``: never on drift).
    calibrate : bool, default True
        Plan the rest for ``time left / slowdown``.
    max_item_budget : float, optional
        No item is given a budget above this.
    exact : bool, default False
        Solve the first plan as an integer program (``scipy.optimize.milp``, with the default time
        limit and fallback of :func:`~polydom.index.serving.planning.plan_batch`); re-plans use the
        greedy solver, which is within one item's accuracy range of it.
    clock : callable, default time.perf_counter
        Times the planning only.

    Attributes
    ----------
    plan : BatchPlan
        The first plan, in input order, made before any item is served; its ``choices`` are the
        sets serving is expected to deliver, at their predicted costs.
    replans : int
    """

    def __init__(self, index, sizes, total_budget: float, *, replan_every: int | None = None,
                 drift: float = DEFAULT_DRIFT, calibrate: bool = True, max_item_budget: float | None = None,
                 exact: bool = False, clock=time.perf_counter):
        self.total_budget = check_total_budget(total_budget)
        if replan_every is not None and (isinstance(replan_every, bool) or not isinstance(replan_every, (int, np.integer))
                                         or replan_every < 1):
            raise ValueError(f"replan_every must be a positive integer or None, got {replan_every!r}")
        self.drift = as_real("drift", drift)
        if not self.drift >= 0:
            raise ValueError(f"drift must be >= 0, got {drift!r}")
        self.index, self.calibrate, self._clock = index, bool(calibrate), clock
        start = clock()
        self._table, self._allowed = served_options(index, sizes, max_item_budget=max_item_budget)
        n = len(self._table)
        self.replan_every = None if replan_every is None else int(replan_every)
        self._spend = np.zeros(n)  # item -> predicted cost of its planned set
        self._budget = np.zeros(n)  # item -> the budget that gets that set served
        self.plan: BatchPlan = self._solve(0, self.total_budget, exact)
        self._planning = clock() - start
        self.replans = 0
        self._spent = self._measured = self._predicted = self._accuracy = 0.0
        self._served = 0
        self._since_start, self._since_left, self._since_factor = 0, self.total_budget, 1.0
        self._since_planned = self._since_spent = 0.0

    def __len__(self) -> int:
        return len(self._table)

    def _solve(self, start: int, budget: float, exact: bool = False) -> BatchPlan:
        """Plan items ``start..N-1`` within ``budget`` of predicted cost (in spread order)."""
        rows = start + spread_order(len(self) - start)
        rest = _rows(self._table, rows)
        try:
            position, bound, optimal, solver = solve_table(rest, budget, exact=exact)
        except ValueError:
            if start == 0:
                raise  # the caller's total: name it
            # Even the cheapest sets of the rest exceed what is left: plan those, and let the
            # cap in ``budget`` give each item no more than is left when its turn comes.
            position, bound, optimal = np.zeros(len(rest), dtype=np.intp), math.inf, False
            solver = "milp" if exact else "greedy"
        at = np.arange(len(rest))
        self._spend[rows] = rest.costs[at, position]
        self._budget[rows] = self._allowed[rows, position]
        key, acc = np.empty(len(rest), dtype=np.int64), np.empty(len(rest))
        key[rows - start], acc[rows - start] = rest.masks[at, position], rest.accuracy[at, position]
        cost = self._spend[start:]
        mean = float(acc.mean()) if len(acc) else 0.0
        choices = Batch.of(self.index, key, acc, cost.copy())
        return BatchPlan(choices, math.fsum(cost.tolist()),
                         float(budget), max(bound / len(acc) if len(acc) else 0.0, mean), solver, bool(optimal))

    @property
    def spent(self) -> float:
        """Measured seconds booked so far."""
        return self._spent

    @property
    def slowdown(self) -> float:
        """Measured over predicted seconds of the sets served so far, at least 1."""
        if not self.calibrate or self._predicted <= 0:
            return 1.0
        return max(1.0, self._measured / self._predicted)

    def budget(self, i: int) -> float:
        """Item ``i``'s budget: what gets its planned set served, capped by the time left. ``O(1)``.

        With an infinite total, no limit: the planned set is then the most accurate, and a
        feature slower than its curve must not make the clock stop short of it.
        """
        if math.isinf(self.total_budget):
            return math.inf
        return max(0.0, min(float(self._budget[i]), self.total_budget - self._spent))

    def record(self, i: int, measured: float, predicted: float, accuracy: float) -> None:
        """Book item ``i``: its measured seconds, the predicted cost and accuracy of the set served.

        Re-plans the items after ``i`` when due; ``O(1)`` otherwise.
        """
        self._spent += measured
        self._served += 1
        self._accuracy += accuracy
        if predicted > 0:  # a set with nothing to compute says nothing about the clock
            self._measured += measured
            self._predicted += predicted
        self._since_planned += float(self._spend[i])
        self._since_spent += measured
        following = i + 1
        if following >= len(self) or math.isinf(self.total_budget) or self._spent >= self.total_budget:
            return  # nothing to plan: no items left, no limit, or nothing left (``budget`` gives 0)
        drifted = abs(self._since_spent - self._since_factor * self._since_planned) > self.drift * self._since_left
        every = self.replan_every or max(1, math.ceil(REPLAN_FRACTION * (len(self) - self._since_start)))
        if drifted or following - self._since_start >= every:
            began = self._clock()
            left, factor = self.total_budget - self._spent, self.slowdown
            self._solve(following, left / factor)
            self._since_start, self._since_left, self._since_factor = following, left, factor
            self._since_planned = self._since_spent = 0.0
            self.replans += 1
            self._planning += self._clock() - began

    def summary(self) -> BatchSpend:
        """The realised spend so far, against the total and the first plan."""
        return BatchSpend(
            total_budget=self.total_budget, items=len(self), spent=self._spent, planned_cost=self.plan.total_cost,
            planned_accuracy=self.plan.mean_accuracy,
            served_accuracy=self._accuracy / self._served if self._served else 0.0,
            replans=self.replans, slowdown=self.slowdown, planning_seconds=self._planning,
        )
