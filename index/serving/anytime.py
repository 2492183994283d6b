"""Anytime PolyDom: prefix chains for every servable set, and serving on a real clock.

A lookup provisions from predicted costs; real features finish early or late. For every set the
index can serve, the build trains the models of a *chain* of its prefixes, ordered so that the
features worth most accuracy per unit of cost come first. Serving then computes the chosen set's
features one at a time:

* the target is the lookup's set, unless the cost guards
  (:meth:`~polydom.index.protocol.CostSensitiveIndex.cost_guards`) leave it no room: a set
  *has room* when the time left covers its uncomputed features' predicted costs plus the
  largest ``(guard - 1) * cost`` among them; the target is then the most accurate servable set
  that has room;
* before each feature, if the time used plus the feature's guarded predicted cost no longer
  fits the budget, the walk *retargets* to the most accurate servable set that still has room
  and beats what is computed, or else stops and serves the most accurate set among those fully
  computed (a prefix of a chain, or ``{}``) -- it never starts a feature the clock says cannot
  fit;
* after each feature, it asks the skyline again with the time left, counting the features
  already computed as free; a set more accurate than the target by more than the index's tie
  tolerance that now has room becomes the target (an *upgrade*); computed features are never
  computed again.

With a clock that matches the predicted costs and guards of 1 this serves exactly what
:meth:`lookup` returns.

*What is at stake* (guarded walks). The guard bounds the feature's own risk: it is the
feature's cost at the guard quantile (0.9 by default), so a start the guard allows finishes in
time but for that quantile's complement of the calls. The walk also weighs what the start is worth: a late answer
counts as wrong, so starting the next feature of the target pays only when the chance ``p`` that
it finishes in the time left (the target's other features reserved at their predicted costs)
times the target's accuracy beats the accuracy already computed. Where the fall-back is the
majority class (0.10) and the target gives 0.85, any ``p`` above 0.12 pays, and the guard alone
decides; where the fall-back gives 0.90 and the target 0.92, ``p`` must exceed 0.978, which a
feature preempted in 6% of its calls does not reach. ``p`` is the share of the feature's recent
calls that would have fitted (:meth:`~polydom.index.serving.guards.ServingGuards.finish_chance`,
preempted calls included) where serving has learned one, else the fit's guard read as the guard
quantile of a log-normal law with median 1. A refused target is not tried again in that walk.
The late share the rule accepts is therefore the guard quantile's complement per start (10% by
default, :data:`DEFAULT_GUARD_QUANTILE`); the stake only ever refuses more.

*Exploring.* A guard that refuses a feature also keeps serving from measuring it, so a fit's guard
taken on a busier machine than the one serving would refuse for good. Where serving learns
guards, a band has no learned guard of its own for the feature yet, its predicted cost alone fits,
and the stake pays on the fit's guard, the walk starts it anyway and records the call
(``("explore", name)``): at most ``min_calls`` such starts per feature and size band
(:meth:`~polydom.index.serving.guards.ServingGuards.wants_sample`), after which the band's own guard
decides (``docs/decisions/start-rule.md`` has the evidence).

*Trying past the guard* (``speculate=True``). At the tightest budgets the guard may refuse a
feature that usually fits, and the walk answers with ``{}`` (why: ``docs/decisions/speculation.md``).
When the walk would stop there, the next feature's *unguarded* predicted cost still fits, and finishing it would serve a
more accurate set, the walk may start it with a deadline: ``compute(name, deadline)``, where
``deadline`` is the clock reading by which the walk must answer, either returns in time or raises
:class:`FeatureTimeout` at the deadline, and the walk then answers with what it had. On a clock
that keeps the contract the answer is never late; a real one pays the hand-off to whatever
computes the feature, the wake-up at the deadline, and a computation abandoned in the background
that shares the machine with the next requests, so the classifier leaves it off by default.
Speculative calls do not teach the serving guards (those that finish are the fast ones).

*Traced walks.* A walk that depends on nothing but the index, the item size, the budget and its
own elapsed time (no learned guards, no cascade, no speculation) decides the same things as the
walk before it over whole intervals of elapsed time: from the second walk of a size and budget on
it follows the trace the earlier walks recorded and reasons only where the trace does not hold
(:mod:`polydom.index.serving.walktrace`, ``docs/decisions/walk-bookkeeping.md``).

Invariants (checked by :func:`check_chains`): every chain is a permutation of its set's
features, and every prefix of it (``{}`` and the set included) is a trained set.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from polydom.index.errors import FeatureTimeout  # noqa: F401 - defined with the package's errors
from polydom.index.queries import BUDGET_SLACK

# The walk's parts, each in a module of its own; their names stay importable from here.
from polydom.index.serving.prefixes import (  # noqa: F401
    _best_computed,
    _best_computed_adding,
    _worth_trying,
    chain_prefixes,
    ranked_prefixes,
    walk_order,
)
from polydom.index.serving.stake import _Stake, law_chance  # noqa: F401
from polydom.index.serving.walkprep import DEFAULT_GUARD_QUANTILE, _best_with_room, _Need, _Prepared, prepared  # noqa: F401
from polydom.index.serving.walktrace import Node, edge

__all__ = ["FeatureTimeout", "chain_order", "chain_prefixes", "check_chains", "ranked_prefixes", "serve_anytime"]


def chain_order(mask: int, trained: Mapping[int, float], unit_costs: Sequence[float],
                requires: Mapping[int, int] | None = None) -> tuple[int, ...]:
    """The features of ``mask`` (indices), best accuracy gained per predicted cost first.

    Built greedily: from the current prefix ``P``, the next feature ``f`` maximises
    ``(a(P + f) - a(P)) / c(f)`` over the features left, reading ``a(P + f)`` where that set was
    trained and ``a({f})`` otherwise (a feature's own worth when the pair is unknown). Ties go to
    the cheaper feature, then the lower index, so the order is deterministic.

    Parameters
    ----------
    mask : int
    trained : mapping of mask to accuracy
    unit_costs : sequence of float
        Each feature's predicted cost at the reference size.
    requires : mapping of int to int, optional
        A feature's index to the mask of the preparatory steps it needs (:mod:`polydom.steps`):
        it comes after them, so a walk computes each step before the features that use it.
    """
    left = [i for i in range(mask.bit_length()) if mask >> i & 1]
    order: list[int] = []
    prefix = 0
    base = trained.get(0, 0.0)
    while left:
        here = trained.get(prefix, base)

        def gain(i: int) -> float:
            after = trained.get(prefix | 1 << i)
            if after is None:
                after = max(here, trained.get(1 << i, base))
            return (after - here) / max(unit_costs[i], 1e-300)

        ready = [i for i in left if not (requires or {}).get(i, 0) & ~prefix & mask] or left
        best = max(ready, key=lambda i: (gain(i), -unit_costs[i], -i))
        order.append(best)
        left.remove(best)
        prefix |= 1 << best
    return tuple(order)


def check_chains(chains: Mapping[int, Sequence[int]], trained: Mapping[int, float]) -> None:
    """Assert the module's invariants."""
    for mask, order in chains.items():
        assert sorted(order) == [i for i in range(mask.bit_length()) if mask >> i & 1], f"chain of {mask} is not its features"
        assert all(p in trained for p in chain_prefixes(order)), f"a prefix of the chain of {mask} was not trained"


def serve_anytime(
    index,
    size: float,
    budget: float,
    compute: Callable[[str], object],
    clock: Callable[[], float],
    *,
    stop_when_confident: bool = False,
    guarded: bool = True,
    serving_guards=None,
    speculate: bool = False,
    cpu_clock: Callable[[], float] | None = None,
    late_price=None,
):
    """Serve ``(size, budget)`` on ``clock``; see the module docstring for the rules.

    Parameters
    ----------
    index : PolyDomIndex
        With ``chains`` for its candidates.
    compute : callable
        ``compute(name)``, called at most once per feature; with ``stop_when_confident`` it must
        return the feature's 1-D vector (the prefix models read them, concatenated in feature
        order).
    clock : callable
        Read once before the first feature and once after each.
    stop_when_confident : bool, default False
        After each completed prefix of the target's chain, ask that prefix's model and stop when
        its confidence in the predicted class clears the cascade threshold
        (:class:`~polydom.index.cascade.Cascades`).
    guarded : bool, default True
        Apply the index's cost guards to the decision to start a feature (and to upgrades).
    serving_guards : ServingGuards, optional
        With ``guarded``: take the guards from it (learned from earlier walks' measured times,
        :mod:`polydom.index.serving.guards`) and record this walk's times in it.
    speculate : bool, default False
        Where the guards stop the walk, start the next feature anyway if its unguarded
        predicted cost fits and it would serve a more accurate set, calling
        ``compute(name, deadline)`` (module docstring, *trying past the guard*).
    cpu_clock : callable, optional
        The computing thread's CPU clock (``time.thread_time`` when ``compute`` runs on the
        calling thread), read around each computed feature so that ``serving_guards`` learns the
        feature's own cost apart from the machine's scheduling
        (:mod:`polydom.index.serving.guards`).
    late_price : LatePrice, optional
        With ``guarded``: the price of a late answer at this size and budget
        (:class:`~polydom.index.serving.lateness.LatePrice`), which weighs each start against the
        lateness it risks; told afterwards whether this answer was late.

    Returns
    -------
    (mask, elapsed, steps)
        The set served (a trained set whose features were all computed), the measured time, and
        what happened, as ``("compute", name)``, ``("upgrade", mask)``, ``("retarget", mask)``,
        ``("stop", name)``, ``("confident", mask)``, ``("speculate", name)`` (started past the
        guard), ``("abandon", name)`` (it missed the deadline) and ``("explore", name)`` (started
        past the fit's guard to learn the feature's cost, then computed) events in order.
    """
    start = clock()
    prep = prepared(index)
    at = prep.at(index, size)
    price = late_price.price(size, budget) if guarded and late_price is not None else 0.0
    root = None
    # A walk that depends on nothing but the index, the size, the budget and its elapsed time
    # follows its trace (polydom.index.serving.walktrace); a learning, cascading or speculating one reasons
    # in full every time.
    if not (stop_when_confident or speculate or (guarded and serving_guards is not None)):
        traces, key = at.traces, (budget, guarded, price)
        root = traces.get(key)
        if root is None:
            # Traced from the second walk on, so that budgets that change from walk to walk (a
            # stream's) are never traced.
            if len(traces) >= _TRACES_KEPT:
                traces.clear()
            traces[key] = _SEEN
        elif root is not _SEEN:
            node, served, elapsed, steps = _follow(root, index.space.names, compute, clock, start)
            if node is None:
                if guarded and late_price is not None:
                    late_price.observe(size, budget, elapsed > budget)  # nothing computed: elapsed is 0
                return served, elapsed, steps
    walk = _Walk(index, prep, at, size, budget, compute, clock, start, guarded=guarded, serving_guards=serving_guards,
                 speculate=speculate, cpu_clock=cpu_clock, price=price, stop_when_confident=stop_when_confident)
    if isinstance(root, Node):  # fell off the trace at ``node``: reason from there
        walk.resume(node, elapsed, steps)
        served, elapsed, steps = walk.run(node if node.has_room() else None, node.after_compute)
    else:
        walk.target = walk.first_target()
        if root is _SEEN:
            if prep.traced >= _TRACED_KEPT:  # memory stays bounded whatever sizes and budgets come
                for entry in prep.by_size.values():
                    entry.traces.clear()
                prep.traced = 0
            prep.traced += 1
            root = traces[key] = Node(walk.target, 0, 0, frozenset(), False)
        served, elapsed, steps = walk.run(root, False)
    if guarded and late_price is not None:
        # An answer that computed nothing spent nothing (serving reports 0 for it): never late.
        late_price.observe(size, budget, bool(walk.computed) and elapsed > budget)
    return served, elapsed, steps


#: Marks a (budget, guarded, price) walked once at a size, not yet traced.
_SEEN = object()

#: Budgets traced per item size; the table is cleared when full.
_TRACES_KEPT = 64

#: Traces an index version keeps over all sizes (each of at most walktrace.MAX_NODES nodes);
#: all are dropped when one more would be made.
_TRACED_KEPT = 512


def _follow(node: Node, names, compute, clock, start: float):
    """Walk along a trace from ``node``: ``(None, served, elapsed, steps)`` at its end, or
    ``(node, None, elapsed, steps)`` where no branch holds the elapsed time."""
    steps: list = []
    elapsed = 0.0
    while True:
        for low, high, events, feature, name, step, after in node.branches:
            if low <= elapsed <= high:
                break
        else:
            return node, None, elapsed, steps
        if events:
            steps += events
        if feature < 0:
            return None, after, elapsed, steps
        compute(name)
        elapsed = clock() - start
        steps.append(step)
        node = after


class _Walk:
    """One walk: its context (the index at this size, budget, guards, stake) and its state
    (target, computed, served, refused targets, elapsed time, steps). :meth:`segment` takes the
    decisions between two features as the module docstring states them; with ``record`` it
    also narrows ``low``/``high`` to the elapsed times over which it would take the same ones
    (:mod:`polydom.index.serving.walktrace`)."""

    def __init__(self, index, prep, at, size, budget, compute, clock, start, *, guarded, serving_guards, speculate,
                 cpu_clock, price, stop_when_confident):
        cost, fit_guards, laws, totals, needs = at.costs, at.guards, at.laws, at.totals, at.needs
        if not guarded:
            guards = prep.ones
        elif serving_guards is not None:
            guards = index.walk_guards(size, guarded, serving_guards)
        else:
            guards = fit_guards
        self.learn = serving_guards if guarded else None
        if guarded and not prep.start_cap:
            # No per-start cap: every start is weighed by its chance to finish (the stake), and a
            # set has room when its predicted costs fit (module docstring, *what is at stake*).
            stake_guards, guards = guards, prep.ones
        else:
            stake_guards = guards
        # The needs depend on the guards: kept per size for the fit's guards and for none, made
        # anew for guards a server learned (they move from walk to walk).
        memo = needs.setdefault(guards is fit_guards, {}) if guards is fit_guards or guards is prep.ones else None
        self.index, self.prep, self.size, self.budget = index, prep, size, budget
        self.compute, self.clock, self.start, self.cpu_clock = compute, clock, start, cpu_clock
        self.cost, self.guards, self.need = cost, guards, _Need(cost, guards, totals, memo)
        self.limit = budget * BUDGET_SLACK  # the lookup's, so a clock matching the curves serves what it does
        self.speculate, self.stop_when_confident = speculate, stop_when_confident
        self.stake = _Stake(index, stake_guards, serving_guards, size, price, laws, prep.z) if guarded else None
        self.names = index.space.names
        self.target = 0
        self.computed = 0
        self.served = 0  # the best fully computed trained set so far
        self.refused: set[int] = set()  # targets whose next feature the start rule would not start
        self.elapsed = 0.0
        self.steps: list[tuple[str, object]] = []
        self.values: dict[int, object] = {}
        self.low, self.high = -math.inf, math.inf

    def first_target(self) -> int:
        """The lookup's set, or where the guards leave it no room the best set that has room."""
        index, need, limit = self.index, self.need, self.limit
        target = index.lookup(self.size, self.budget).key
        if need(target, 0) > limit:
            roomy = _best_with_room(index, self.size, 0, limit, need, lambda c, acc: True)
            # ... unless none has: a speculative or exploring walk may still try the lookup's first feature.
            target = roomy if roomy or not (self.speculate or self.learn is not None) else target
        return target

    def resume(self, node: Node, elapsed: float, steps: list) -> None:
        """Take up the state of a trace's ``node`` at ``elapsed``, ``steps`` recorded so far."""
        self.target, self.computed, self.served = node.target, node.computed, node.served
        self.refused = set(node.refused)
        self.elapsed, self.steps = elapsed, steps

    def run(self, node: Node | None, after_compute: bool):
        """Walk to the end from the current state: ``(served, elapsed, steps)``. Each segment is
        recorded as a branch of ``node`` (then of the node after it) while the trace has room."""
        names, steps, trained = self.names, self.steps, self.index.trained
        while True:
            mark = len(steps)
            record = node is not None and node.has_room()
            self.low, self.high = -math.inf, math.inf
            nxt, tried = self.segment(after_compute, record)
            if not (record and self.low <= self.elapsed <= self.high):
                node = None  # nothing past a segment that was not recorded is recorded
            if nxt is None:
                if node is not None:
                    node.add(self.low, self.high, tuple(steps[mark:]), -1, None, self.served)
                return self.served, self.elapsed, steps
            learn = self.learn
            cpu_before = self.cpu_clock() if self.cpu_clock is not None and learn is not None else None
            try:
                if tried:
                    self.values[nxt] = self.compute(names[nxt], self.start + self.budget)
                else:
                    self.values[nxt] = self.compute(names[nxt])
            except FeatureTimeout:
                self.elapsed = self.clock() - self.start
                steps.append(("abandon", names[nxt]))
                return self.served, self.elapsed, steps
            self.computed |= 1 << nxt
            before, self.elapsed = self.elapsed, self.clock() - self.start
            if learn is not None and not tried:  # the tried calls that finish are the fast ones
                learn.observe(nxt, self.size, self.cost[nxt], self.elapsed - before,
                              None if cpu_before is None else self.cpu_clock() - cpu_before)
            steps.append(("compute", names[nxt]))
            self.served = _best_computed_adding(self.prep, self.computed, self.served, nxt, trained)
            if node is not None:
                after = Node(self.target, self.computed, self.served, frozenset(self.refused), True, node.root)
                node.add(self.low, self.high, tuple(steps[mark:-1]), nxt, names[nxt], after)
                node = after
            after_compute = not tried

    def segment(self, after_compute: bool, record: bool) -> tuple[int | None, bool]:
        """The decisions up to the next feature to compute: ``(feature, tried)``, or
        ``(None, False)`` when the walk ends (``served`` then holds the answer)."""
        index, size, need, cost, guards = self.index, self.size, self.need, self.cost, self.guards
        computed, elapsed, limit, refused, steps = self.computed, self.elapsed, self.limit, self.refused, self.steps
        remaining = limit - elapsed
        target = self.target
        if after_compute:
            if self.stop_when_confident:
                order = walk_order(index.chains, target)
                prefix = _confident_prefix(index, target, order, computed, self.values)
                if prefix is not None:
                    self.served = prefix
                    steps.append(("confident", prefix))
                    return None, False
            t = self.prep.position[target]
            floor = index.candidate_accuracy[t]
            # A refused target is not tried again in this walk (it would only be refused again).
            beats = lambda c, acc: (  # noqa: E731
                acc > floor and acc - floor > index.tolerance_between(t, c) and index.candidates[c] not in refused)
            better = _best_with_room(index, size, computed, remaining, need, beats, floor)
            if record:
                self._room_window(beats, floor, better)
            if better is not None:
                target = self.target = better
                steps.append(("upgrade", better))
        stake = self.stake
        while True:
            order = walk_order(index.chains, target)
            pending = [i for i in order if not computed >> i & 1]
            if not pending:
                self.served = target
                return None, False
            nxt = pending[0]
            guard_refuses = elapsed + cost[nxt] * guards[nxt] > limit
            starts = not guard_refuses and (
                stake is None or stake.pays(nxt, pending, cost, remaining, target, self.served))
            if record:
                self._start_window(nxt, pending, target, starts)
            if starts:
                return nxt, False
            # Fall back: a set that still has room, more accurate than what is computed, if any.
            refused.add(target)
            floor = index.trained.get(self.served, -1.0)
            beats = lambda c, acc: acc > floor and index.candidates[c] not in refused  # noqa: E731
            other = _best_with_room(index, size, computed, remaining, need, beats, floor)
            if record:
                self._room_window(beats, floor, other)
            if other is not None and other != target:
                target = self.target = other
                steps.append(("retarget", other))
                continue
            learn = self.learn
            if (guard_refuses and learn is not None and elapsed + cost[nxt] <= limit
                    and stake.pays(nxt, pending, cost, remaining, target, self.served)
                    and learn.wants_sample(nxt, size)):
                # The fit's guard alone refuses it, and this band has not measured it: learn what
                # it costs here (a few starts per feature and band, module docstring, *exploring*).
                steps.append(("explore", self.names[nxt]))
                return nxt, False
            if not (self.speculate and elapsed + cost[nxt] <= limit
                    and _worth_trying(index, nxt, computed, self.served)):
                steps.append(("stop", self.names[nxt]))
                return None, False
            steps.append(("speculate", self.names[nxt]))
            return nxt, True

    def _narrow(self, low: float, high: float) -> None:
        self.low, self.high = max(self.low, low), min(self.high, high)

    def _room_window(self, beats, floor, found) -> None:
        """Narrow the window to the elapsed times at which the room scan with ``beats`` still
        finds ``found``: until ``found`` no longer fits, and since the sets it beats stopped
        fitting."""
        index, size, computed, need, limit, elapsed = (self.index, self.size, self.computed, self.need, self.limit,
                                                       self.elapsed)
        accuracy, candidates = index.candidate_accuracy, index.candidates
        above = -math.inf if found is None else accuracy[self.prep.position[found]]
        least = math.inf  # the least time left at which a more accurate eligible set fits
        for c in index.skyline_ids_at(size):
            if accuracy[c] > above and beats(c, accuracy[c]):
                least = min(least, need(candidates[c], computed))

        def same(x: float) -> bool:
            return _best_with_room(index, size, computed, limit - x, need, beats, floor) == found

        low = -math.inf if least == math.inf else edge(same, elapsed, _past(limit - least, 1.0))
        high = math.inf if found is None else edge(same, elapsed, _past(limit - need(found, computed), -1.0))
        self._narrow(low, high)

    def _start_window(self, feature: int, pending, target: int, starts: bool) -> None:
        """Narrow the window to the elapsed times at which the start rule decides ``starts``
        again for ``feature``: it starts until its guarded cost or its stake no longer pays."""
        cost, limit, stake, served = self.cost, self.limit, self.stake, self.served
        guard_cost = cost[feature] * self.guards[feature]

        def rule(x: float) -> bool:
            return not x + guard_cost > limit and (
                stake is None or stake.pays(feature, pending, cost, limit - x, target, served))

        turn = limit - guard_cost
        if stake is not None:
            turn = min(turn, limit - stake.room_for(feature, pending, cost, target, served))
        if starts:
            self._narrow(-math.inf, edge(rule, self.elapsed, _past(turn, -1.0)))
        else:
            self._narrow(edge(lambda x: not rule(x), self.elapsed, _past(turn, 1.0)), math.inf)


def _past(x: float, direction: float) -> float:
    """``x`` moved a hair in ``direction`` (+1 later, -1 earlier), past a threshold's rounding."""
    return x + direction * (abs(x) * 1e-12 + 1e-15)


def _confident_prefix(index, target: int, order, computed: int, values) -> int | None:
    """The target chain's newest complete prefix, if it is confident enough to stop (its
    committee decides where it has one, its model elsewhere)."""
    done = 0
    while done < len(order) and computed >> order[done] & 1:
        done += 1
    if done == 0 or done == len(order) or order[done - 1] not in values:
        return None  # nothing new completed, or the whole set is computed anyway
    prefix = chain_prefixes(order)[done]
    model = index.models.get(prefix)
    if model is None:
        return None
    import numpy as np

    x = np.concatenate([np.ravel(values[i]) for i in sorted(order[:done])])
    return prefix if index.cascades.confident(target, done - 1, model, x, prefix) else None
