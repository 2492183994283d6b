"""Batch planning: one total budget shared by many items, each choosing among its own options.

Every item ``i`` of a batch is served one of the sets the index can serve at its size
(:meth:`~polydom.index.protocol.CostSensitiveIndex.options_at`), at that set's cost at the
item's size. Choosing one set per item to maximise the summed accuracy with the summed cost
within ``total_budget`` is a multiple-choice knapsack. Two solvers:

* **greedy** (default): the LP relaxation on the upper convex hull of each item's
  ``(cost, accuracy)`` points. Every item starts at its cheapest option; the hull's steps of
  all items are taken in decreasing order of accuracy gained per unit of cost until the next
  one does not fit. The LP optimum takes that step fractionally (at most one item is
  fractional); the plan rounds it down, so it is never above the budget and at most one item's
  accuracy range below the LP bound, hence below the integer optimum. Leftover budget then goes
  to steps of other items that still fit and to a few single-item upgrades off the hull.
  ``O(K log K)`` for ``K`` options over the batch (``N * M``): one sort of the hull steps,
  after the hulls (see :func:`upper_hull`).
* **exact** (``exact=True``): the integer program, solved by :func:`scipy.optimize.milp`
  (HiGHS) on a sparse constraint matrix with a time limit: by default
  :func:`default_time_limit` (1 s plus 1 ms per item, at most 60 s), since HiGHS can spend
  minutes proving what the greedy plan already reaches. Should the solver stop at its limit,
  the plan is the better of its best one and the greedy plan (the greedy one when it found
  none), marked ``optimal=False`` unless the greedy plan meets the LP bound.

Invariants of every plan: one set per item, each one of the item's options at its size (under
``max_item_budget`` when given); the total predicted cost, summed exactly, at most
``total_budget``; the mean accuracy at most the plan's ``accuracy_bound``. The last two are
checked by :meth:`BatchPlan.check_invariants`, which needs no index.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from polydom.index.queries import Batch, as_real
from polydom.index.serving.optiontable import OptionTable, hull_columns, hull_steps, option_table, upper_hull

__all__ = ["BatchPlan", "OptionTable", "Solution", "option_table", "upper_hull", "hull_steps", "plan_batch", "solve",
           "solve_table", "default_time_limit", "MILP_MAX_VARIABLES", "DEFAULT_TIME_LIMIT", "MILP_SECONDS_BASE",
           "MILP_SECONDS_PER_ITEM"]

#: Above this many binary variables (options over the whole batch, after dominated and
#: unaffordable options are dropped) ``exact=True`` refuses. HiGHS holds several copies of the
#: model and its LP factorisation: the process grew by about 1.8 kB per variable when measured
#: at half a million, so two million need some 4 GB.
MILP_MAX_VARIABLES = 2_000_000
#: The most seconds :func:`default_time_limit` gives HiGHS (at 60,000 items and above).
DEFAULT_TIME_LIMIT = 60.0
#: :func:`default_time_limit`: this many seconds, plus :data:`MILP_SECONDS_PER_ITEM` per item.
#: Measured on the demo's index at the default gap, HiGHS needed 0.1 s for 100 items, 0.2 s for
#: 1,000 and 5.6 s for 10,000, so the default leaves it about twice that; on one batch of 117
#: items it spent 35 s to reach the objective the greedy plan reaches in 3 ms.
MILP_SECONDS_BASE = 1.0
MILP_SECONDS_PER_ITEM = 1e-3
#: Relative gap at which HiGHS stops by default (its own default). The LP bound is within one
#: item of the optimum, so on large batches a much smaller gap can only be proven by branching:
#: at 1e-6 a 1,000-item plan took minutes when measured, against about a second at 1e-4.
MILP_REL_GAP = 1e-4
#: Greedy's last stage tries at most this many single-item upgrades with what is left; each one
#: is O(K), and the leftover is below one hull step, so more rarely find anything.
_UPGRADE_ROUNDS = 4


# --------------------------------------------------------------------------- the options


@dataclass(frozen=True)
class BatchPlan:
    """A plan for a batch under one total budget.

    Attributes
    ----------
    choices : Batch
        Per item (in input order) the set to compute: ``keys``, ``accuracy`` (the accuracy the
        plan maximised: the index's, or the overrides) and ``cost`` (predicted, at the item's
        size). ``choices[i]`` is a :class:`~polydom.index.values.Choice`.
    total_cost : float
        Summed predicted cost, ``<= total_budget``.
    total_budget : float
    accuracy_bound : float
        No plan has a higher mean accuracy: the LP relaxation's value (greedy) or the
        solver's dual bound (exact).
    solver : str
        ``"greedy"`` or ``"milp"``.
    optimal : bool
        Greedy: the plan meets the LP bound, so no plan is better. Exact: the solver finished
        within its gap (``mip_rel_gap``) rather than at its time limit.
    """

    choices: Batch
    total_cost: float
    total_budget: float
    accuracy_bound: float
    solver: str
    optimal: bool

    def __len__(self) -> int:
        return len(self.choices)

    @property
    def mean_accuracy(self) -> float:
        """Mean accuracy of the chosen sets (0 for an empty batch)."""
        return float(np.mean(self.choices.accuracy)) if len(self.choices) else 0.0

    @property
    def mean_cost(self) -> float:
        """Mean predicted cost per item (0 for an empty batch)."""
        return self.total_cost / len(self.choices) if len(self.choices) else 0.0

    def check_invariants(self) -> None:
        """Assert the plan's invariants: the total fits the budget and matches the items' costs."""
        assert self.total_cost <= self.total_budget, (self.total_cost, self.total_budget)
        assert self.total_cost == math.fsum(self.choices.cost.tolist())
        assert self.mean_accuracy <= self.accuracy_bound + 1e-9


def plan_batch(
    index,
    sizes,
    total_budget: float,
    *,
    max_item_budget: float | None = None,
    exact: bool = False,
    accuracy: np.ndarray | Callable | None = None,
    time_limit: float | None = None,
    mip_rel_gap: float = MILP_REL_GAP,
) -> BatchPlan:
    """Choose one set per item so the batch's summed accuracy is highest within ``total_budget``.

    Parameters
    ----------
    index : CostSensitiveIndex
        Any backend; its :meth:`options_at` lists what each item may be served.
    sizes : array-like of float, shape (N,)
        The items' sizes, in the index's domain.
    total_budget : float
        The batch's total predicted cost may not exceed this (``inf`` allowed).
    max_item_budget : float, optional
        No single item may be given a set costing more than this at its size.
    exact : bool, default False
        ``False``: the greedy LP-hull solver, ``O(K log K)`` for ``K`` options over the batch,
        at most one item's accuracy range (summed, so ``1/N`` of it in the mean) below the
        optimum. ``True``: the integer program via :func:`scipy.optimize.milp`.
    accuracy : array-like, sequence of rows, or callable, optional
        Per-item accuracy estimates replacing the index's, for callers who have them: an
        ``(N, M)`` array with row ``i`` aligned with ``index.options_at(sizes[i])`` (``M`` the
        widest item's option count; entries past an item's own count are ignored), a sequence
        of ``N`` rows of each item's own length, or ``accuracy(i, masks) -> row`` called once
        per item with that item's option masks.
    time_limit : float, optional
        Seconds for ``exact=True``; default :func:`default_time_limit` (1 s plus 1 ms per item,
        at most 60 s). Should the solver stop there, the plan is the better of its best one and
        the greedy plan (``solver`` says which), with ``optimal=False`` unless the greedy plan
        meets the LP bound.
    mip_rel_gap : float, default 1e-4
        For ``exact=True``: the solver stops once its plan's summed accuracy is within this
        fraction of its upper bound. ``0`` asks for a proof of optimality: quick on small
        batches, possibly beyond ``time_limit`` on thousands of items.

    Returns
    -------
    BatchPlan

    Raises
    ------
    ValueError
        A negative or NaN budget, invalid sizes (naming the position), a batch whose cheapest
        options already exceed ``total_budget``, ``exact=True`` above
        :data:`MILP_MAX_VARIABLES` variables.
    TypeError
        Non-numeric arguments, an index without :meth:`options_at`.

    Examples
    --------
    >>> import polydom
    >>> costs = {"fast": [1.0], "slow": [0.0, 1.0]}
    >>> acc = {frozenset(): .5, frozenset({"fast"}): .7, frozenset({"slow"}): .8,
    ...        frozenset({"fast", "slow"}): .9}
    >>> index = polydom.build(costs, acc.__getitem__)
    >>> plan = index.plan_batch([1.0, 4.0], total_budget=5.0)
    >>> [sorted(plan.choices.features(i)) for i in range(2)], plan.total_cost
    ([['fast', 'slow'], ['fast']], 3.0)
    """
    # An int beyond float range reads as inf, as a lookup's budget does (as_real).
    total_budget = _check_solver_options(total_budget, exact, time_limit, mip_rel_gap)[0]
    table = option_table(index, sizes, max_item_budget=max_item_budget, accuracy=accuracy)
    position, bound, optimal, solver = solve_table(table, total_budget, exact=exact, time_limit=time_limit,
                                                   mip_rel_gap=mip_rel_gap)
    n = len(table)
    rows = np.arange(n)
    cost = table.costs[rows, position]
    acc = table.accuracy[rows, position]
    choices = Batch.of(index, table.masks[rows, position], acc, cost)
    mean = float(acc.mean()) if n else 0.0
    bound = max(bound / n if n else 0.0, mean)
    return BatchPlan(choices, math.fsum(cost.tolist()), float(total_budget), bound, solver, optimal)


def default_time_limit(items: int) -> float:
    """Seconds ``exact=True`` gives the solver by default for a batch of ``items``:
    :data:`MILP_SECONDS_BASE` plus :data:`MILP_SECONDS_PER_ITEM` per item, at most
    :data:`DEFAULT_TIME_LIMIT`.

    >>> default_time_limit(117), default_time_limit(10_000), default_time_limit(10**6)
    (1.117, 11.0, 60.0)
    """
    return min(DEFAULT_TIME_LIMIT, MILP_SECONDS_BASE + MILP_SECONDS_PER_ITEM * items)


class Solution(NamedTuple):
    """What :func:`solve_table` returns."""

    #: Per item the chosen entry of its row; their costs sum (exactly) to at most the budget.
    position: np.ndarray
    #: No plan's *summed* accuracy is higher (LP bound, or the solver's dual bound).
    accuracy_bound: float
    #: As :attr:`BatchPlan.optimal`.
    optimal: bool
    #: Whose plan it is: ``"greedy"`` or ``"milp"`` (``exact=True`` falls back to the greedy
    #: plan when the solver stops at its time limit with a worse one, or none).
    solver: str


def solve(
    table: OptionTable,
    total_budget: float,
    *,
    exact: bool = False,
    time_limit: float | None = None,
    mip_rel_gap: float = MILP_REL_GAP,
) -> tuple[np.ndarray, float, bool]:
    """The plan over a table of options, as positions into its rows (the solvers of :func:`plan_batch`).

    Parameters
    ----------
    table : OptionTable
    total_budget, exact, time_limit, mip_rel_gap
        As for :func:`plan_batch`.

    Returns
    -------
    position : ndarray of intp, shape (N,)
        Per item the chosen entry of its row; their costs sum (exactly) to at most ``total_budget``.
    accuracy_bound : float
        No plan's *summed* accuracy is higher (LP bound, or the solver's dual bound).
    optimal : bool
        As :attr:`BatchPlan.optimal`.

    See Also
    --------
    solve_table : the same, saying also which solver's plan it is.
    """
    position, bound, optimal, _ = solve_table(table, total_budget, exact=exact, time_limit=time_limit,
                                              mip_rel_gap=mip_rel_gap)
    return position, bound, optimal


def solve_table(
    table: OptionTable,
    total_budget: float,
    *,
    exact: bool = False,
    time_limit: float | None = None,
    mip_rel_gap: float = MILP_REL_GAP,
) -> Solution:
    """:func:`solve`, as a :class:`Solution` that also names the solver whose plan it is."""
    budget, limit, gap = _check_solver_options(total_budget, exact, time_limit, mip_rel_gap)
    n = len(table)
    if n == 0:
        return Solution(np.zeros(0, dtype=np.intp), 0.0, True, "milp" if exact else "greedy")
    cheapest = math.fsum(table.costs[:, 0].tolist())
    if cheapest > budget:
        raise ValueError(f"total_budget={budget!r} is below the {cheapest!r} the items' cheapest options cost together")
    if not exact:
        position, bound, optimal = _solve_greedy(table, budget)
        position, repaired = _fit_budget(table, position, budget)
        return Solution(position, bound, optimal and not repaired, "greedy")
    position, bound, finished = _solve_milp(table, budget, default_time_limit(n) if limit is None else limit, gap)
    if position is not None:
        position, repaired = _fit_budget(table, position, budget)
        if finished:
            return Solution(position, bound, not repaired, "milp")
    # Stopped at the time limit: its plan may be far from the optimum (at 10^5 items a plan 4
    # points of accuracy below the greedy one was measured), and the greedy plan costs little.
    greedy, lp, greedy_optimal = _solve_greedy(table, budget)
    greedy, repaired = _fit_budget(table, greedy, budget)
    bound = bound if bound <= lp else lp  # both bound every plan (a NaN dual bound: the LP's)
    rows = np.arange(n)
    if position is not None and (math.fsum(table.accuracy[rows, position].tolist())
                                 >= math.fsum(table.accuracy[rows, greedy].tolist())):
        return Solution(position, bound, False, "milp")
    return Solution(greedy, bound, greedy_optimal and not repaired, "greedy")


def _check_solver_options(total_budget, exact, time_limit, mip_rel_gap) -> tuple[float, float | None, float]:
    budget = as_real("total_budget", total_budget)
    if math.isnan(budget) or budget < 0:
        raise ValueError(f"total_budget must be >= 0, got {total_budget!r}")
    if not isinstance(exact, (bool, np.bool_)):
        raise TypeError(f"exact must be True or False, got {exact!r}")
    limit = None if time_limit is None else as_real("time_limit", time_limit)
    if limit is not None and not limit > 0:
        raise ValueError(f"time_limit must be > 0 seconds, got {time_limit!r}")
    gap = as_real("mip_rel_gap", mip_rel_gap)
    if not 0 <= gap < 1:
        raise ValueError(f"mip_rel_gap must be in [0, 1), got {mip_rel_gap!r}")
    return budget, limit, gap


def _solve_greedy(table: OptionTable, budget: float) -> tuple[np.ndarray, float, bool]:
    """The LP-hull greedy; returns table positions per item, the LP bound (summed) and optimality."""
    n = len(table)
    rows = np.arange(n)
    # Option-major arrays (one row per hull position): see hull_columns.
    positions, lengths, hull_cost, hull_acc = hull_columns(table)
    valid = np.arange(positions.shape[0] - 1)[:, None] < (lengths - 1)[None, :]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        dc, da = np.diff(hull_cost, axis=0), np.diff(hull_acc, axis=0)
        del hull_cost, hull_acc  # arrays of millions of items: freed as soon as they are done with
        slope = np.divide(da, dc)
    slope[~valid] = np.inf
    # Each item's slopes descend by construction; ordering by their running minimum keeps an
    # item's steps in sequence even if rounding in the chord test let one rise by an ulp.
    np.fmin.accumulate(slope, axis=0, out=slope)
    flat = np.flatnonzero(valid)  # step-major: item = flat % n, step = flat // n
    del valid
    flat = flat[_by_gain(slope.reshape(-1)[flat], flat, n)]
    del slope
    dcs, das = dc.reshape(-1)[flat], da.reshape(-1)[flat]
    base = math.fsum(table.costs[:, 0].tolist())
    total = base + np.cumsum(dcs)
    k = int(np.searchsorted(total, budget, side="right"))
    taken = np.bincount(flat[:k] % n, minlength=n)  # steps are taken in order within an item: a count is a hull point
    spent = total[k - 1] if k else base
    lp = math.fsum(table.accuracy[:, 0].tolist()) + math.fsum(das[:k].tolist())
    exact_lp = k == len(dcs)
    if not exact_lp:
        lp += (budget - spent) / dcs[k] * das[k]  # the one fractional item
    left = budget - spent
    later = np.flatnonzero(dcs[k:] <= left) + k
    # In order, as plain numbers: there can be hundreds of thousands over millions of items.
    step, item = np.divmod(flat[later], n)
    for i, s, d in zip(item.tolist(), step.tolist(), dcs[later].tolist()):
        if s == taken[i] and d <= left:
            taken[i] += 1
            left -= d
    position = positions[taken, rows]
    position = _upgrade(table, position, left, hull=True)
    value = math.fsum(table.accuracy[rows, position].tolist())
    return position, lp, exact_lp or value >= lp - 1e-9 * max(1.0, abs(lp))


def _by_gain(key: np.ndarray, flat: np.ndarray, n: int) -> np.ndarray:
    """The order of the steps by ``key`` descending, ties by item, then step (``lexsort``'s).

    ``flat`` holds each step's position in a step-major (steps, ``n`` items) array. An unstable
    sort is about twice as fast as a stable one; then only the runs of equal keys are sorted
    again by (item, step), so the order is the same as the stable sort's.
    """
    negated = -key
    order = np.argsort(negated)
    ranked = negated[order]
    tie = ranked[1:] == ranked[:-1]
    if tie.any():
        run = np.zeros(len(order), dtype=bool)
        run[1:] |= tie
        run[:-1] |= tie
        at = np.flatnonzero(run)  # the runs, in key order: sorting them all together keeps that order
        tied = order[at]
        step, item = np.divmod(flat[tied], n)
        order[at] = tied[np.lexsort((step, item, negated[tied]))]
    return order


def _upgrade(table: OptionTable, position: np.ndarray, left: float, *, hull: bool = False) -> np.ndarray:
    """Spend what is left on the best single-item upgrades, hull or not, a few times over.

    Each round moves the item with the largest gain that fits what is left (the first such item
    among equals) to its most accurate option that fits (the first among equals). After a round
    that leaves less to spend, an item whose best gain was not positive cannot gain, so the
    next round looks only at the items that could and the one just moved.

    ``hull=True`` says every position is a point of its item's upper hull (:func:`hull_columns`)
    and ``left >= 0``. A hull point is more accurate than every cheaper option (the chain pushes
    exactly the options more accurate than all before them), and costs ascend along a row, so an
    item gains only if its next option fits: the first round looks at those items alone.
    """
    n = len(table)
    items = None  # all
    if hull and left >= 0:
        rows = np.arange(n)
        after = np.minimum(position + 1, table.costs.shape[1] - 1)
        nxt = (position + 1 < table.counts) & (table.costs[rows, after] - table.costs[rows, position] <= left)
        items = np.flatnonzero(nxt)
        if not len(items):
            return position
    for _ in range(_UPGRADE_ROUNDS):
        if items is None:
            at, costs, accuracy, valid = np.arange(n), table.costs, table.accuracy, table.valid
        else:
            at = items
            costs, accuracy, valid = table.costs[at], table.accuracy[at], table.valid[at]
        rows = np.arange(len(at))
        cost, acc = costs[rows, position[at]], accuracy[rows, position[at]]
        fits = valid & (costs - cost[:, None] <= left)
        gain = np.where(fits, accuracy - acc[:, None], -np.inf)
        best = np.argmax(gain, axis=1)
        most = gain[rows, best]
        w = int(np.argmax(most))
        if not most[w] > 0:
            break
        i, j = int(at[w]), int(best[w])
        spend = table.costs[i, j] - cost[w]
        left -= spend
        position = position.copy()
        position[i] = j
        items = None if spend < 0 else at[most > 0]  # i among them: its gain was the largest
    return position


def _fit_budget(table: OptionTable, position: np.ndarray, budget: float) -> tuple[np.ndarray, bool]:
    """Downgrade items until the exactly summed cost fits the budget.

    Solvers accumulate costs in floating point (HiGHS also within a feasibility tolerance), so
    their plan can overshoot by a rounding error; each round gives up the least accuracy among
    the downgrades that cover the excess, or frees the most cost if none does.
    """
    rows = np.arange(len(table))
    repaired = False
    while len(rows):
        total = math.fsum(table.costs[rows, position].tolist())
        excess = total - budget
        if excess <= 0:
            break
        repaired = True
        cost, acc = table.costs[rows, position], table.accuracy[rows, position]
        saving = cost[:, None] - table.costs  # padding: -inf
        loss = acc[:, None] - np.nan_to_num(table.accuracy, nan=-np.inf)  # padding: +inf
        covers = saving >= excess
        if covers.any():
            i, j = np.unravel_index(np.argmin(np.where(covers, loss, np.inf)), loss.shape)
        else:
            i, j = np.unravel_index(np.argmax(saving), saving.shape)
        position = position.copy()
        position[i] = j
    return position, repaired


def _solve_milp(table: OptionTable, budget: float, time_limit: float, gap: float):
    """The integer program over each item's Pareto options that fit the budget on their own.

    Returns ``(position, dual bound, finished)``; ``position`` is None when the solver found no
    plan within ``time_limit``.
    """
    from scipy.optimize import LinearConstraint, milp
    from scipy.sparse import csr_array

    n, width = table.costs.shape
    valid = table.valid
    # Dominated options (no more accurate than a cheaper one) never help: drop them, and options
    # no plan can afford, so the solver sees fewer variables.
    running = np.fmax.accumulate(np.where(valid, table.accuracy, -np.inf), axis=1)
    pareto = valid.copy()
    pareto[:, 1:] &= table.accuracy[:, 1:] > running[:, :-1]
    pareto &= table.costs <= budget
    item, pos = np.nonzero(pareto)
    k = len(item)
    if k > MILP_MAX_VARIABLES:
        raise ValueError(
            f"exact=True would need {k:,} binary variables ({n:,} items and their options), above the "
            f"{MILP_MAX_VARIABLES:,} this solver can hold in memory; use exact=False (the greedy plan is "
            f"at most one item's accuracy range below the optimum) or plan smaller batches"
        )
    cost, acc = table.costs[item, pos], table.accuracy[item, pos]
    # Costs in units of the budget, so HiGHS's absolute feasibility tolerance is a relative one.
    scale = budget if 0 < budget < math.inf else max(float(cost.max()), 1.0)
    matrix = csr_array(
        (np.concatenate([np.ones(k), cost / scale]),
         (np.concatenate([item, np.full(k, n)]), np.concatenate([np.arange(k), np.arange(k)]))),
        shape=(n + 1, k),
    )
    lower = np.concatenate([np.ones(n), [-np.inf]])
    upper = np.concatenate([np.ones(n), [budget / scale]])
    result = milp(
        -acc, integrality=np.ones(k), bounds=(0, 1), constraints=LinearConstraint(matrix, lower, upper),
        # Presolve finds next to nothing to remove in one-of-each-row constraints, and skipping
        # it halved the solve at 10^4 items when measured.
        options={"time_limit": time_limit, "mip_rel_gap": gap, "presolve": False, "disp": False},
    )
    bound = -result.mip_dual_bound if result.mip_dual_bound is not None else math.inf
    if result.x is None:
        return None, bound, False
    # One variable per item is 1 up to the integrality tolerance: the largest per item.
    x = result.x
    order = np.lexsort((-x, item))
    first = np.flatnonzero(np.r_[True, item[order][1:] != item[order][:-1]])
    position = np.empty(n, dtype=np.intp)
    position[item[order][first]] = pos[order][first]
    return position, bound, result.status == 0
