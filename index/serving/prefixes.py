"""Chain prefixes: every prefix of every chain, ranked, and the best one a walk has computed.

The anytime walk (:mod:`polydom.index.serving.anytime`) computes a target's features one at a time and,
after each, serves the most accurate trained prefix whose features are all computed. The index
lists every prefix of every chain once, most accurate first (:func:`ranked_prefixes`); the walk
scans it from the top, or only the prefixes that hold the feature it just computed
(:func:`_best_computed_adding`). Why: ``docs/decisions/walk-bookkeeping.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from polydom.lattice import bits_of

__all__ = ["answer_sets", "chain_prefixes", "ranked_prefixes", "walk_order"]


def chain_prefixes(order: Iterable[int]) -> list[int]:
    """Masks of every prefix of ``order``, ``{}`` first and the whole set last."""
    out, mask = [0], 0
    for i in order:
        mask |= 1 << i
        out.append(mask)
    return out


def walk_order(chains: Mapping[int, Sequence[int]], target: int) -> Sequence[int]:
    """The order a walk computes ``target``'s features in: its chain, else feature order (a set
    that new cost curves brought onto the skyline has no chain)."""
    return chains.get(target) or bits_of(target)


def answer_sets(candidates: Iterable[int], chains: Mapping[int, Sequence[int]]) -> list[int]:
    """Every set a lookup or an anytime walk over ``candidates`` may answer with: the candidates,
    every prefix of every chain and, where there are chains, the prefixes of each candidate's
    :func:`walk_order` (a cascade may stop at any of them)."""
    candidates = [int(m) for m in candidates]
    keys = dict.fromkeys(candidates)
    for order in chains.values():
        keys.update(dict.fromkeys(chain_prefixes(order)))
    if chains:  # a candidate with a chain has its prefixes above already
        for m in candidates:
            if m not in chains:
                keys.update(dict.fromkeys(chain_prefixes(bits_of(m))))
    return list(keys)


def ranked_prefixes(chains: Mapping[int, Sequence[int]], trained: Mapping[int, float]) -> tuple[tuple[int, float], ...]:
    """Every prefix of every chain once, as ``(mask, accuracy)``, most accurate first; among
    equal accuracies, in the order the chains list them (the first one met wins a tie).

    The walk asks after every feature which computed prefix is best; scanning this list from the
    top answers at the first prefix whose features are all computed, without walking each chain
    (why: ``docs/decisions/walk-bookkeeping.md``).
    """
    seen: dict[int, float] = {}
    for order in chains.values():
        for prefix in chain_prefixes(order):
            if prefix not in seen:
                seen[prefix] = trained.get(prefix, -1.0)
    return tuple(sorted(seen.items(), key=lambda item: -item[1]))  # sorted() is stable


def _best_computed_adding(prep, computed: int, served: int, feature: int, trained) -> int:
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


def _worth_trying(index, feature: int, computed: int, served: int) -> bool:
    """Whether a speculative start of ``feature`` (whose unguarded cost fits) could pay: computed,
    it would complete a set more accurate than the one served."""
    return index.trained.get(_best_computed(index, computed | 1 << feature, served), -1.0) > index.trained.get(served, -1.0)
