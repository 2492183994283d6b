"""Skyline search: explore only the neighbourhoods of the sets an index could serve.

The lattice explorer (:func:`polydom.lattice.explore`) visits every set its sandwich test cannot
prune; with scores that are not monotone the test prunes little, so a build trains most of a
lattice that doubles with each feature. The index serves a few dozen sets of it: those on the
cost-accuracy skyline at some item size. This search trains only around them:

1. **Seeds**: the empty set, each feature alone (with the steps it needs), every set one feature
   short of the full set, and the full set.
2. **Rounds**: the index over everything trained so far names the sets it would serve somewhere
   in the domain, a tie within one standard error going to the cheaper set
   (:func:`sets_to_search`; with no standard errors, its candidates). Each not yet searched
   around has its *neighbours* trained -- each set one move away, where a move adds one
   feature, drops one, or swaps one for another -- all of a round's neighbours in one batch, so
   a parallel black box trains them together.
3. The search ends when every set so named has been searched around.

What it guarantees: the index is exact over the sets trained, and every set it would serve with
ties within one standard error going to the cheaper set is a *local optimum* of the scores: no
set one move away would beat it by more than that where it stands -- such a set was trained and
would have been searched around. Without standard errors this holds for every set the index can
serve. It is not exact over the
lattice: a set whose every neighbour scores below the skyline may be missed (an interaction of
three or more features that no single move reveals). The number of sets trained grows with the
number of features times the size of the skyline, not with the size of the lattice
(``docs/decisions/skyline-search.md`` has the measurements).

Moves respect shared steps: a feature is added with the steps it needs, and dropping a step
drops the features that need it (every trained set is *tight*,
:func:`polydom.index.ranking.tight_set`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from polydom.lattice import ExpansionCache, Exploration, FeatureSpace, bits_of, canonical_key

from .ranking import tight_set

__all__ = ["SEARCH_MODES", "LATTICE_SEARCH_MAX_ITEMS", "search_skyline", "neighbours", "sets_to_search",
           "uses_skyline_search"]

#: ``"auto"`` chooses by the lattice's size; ``"lattice"`` explores the lattice with sandwich
#: pruning (exact, as the paper); ``"skyline"`` searches the skyline's neighbourhoods.
SEARCH_MODES = ("auto", "lattice", "skyline")

#: Largest number of lattice items (features and the steps they share) that ``search="auto"``
#: explores as a lattice: 2**10 = 1,024 sets, screened in seconds. Above it, the skyline search
#: (``docs/decisions/skyline-search.md``).
LATTICE_SEARCH_MAX_ITEMS = 10


def uses_skyline_search(search: str, items: int) -> bool:
    """Whether a build over ``items`` lattice items searches the skyline (else the lattice)."""
    if search not in SEARCH_MODES:
        raise ValueError(f"search must be one of {SEARCH_MODES}, got {search!r}")
    return search == "skyline" or (search == "auto" and items > LATTICE_SEARCH_MAX_ITEMS)


def sets_to_search(index) -> list[int]:
    """The sets a skyline search looks around: on every skyline of ``index``, for each entry the
    cheapest entry whose score is within one standard error of the difference of its own
    (:meth:`~polydom.index.skyline.PolyDomIndex.served_positions` with the standard-error rule,
    whatever tolerance ``index`` serves with); every candidate when ``index`` holds no standard
    errors.

    A costlier set that beats a cheaper one by less than the noise of the two scores is not
    searched around: its neighbours would be told apart from the cheaper set's by noise too. Sets
    left out are still trained and indexed; only their neighbourhoods are not asked for.
    """
    if not any(index.std_error.get(m) for m in index.candidates):
        return list(index.candidates)
    served = {index.candidates[sky[i]] for sky in index.skylines for i in index.served_positions(sky, tolerance=None)}
    return sorted(served, key=canonical_key)


def neighbours(mask: int, full: int, needs: Mapping[int, int] | None = None) -> set[int]:
    """The tight sets one move from ``mask``: one feature added, dropped, or swapped for another.

    ``needs`` maps a feature's bit index to the mask of the steps it needs; an added feature
    brings its steps, and a dropped step takes the features that need it with it.
    """
    needs = needs or {}
    inside = [1 << i for i in bits_of(mask)]
    outside = [1 << i for i in bits_of(full & ~mask)]

    def grow(m: int, bit: int) -> int:
        return m | bit | needs.get(bit.bit_length() - 1, 0)

    out = set()
    for bit in outside:
        out.add(tight_set(grow(mask, bit), needs))
    for drop in inside:
        smaller = tight_set(mask & ~drop, needs)
        out.add(smaller)
        for bit in outside:
            out.add(tight_set(grow(smaller, bit), needs))
    out.discard(mask)
    return out


def _seeds(full: int, needs: Mapping[int, int]) -> list[int]:
    seeds = {0, full}
    for bit in (1 << i for i in bits_of(full)):
        seeds.add(tight_set(bit | needs.get(bit.bit_length() - 1, 0), needs))
        seeds.add(tight_set(full & ~bit, needs))
    return sorted(seeds, key=canonical_key)


def search_skyline(
    space: FeatureSpace,
    cache: ExpansionCache,
    candidates_of: Callable[[Mapping[int, float]], Iterable[int]],
    *,
    needs: Mapping[int, int] | None = None,
    on_round: Callable[[int, int, int], None] | None = None,
) -> Exploration:
    """Train the seeds, then every neighbour of every candidate, until no candidate is new.

    Parameters
    ----------
    space : FeatureSpace
    cache : ExpansionCache
        The black box; each round's neighbours are asked for in one ``many`` call.
    candidates_of : callable
        ``candidates_of(scores)`` (mask -> score) gives the masks an index over those scores
        could serve.
    needs : mapping of int to int, optional
        Feature bit -> mask of the steps it needs (:func:`polydom.index.ranking.step_needs`).
    on_round : callable, optional
        ``on_round(round, sets_asked, sets_trained_so_far)`` before each round's batch.

    Returns
    -------
    Exploration
        ``accuracy`` holds every set trained, in training order; ``pruned`` is empty (the search
        never reaches the sets it leaves out); ``mode`` is ``"skyline"``.

    Notes
    -----
    The search ends: every round searches around at least one candidate not searched before, and
    there are finitely many sets. Masks are asked for in :func:`canonical_key` order, so the
    result does not depend on set hashing.
    """
    needs = dict(needs or {})
    full = tight_set(space.full, needs)
    calls_before = cache.calls
    result = Exploration(space=space, mode="skyline")

    def train(masks: list[int]) -> None:
        todo = [m for m in masks if m not in result.accuracy]
        if on_round is not None:
            on_round(result.rounds, len(todo), len(result.accuracy))
        if todo:
            result.accuracy.update(zip(todo, cache.many(todo)))

    train(_seeds(full, needs))
    searched: set[int] = set()
    while True:
        fresh = sorted((m for m in candidates_of(result.accuracy) if m not in searched), key=canonical_key)
        if not fresh:
            break
        result.rounds += 1
        searched.update(fresh)
        ask = set()
        for m in fresh:
            ask |= neighbours(m, full, needs)
        train(sorted(ask, key=canonical_key))  # what was trained before is left out there
    result.calls = cache.calls - calls_before
    return result
