"""PolyDom's build pipeline: explore the lattice with the black box, then index the trained sets
(candidate set, sweep, two-level index)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from polydom.index.costs.curve import CostCurve
from polydom.index.serving.anytime import chain_order, chain_prefixes
from polydom.lattice import ExpansionCache, FeatureSpace, audit_monotonicity, explore

from .ranking import check_scores, rank_scores, step_needs
from .search import search_skyline, sets_to_search, uses_skyline_search
from .skyline import PolyDomIndex

__all__ = ["build_polydom", "explore_with_tolerance", "finish_candidates", "index_from_expanded", "train_prefix_chains",
           "SCREEN_Z", "stored_params"]


def index_from_expanded(
    space: FeatureSpace,
    costs: Sequence[CostCurve],
    accuracy: Mapping[int, float],
    *,
    cls: type[PolyDomIndex] = PolyDomIndex,
    **options: Any,
) -> PolyDomIndex:
    """Build the index over the expanded sets ``accuracy`` (mask -> accuracy); see
    :meth:`PolyDomIndex.from_trained` for the options."""
    return cls.from_trained(space, costs, accuracy, **options)


def explore_with_tolerance(space: FeatureSpace, lattice_cache: ExpansionCache, alpha: float, e, sandwich: str):
    """Explore the lattice; with ``e="auto"``, until the tolerance covers every trained pair.

    A fixed ``e`` explores once. ``"auto"`` starts at 0, measures the largest accuracy drop from
    a trained set to a trained superset, and explores again with that tolerance (trained sets
    are reused through ``lattice_cache``) until the drop observed no longer exceeds the
    tolerance used. The tolerance only grows and is bounded by 1, and every round trains a
    superset of the previous one's sets, so the loop ends.

    Returns
    -------
    (exploration, e_used, e_observed, rounds)
        ``e_observed`` is the worst drop among the finally trained sets.
    """
    if not (isinstance(e, str) and e == "auto"):
        exploration = explore(space, lattice_cache, alpha=alpha, e=e, sandwich=sandwich)
        return exploration, e, audit_monotonicity(exploration.accuracy).max_violation, 1
    tolerance, rounds = 0.0, 0
    while True:
        rounds += 1
        exploration = explore(space, lattice_cache, alpha=alpha, e=tolerance, sandwich=sandwich)
        observed = audit_monotonicity(exploration.accuracy).max_violation
        if observed <= tolerance:
            return exploration, tolerance, observed, rounds
        tolerance = observed


def _reference_size(domain: tuple[float, float], bounds) -> float:
    """Where to compare feature costs when ordering chains, absent a typical item size: the
    middle of a finite domain, else the last point where the skyline changes (or 1 past ``lo``)."""
    lo, hi = domain
    if math.isfinite(hi):
        return (lo + hi) / 2.0
    return max(bounds[-1], lo + 1.0)


def _rescore_finalists(index, index_of, trained: dict, recorder):
    """Rescore the servable sets with the black box's second opinion until all of them are rescored.

    A rescored finalist may drop and let an unrescored set onto the skyline; that one is then
    rescored too. Every round rescores sets not rescored before, so the loop ends.
    """
    done = recorder.rescored_masks
    while True:
        todo = [m for m in index.candidates if m not in done and m]
        if not todo:
            return index
        trained.update(recorder.rescore(todo))
        done.update(todo)
        index = index_of(trained)


#: How many standard errors above its screening score a screened set may still lie.
SCREEN_Z = 1.0

#: The share of finished sets whose rise from screening to full training a screened set's bound
#: allows for (``docs/decisions/screening.md``, *the rise*).
RISE_QUANTILE = 0.9


def rise_allowance(rises) -> float:
    """The rise a screened set's bound allows for: the :data:`RISE_QUANTILE` quantile of the
    finished sets' rises from screening to full training (numpy's linear method), at least 0;
    0 before any set is finished.

    Not the largest rise: that is the extreme of every finished set's noise, and it grows with
    the number of sets finished, so the bound would loosen as the lattice grows."""
    rises = np.asarray(list(rises), dtype=np.float64)
    if rises.size == 0:
        return 0.0
    return max(float(np.quantile(rises, RISE_QUANTILE)), 0.0)


def finish_candidates(index_of, screened: dict, recorder) -> dict:
    """Train fully the screened sets that could be served; the finished sets with their scores.

    Every explored set has a *screening* score (a cheap whole draw, models trained on half the
    items) and a standard error. A set is finished -- scored on the full folds and refitted --
    when it is a candidate of the index built from the finished sets' scores and, for every other
    set, an upper bound: its screening score plus the rise from screening to full training (the
    learning curve's rise from half the items to the folds' share) that nine in ten finished sets
    stayed within (:func:`rise_allowance`) plus :data:`SCREEN_Z` standard errors, at most 1.
    Those scores are compared as they are (the ``"measured"`` ranking): a set whose bound only ties a cheaper finished set's score
    is not finished, whatever order the index's own ranking puts ties in. Finished sets can push others off
    the skyline and bounds can let others on; every round finishes sets not finished before, so
    the loop ends. A set never finished could not reach the skyline by its bound: it is dominated
    by a finished set at least as cheap at every size (DAUB's stopping rule on the skyline).
    The bound is a high quantile, not a certainty: a set whose full score rose more than nine in
    ten finished sets' did, and more than its standard error on top, can be left screened.

    Returns
    -------
    dict of int to float
        The finished sets (every candidate of the last round among them).
    """
    finished = {m: a for m, a in screened.items() if m in recorder.finished_masks}
    errors = dict(getattr(recorder, "std_errors", {}))
    while True:
        gain = rise_allowance(finished[m] - screened[m] for m in finished if m in screened)
        bound = {m: min(1.0, a + gain + SCREEN_Z * errors.get(m, 0.0)) for m, a in screened.items() if m not in finished}
        index = index_of({**bound, **finished}, mode="measured")
        todo = sorted(m for m in index.candidates if m not in finished)
        if not todo:
            return finished
        finished.update(recorder.finish(todo))


def train_prefix_chains(index_of, trained: dict, lattice_cache: ExpansionCache, unit_costs, finish=None,
                        requires=None) -> dict:
    """Give every servable set a chain of trained prefixes (see :mod:`polydom.index.serving.anytime`).

    ``index_of(trained)`` builds the index over the trained sets; prefixes are trained through
    ``lattice_cache`` (so an expansion cache serves them too) and added to ``trained`` in place;
    with ``finish`` (a screening black box's :func:`finish_candidates` step) they are then
    trained fully, since anytime serving answers with their models. ``requires`` maps a feature's
    index to the mask of the steps it needs (:func:`~polydom.index.serving.anytime.chain_order`).
    A new prefix can itself become servable; it then inherits its chain's order. The loop ends
    because every round trains only sets it has not seen and there are finitely many.

    Returns
    -------
    dict of int to tuple of int
        Chain order (feature indices) per servable set of the final index.
    """
    chains: dict[int, tuple[int, ...]] = {}
    while True:
        index = index_of(trained)
        missing = [m for m in index.candidates if m not in chains]
        if not missing:
            return {m: chains[m] for m in index.candidates}
        inherited = {p: order[:k] for order in chains.values() for k, p in enumerate(chain_prefixes(order))}
        for m in missing:
            # Ordered by the scores the index ranks by, as serving ranks the prefixes.
            chains[m] = inherited.get(m) or chain_order(m, index.explored, unit_costs, requires)
        need = sorted({p for m in missing for p in chain_prefixes(chains[m]) if p not in trained})
        if need:
            trained.update(zip(need, lattice_cache.many(need)))
            if finish is not None:  # a screened prefix has no model: it is served, so finish it
                trained.update(finish(need))


def _choose_sets(skyline: bool, space, lattice_cache, index_of, needs, on_round, alpha, e, sandwich):
    """The sets to train: the skyline search's or the lattice exploration's, as
    ``(exploration, e_used, e_observed, rounds)``."""
    if not skyline:
        return explore_with_tolerance(space, lattice_cache, alpha, e, sandwich)
    # The sets an index over the scores measured so far would serve, compared as they are.
    exploration = search_skyline(space, lattice_cache, lambda scores: sets_to_search(index_of(scores, mode="measured")),
                                 needs=needs, on_round=on_round)
    return exploration, None, None, exploration.rounds


def stored_params(params: dict, requires, serving) -> dict:
    """``params`` with what the index's readers need beside them: the steps each feature requires
    (``cost_of`` counts them in a set's cost) and the serving record in its stored form. Every
    builder stores them this way (PolyDom's and Greedy's)."""
    if requires:
        params["requires"] = {f: list(steps) for f, steps in requires.items()}
    if serving is not None:
        params.update(serving.to_params())
    return params


def build_polydom(
    space: FeatureSpace,
    curves: Sequence[CostCurve],
    recorder,
    *,
    domain: tuple[float, float],
    alpha: float = 1.0,
    e: float | str = "auto",
    sandwich: str = "all",
    candidate_alpha: float = 1.0,
    validate: bool = False,
    tolerance: float | None = 0.0,
    prefix_chains: bool = True,
    reference_size: float | None = None,
    measured_range: tuple[float, float] | None = None,
    extrapolate: str = "warn",
    scores: str = "measured",
    requires=None,
    lattice_cache: ExpansionCache | None = None,
    started: float | None = None,
    search: str = "auto",
    serving=None,
) -> PolyDomIndex:
    """The PolyDom pipeline on validated inputs: explore the lattice, then index what was trained.

    Parameters
    ----------
    space : FeatureSpace
    curves : sequence of CostCurve
        Per feature in ``space`` order, already checked ``>= 0`` on ``domain``.
    recorder : callable
        ``recorder(mask) -> accuracy``, the validated black box, with ``recorder.many`` (a layer
        at once), ``recorder.calls`` / ``recorder.reused`` counters, ``recorder.models`` and
        optionally ``recorder.on_round`` (a skyline search's rounds).
    domain : (lo, hi)
    alpha, e, sandwich, candidate_alpha, validate, tolerance, prefix_chains, reference_size,
    measured_range, extrapolate, scores, requires
        As for ``polydom.build``; ``requires`` (feature name -> step names) only orders the
        prefix chains, steps before the features that need them (the black box already scores
        sets by their usable features, :class:`polydom.steps.UsableSets`).
    lattice_cache : ExpansionCache, optional
        Share one across calls (progressive builds lower alpha over the same trained sets).
    started : float, optional
        ``time.perf_counter()`` when the caller started, for ``stats["build_seconds"]``.
    search : {"auto", "lattice", "skyline"}, default "auto"
        How sets are chosen for training (:mod:`polydom.index.search`): ``"lattice"`` explores
        the lattice with sandwich pruning (``alpha``, ``e`` and ``sandwich`` apply);
        ``"skyline"`` trains the neighbourhoods of the index's candidates only; ``"auto"`` the
        lattice up to :data:`~polydom.index.search.LATTICE_SEARCH_MAX_ITEMS` items, else the
        skyline.
    serving : ServingParams, optional
        What the index's walks read (:class:`polydom.index.serving.params.ServingParams`), kept
        in its params with ``requires``.
    """
    check_scores(scores)  # an unknown mode fails before anything is trained
    started = time.perf_counter() if started is None else started
    lattice_cache = ExpansionCache(recorder, recorder.many) if lattice_cache is None else lattice_cache
    trained_before = recorder.calls
    skyline = uses_skyline_search(search, len(space))
    params = stored_params(dict(
        alpha=alpha, e=e, domain=list(domain), sandwich=sandwich, candidate_alpha=candidate_alpha, tolerance=tolerance,
        measured_range=None if measured_range is None else list(measured_range), extrapolate=extrapolate,
        scores=scores, search="skyline" if skyline else "lattice",
    ), requires, serving)
    stats, fitted = {}, {}  # what the index reports; the last ranking and what it was ranked from
    needs = step_needs(space, requires)

    def index_of(trained, chains=None, mode=None):
        std_error = {m: se for m, se in getattr(recorder, "std_errors", {}).items() if m in trained}
        if mode is not None:  # a ranking of its own, for a decision; nothing cached or reported
            ranked, measured, _ = rank_scores(trained, std_error, mode, needs)
        else:
            # Ranked afresh whenever the trained sets or their scores change (rescored finalists,
            # prefixes), so the index always ranks by the fit of everything measured so far; the
            # final index over the same sets reuses the last fit.
            if fitted.get("from") != (trained, std_error):
                fitted.update({"from": (dict(trained), std_error), "ranking": rank_scores(trained, std_error, scores, needs)})
            ranked, measured, fit_stats = fitted["ranking"]
            stats.update(fit_stats)
        return PolyDomIndex.from_trained(
            space, curves, ranked, domain=domain, candidate_alpha=candidate_alpha,
            validate=validate, models={m: recorder.models[m] for m in trained if m in recorder.models},
            stats=stats, params=params, chains=chains, std_error=std_error, measured=measured,
        )

    # The recorder's ``on_round`` reports a skyline search's rounds (a progress line's totals).
    exploration, e_used, e_observed, rounds = _choose_sets(skyline, space, lattice_cache, index_of, needs,
                                                           getattr(recorder, "on_round", None), alpha, e, sandwich)
    stats.update(
        trained=recorder.calls - trained_before, reused=recorder.reused, expanded=len(exploration.accuracy),
        pruned=len(exploration.pruned), explore_seconds=time.perf_counter() - started,
        e_used=e_used, e_observed=e_observed, exploration_rounds=rounds,
    )
    trained = dict(exploration.accuracy)

    finishing = getattr(recorder, "can_finish", False)
    if finishing:
        screened = len(trained)
        trained = finish_candidates(index_of, trained, recorder)
        stats["screened"] = screened
    index = index_of(trained)
    if getattr(recorder, "can_rescore", False):
        index = _rescore_finalists(index, index_of, trained, recorder)
        stats["rescored"] = len(recorder.rescored_masks)
    if prefix_chains:
        before_chains = len(trained)
        size = _reference_size(domain, index.bounds) if reference_size is None else float(reference_size)
        chains = train_prefix_chains(index_of, trained, lattice_cache, [c(size) for c in curves],
                                     finish=recorder.finish if finishing else None, requires=needs)
        stats.update(chain_sets=len(trained) - before_chains, reference_size=size)
        stats["trained"] = recorder.calls - trained_before
        index = index_of(trained, chains)
    index.exploration = exploration
    # With a screening black box the index holds the sets trained fully; the others explored
    # were screened only (partly trained).
    partly = len(set(lattice_cache.accuracy) - set(trained)) if finishing else 0
    # ``speculative``: sets started on idle workers and never asked for (counted in ``trained``)
    index.stats.update(fully_trained=len(trained), partly_trained=partly, not_trained=2 ** len(space) - len(trained) - partly,
                       speculative=len(lattice_cache.speculative & lattice_cache.accuracy.keys()))
    index.stats["build_seconds"] = time.perf_counter() - started
    return index
