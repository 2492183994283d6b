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
calls that would have fitted (:meth:`~polydom.index.servingguards.ServingGuards.finish_chance`,
preempted calls included) where serving has learned one, else the fit's guard read as the guard
quantile of a log-normal law with median 1. A refused target is not tried again in that walk.
The late share the rule accepts is therefore the guard quantile's complement per start (10% by
default, :data:`DEFAULT_GUARD_QUANTILE`); the stake only ever refuses more.

*Exploring.* A guard that refuses a feature also keeps serving from measuring it, so a fit's guard
taken on a busier machine than the one serving would refuse for good. Where serving learns
guards, a band has no learned guard of its own for the feature yet, its predicted cost alone fits,
and the stake pays on the fit's guard, the walk starts it anyway and records the call
(``("explore", name)``): at most ``min_calls`` such starts per feature and size band
(:meth:`~polydom.index.servingguards.ServingGuards.wants_sample`), after which the band's own guard
decides (``docs/start-rule.md`` has the evidence).

*Trying past the guard* (``speculate=True``). At the tightest budgets the guard may refuse a
feature that usually fits, and the walk answers with ``{}`` (why: ``docs/speculation.md``).
When the walk would stop there, the next feature's *unguarded* predicted cost still fits, and finishing it would serve a
more accurate set, the walk may start it with a deadline: ``compute(name, deadline)``, where
``deadline`` is the clock reading by which the walk must answer, either returns in time or raises
:class:`FeatureTimeout` at the deadline, and the walk then answers with what it had. On a clock
that keeps the contract the answer is never late; a real one pays the hand-off to whatever
computes the feature, the wake-up at the deadline, and a computation abandoned in the background
that shares the machine with the next requests, so the classifier leaves it off by default.
Speculative calls do not teach the serving guards (those that finish are the fast ones).

Invariants (checked by :func:`check_chains`): every chain is a permutation of its set's
features, and every prefix of it (``{}`` and the set included) is a trained set.
"""

from __future__ import annotations

import math
import operator
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from statistics import NormalDist

from polydom.lattice import bits_of
from polydom.lattice.errors import PolydomError

from .protocol import law_row

#: The share of measured calls a guarded start covers -- one minus the late share a start may
#: risk: the classifier's guards are taken at it (:mod:`polydom.classifier.calibration`), and a walk reads an
#: index's guards as it when the index states none. ``docs/start-rule.md`` has the evidence.
DEFAULT_GUARD_QUANTILE = 0.9

#: The standard normal law, built once (a walk reads it at every stake).
_NORMAL = NormalDist()

__all__ = ["FeatureTimeout", "chain_order", "chain_prefixes", "check_chains", "ranked_prefixes", "serve_anytime"]


class FeatureTimeout(PolydomError):
    """Raised by ``compute(name, deadline)`` when the feature did not finish by ``deadline``:
    the walk answers with the sets already computed (the module docstring, *trying past the
    guard*)."""


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


def chain_prefixes(order: Iterable[int]) -> list[int]:
    """Masks of every prefix of ``order``, ``{}`` first and the whole set last."""
    out, mask = [0], 0
    for i in order:
        mask |= 1 << i
        out.append(mask)
    return out


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
        :mod:`polydom.index.servingguards`) and record this walk's times in it.
    speculate : bool, default False
        Where the guards stop the walk, start the next feature anyway if its unguarded
        predicted cost fits and it would serve a more accurate set, calling
        ``compute(name, deadline)`` (module docstring, *trying past the guard*).
    cpu_clock : callable, optional
        The computing thread's CPU clock (``time.thread_time`` when ``compute`` runs on the
        calling thread), read around each computed feature so that ``serving_guards`` learns the
        feature's own cost apart from the machine's scheduling
        (:mod:`polydom.index.servingguards`).
    late_price : LatePrice, optional
        With ``guarded``: the price of a late answer at this size and budget
        (:class:`~polydom.index.lateness.LatePrice`), which weighs each start against the
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
    names = index.space.names
    prep = prepared(index)
    cost, fit_guards, laws, totals, needs = prep.at(index, size)
    if not guarded:
        guards = prep.ones
    elif serving_guards is not None:
        guards = index.walk_guards(size, guarded, serving_guards)
    else:
        guards = fit_guards
    learn = serving_guards if guarded else None
    if guarded and not prep.start_cap:
        # No per-start cap: every start is weighed by its chance to finish (the stake), and a set
        # has room when its predicted costs fit (module docstring, *what is at stake*).
        stake_guards, guards = guards, prep.ones
    else:
        stake_guards = guards
    # The needs depend on the guards: kept per size for the fit's guards and for none, made anew
    # for guards a server learned (they move from walk to walk).
    memo = needs.setdefault(guards is fit_guards, {}) if guards is fit_guards or guards is prep.ones else None
    need = _Need(cost, guards, totals, memo)
    limit = budget * _SLACK
    position = prep.position  # candidate id of a mask, for upgrades
    target = index.lookup(size, budget).key
    if need(target, 0) > limit:  # the guards leave no room for the lookup's set: the best that has room
        roomy = _best_with_room(index, size, 0, limit, need, lambda c, acc: True)
        # ... unless none has: a speculative or exploring walk may still try the lookup's first feature.
        target = roomy if roomy or not (speculate or (guarded and serving_guards is not None)) else target
    computed = 0
    elapsed = 0.0
    steps: list[tuple[str, object]] = []
    served = 0  # the best fully computed trained set so far
    values: dict[int, object] = {}
    refused: set[int] = set()  # targets whose next feature the stake rule would not start
    price = late_price.price(size, budget) if guarded and late_price is not None else 0.0
    stake = _Stake(index, stake_guards, serving_guards, size, price, laws, prep.z) if guarded else None
    while True:
        order = index.chains.get(target) or bits_of(target)
        pending = [i for i in order if not computed >> i & 1]
        if not pending:
            served = target
            break
        nxt = pending[0]
        tried = False  # started past its guard, with a deadline
        guard_refuses = elapsed + cost[nxt] * guards[nxt] > limit
        if guard_refuses or (
                stake is not None and not stake.pays(nxt, pending, cost, limit - elapsed, target, served)):
            # Fall back: a set that still has room, more accurate than what is computed, if any.
            refused.add(target)
            floor = index.trained.get(served, -1.0)
            other = _best_with_room(index, size, computed, limit - elapsed, need,
                                    lambda c, acc: acc > floor and index.candidates[c] not in refused, floor)
            if other is not None and other != target:
                target = other
                steps.append(("retarget", other))
                continue
            if (guard_refuses and learn is not None and elapsed + cost[nxt] <= limit
                    and stake.pays(nxt, pending, cost, limit - elapsed, target, served)
                    and learn.wants_sample(nxt, size)):
                # The fit's guard alone refuses it, and this band has not measured it: learn what
                # it costs here (a few starts per feature and band, module docstring, *exploring*).
                steps.append(("explore", names[nxt]))
            elif not (speculate and elapsed + cost[nxt] <= limit and _worth_trying(index, nxt, computed, served)):
                steps.append(("stop", names[nxt]))
                break
            else:
                tried = True
                steps.append(("speculate", names[nxt]))
        cpu_before = cpu_clock() if cpu_clock is not None and learn is not None else None
        try:
            values[nxt] = compute(names[nxt], start + budget) if tried else compute(names[nxt])
        except FeatureTimeout:
            elapsed = clock() - start
            steps.append(("abandon", names[nxt]))
            break
        computed |= 1 << nxt
        before, elapsed = elapsed, clock() - start
        if learn is not None and not tried:  # the tried calls that finish are the fast ones
            learn.observe(nxt, size, cost[nxt], elapsed - before,
                          None if cpu_before is None else cpu_clock() - cpu_before)
        steps.append(("compute", names[nxt]))
        served = _best_computed_adding(prep, computed, served, nxt, index.trained)
        if tried:
            continue  # the budget is spent: nothing to stop early for or upgrade to
        if stop_when_confident:
            prefix = _confident_prefix(index, target, order, computed, values)
            if prefix is not None:
                served = prefix
                steps.append(("confident", prefix))
                break
        t = position[target]
        floor = index.candidate_accuracy[t]
        # A refused target is not tried again in this walk (it would only be refused again).
        better = _best_with_room(index, size, computed, limit - elapsed, need, lambda c, acc: (
            acc > floor and acc - floor > index.tolerance_between(t, c) and index.candidates[c] not in refused), floor)
        if better is not None:
            target = better
            steps.append(("upgrade", better))
    if guarded and late_price is not None:
        # An answer that computed nothing spent nothing (serving reports 0 for it): never late.
        late_price.observe(size, budget, bool(computed) and elapsed > budget)
    return served, elapsed, steps


class _Stake:
    """The start rule's second half: start a feature only if doing so raises the expected on-time
    accuracy of the answer (the module docstring, *what is at stake*).

    Starting the next feature of the target leads, if it and the rest of the target finish in the
    time left, to the target's accuracy; if it does not finish the answer is late, and a late
    answer counts as wrong. Not starting serves what is computed. So the walk starts when
    ``p * a(target) > a(served)``, ``p`` the chance that the feature finishes within the time
    left once the target's other uncomputed features are reserved at their predicted costs.
    ``p`` is the share of the feature's recent calls that would have fit (the serving guards' own
    record, preempted calls included) where serving has learned one; else the fit's guard read
    as the guard quantile of a log-normal law of measured / predicted time with median 1.
    """

    __slots__ = ("index", "guards", "learned", "size", "z", "laws", "price")

    def __init__(self, index, guards, learned, size: float, price: float = 0.0, laws=None, z=None):
        self.index = index
        self.guards = guards
        self.learned = learned
        self.size = size
        self.laws = laws
        self.price = price
        self.z = _guard_z(index) if z is None else z

    def chance(self, feature: int, ratio: float) -> float:
        """The chance that ``feature`` takes at most ``ratio`` times its predicted cost: the share
        of this process's recent calls that would have fit where serving learned one, else the
        fit's measured law (:func:`law_chance`), else a log-normal through the guard."""
        if self.learned is not None:
            p = self.learned.finish_chance(feature, self.size, ratio)
            if p is not None:
                return p
        if not ratio > 0.0:
            return 0.0
        law = self.laws[feature] if self.laws is not None else None
        if law is not None:
            return law_chance(law, ratio)
        guard = self.guards[feature]
        if guard <= 1.0:
            return 1.0 if ratio >= 1.0 else 0.0
        return _NORMAL.cdf(math.log(ratio) * self.z / math.log(guard))

    def pays(self, feature: int, pending, cost, remaining: float, target: int, served: int) -> bool:
        """Whether starting ``feature`` (the first of ``pending``, the target's uncomputed features)
        raises the expected on-time accuracy, with ``remaining`` seconds left."""
        trained = self.index.trained
        now = trained.get(served, 0.0)
        goal = trained.get(target, 0.0)
        if goal <= now:
            return True  # nothing to lose: the answer is what is computed either way
        own = cost[feature]
        if not own > 0.0:
            return True
        room = remaining - sum(cost[i] for i in pending[1:])
        # The relative slack keeps an exact fit (a clock that matches the curves) a fit.
        p = self.chance(feature, room / own * (1.0 + 1e-9))
        # A late answer is wrong, and a late-share budget prices it too (polydom.index.lateness).
        return p * goal - self.price * (1.0 - p) > now


def law_chance(law, ratio: float) -> float:
    """The chance that a call takes at most ``ratio`` times its predicted cost, by ``law`` (its
    quantiles at evenly spaced levels from 0 to 1), interpolated between two levels."""
    if ratio < law[0]:
        return 0.0
    last = len(law) - 1
    if ratio >= law[last]:
        return 1.0
    k = bisect_right(law, ratio)  # law[k - 1] <= ratio < law[k]
    low, high = law[k - 1], law[k]
    return (k - 1 + (ratio - low) / (high - low)) / last


def _guard_z(index) -> float:
    """The standard normal quantile of the index's guard quantile (the log-normal fallback's scale)."""
    quantile = float((getattr(index, "params", None) or {}).get("cost_guard_quantile") or DEFAULT_GUARD_QUANTILE)
    return _NORMAL.inv_cdf(min(max(quantile, 0.5 + 1e-9), 1.0 - 1e-9))


class _Prepared:
    """What a walk reads of an index that does not change between walks, prepared once per index
    version: the candidate id of each mask, the guards' normal quantile, whether starts are
    capped, the cost laws' table; and per item size (up to :data:`_SIZES_KEPT` of them) the
    features' predicted costs, the fit's guards and the laws there. So a walk's own bookkeeping
    is its decisions, not reading params (``docs/walk-bookkeeping.md``)."""

    __slots__ = ("key", "position", "z", "start_cap", "ones", "law_sizes", "law_rows", "overall_laws", "by_size",
                 "containing", "rank")

    def __init__(self, index, key):
        self.key = key
        self.position = {m: i for i, m in enumerate(index.candidates)}
        # Per feature, the ranked prefixes that hold it, most accurate first (_best_computed_adding).
        ranked = getattr(index, "ranked_prefixes", ())
        self.containing = tuple(tuple(item for item in ranked if item[0] >> i & 1) for i in range(len(index.costs)))
        # Each ranked prefix's place in the ranking and its accuracy (ties go to the earlier place).
        self.rank = {mask: (place, acc) for place, (mask, acc) in enumerate(ranked)}
        self.z = _guard_z(index)
        self.start_cap = bool(getattr(index, "start_cap", True))
        self.ones = (1.0,) * len(index.costs)
        cost_laws = getattr(index, "cost_laws", None)
        self.overall_laws = None if cost_laws is None else cost_laws()
        self.law_sizes = tuple(((getattr(index, "params", None) or {}).get("cost_law_sizes") or ())
                               if self.overall_laws is not None else ())
        self.law_rows = tuple(cost_laws(n) for n in self.law_sizes)
        self.by_size: dict = {}

    def laws(self, size: float):
        """The cost laws at ``size`` (as :meth:`CostSensitiveIndex.cost_laws` picks them)."""
        sizes = self.law_sizes
        if not sizes:
            return self.overall_laws
        return law_row(sizes, self.law_rows, size)

    def at(self, index, size: float):
        """``(costs, the fit's guards, laws, the sets' total costs and, per guards, their needs as
        the walks met them)`` at ``size``."""
        found = self.by_size.get(size)
        if found is None:
            if len(self.by_size) >= _SIZES_KEPT:
                self.by_size.clear()
            guards = getattr(index, "cost_guards", None)
            found = self.by_size[size] = ([curve(size) for curve in index.costs],
                                          guards(size) if guards is not None else self.ones, self.laws(size), {},
                                          {})
        return found


#: Item sizes whose costs a prepared index keeps (natural images each have a size of their own:
#: the table is cleared when full rather than grown without bound).
_SIZES_KEPT = 1024


def prepared(index) -> _Prepared:
    """The :class:`_Prepared` of ``index``, made at its first walk and kept on it while its
    params, costs and candidates stay the same objects (a refresh replaces them)."""
    params = getattr(index, "params", None) or {}
    # The params' values a walk reads, by identity: setting one anew (as a fit sets the guards
    # after the build) makes the walk prepare the index again.
    get = params.get
    key = (params, index.costs, index.candidates, get("cost_guard"), get("cost_guard_by_size"), get("cost_law"),
           get("cost_law_by_size"), get("start_cap"), get("cost_guard_quantile"))
    prep = index.__dict__.get("_walk_prepared") if hasattr(index, "__dict__") else None
    if prep is None or not all(map(operator.is_, prep.key, key)):
        prep = _Prepared(index, key)
        if hasattr(index, "__dict__"):
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


#: The lookup's relative budget slack, so that a clock matching the curves serves what it does.
_SLACK = 1.0 + 1e-12


def _worth_trying(index, feature: int, computed: int, served: int) -> bool:
    """Whether a speculative start of ``feature`` (whose unguarded cost fits) could pay: computed,
    it would complete a set more accurate than the one served."""
    return index.trained.get(_best_computed(index, computed | 1 << feature, served), -1.0) > index.trained.get(served, -1.0)


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


def ranked_prefixes(chains: Mapping[int, Sequence[int]], trained: Mapping[int, float]) -> tuple[tuple[int, float], ...]:
    """Every prefix of every chain once, as ``(mask, accuracy)``, most accurate first; among
    equal accuracies, in the order the chains list them (the first one met wins a tie).

    The walk asks after every feature which computed prefix is best; scanning this list from the
    top answers at the first prefix whose features are all computed, without walking each chain
    (why: ``docs/walk-bookkeeping.md``).
    """
    seen: dict[int, float] = {}
    for order in chains.values():
        for prefix in chain_prefixes(order):
            if prefix not in seen:
                seen[prefix] = trained.get(prefix, -1.0)
    return tuple(sorted(seen.items(), key=lambda item: -item[1]))  # sorted() is stable


def _best_computed_adding(prep: _Prepared, computed: int, served: int, feature: int, trained) -> int:
    """:func:`_best_computed` after ``feature`` joined ``computed``, when ``served`` was the best
    computed prefix before it: a better one must hold ``feature``, so only the prefixes that do
    are scanned (the walk adds one feature at a time, and this is what it asks after each)."""
    floor = trained.get(served, -1.0)
    containing = prep.containing[feature]
    bit = 1 << feature
    rest = computed & ~bit
    if 1 << rest.bit_count() < len(containing):
        # Fewer subsets of what is computed than ranked prefixes to scan: look each up.
        rank = prep.rank
        best, best_key = served, None
        sub = rest
        while True:
            found = rank.get(sub | bit)
            if found is not None and found[1] > floor and (best_key is None or (-found[1], found[0]) < best_key):
                best, best_key = sub | bit, (-found[1], found[0])
            if not sub:
                return best
            sub = (sub - 1) & rest
    for prefix, acc in containing:
        if acc <= floor:
            break
        if not prefix & ~computed:
            return prefix
    return served


def _best_computed(index, computed: int, served: int) -> int:
    """The most accurate trained set with a model whose features are all computed (``served``
    unless a chain prefix beats it)."""
    floor = index.trained.get(served, -1.0)
    for prefix, acc in index.ranked_prefixes:
        if acc <= floor:
            break
        if not prefix & ~computed:
            return prefix
    return served
