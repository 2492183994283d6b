"""The skyline search: its moves, its guarantee, and what it saves over the lattice."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polydom
from polydom.index.ranking import tight_set
from polydom.index.search import (
    LATTICE_SEARCH_MAX_ITEMS, neighbours, search_skyline, sets_to_search, uses_skyline_search,
)
from polydom.lattice import ExpansionCache, FeatureSpace, canonical_key


def _moves_brute_force(mask: int, full: int, needs: dict) -> set[int]:
    """Every tight set whose features (steps aside) differ from ``mask``'s by one addition, one
    removal, or one of each -- built from sets, not bits."""
    steps = 0
    for need in needs.values():
        steps |= need
    bits = [1 << i for i in range(full.bit_length())]
    out = set()
    for add, drop in itertools.product([0] + bits, [0] + bits):
        if add and mask & add or drop and not mask & drop:
            continue
        smaller = tight_set(mask & ~drop, needs)
        grown = smaller | add | needs.get(add.bit_length() - 1, 0) if add else smaller
        out.add(tight_set(grown, needs))
    out.discard(mask)
    return out


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 7), st.data())
def test_neighbours_are_the_one_move_sets(k, data):
    full = (1 << k) - 1
    step = data.draw(st.booleans())
    needs = {}
    if step:  # bit 0 is a step some features need
        for i in range(1, k):
            if data.draw(st.booleans()):
                needs[i] = 1
    mask = tight_set(data.draw(st.integers(0, full)), needs)
    assert neighbours(mask, full, needs) == _moves_brute_force(mask, full, needs)
    assert all(tight_set(m, needs) == m for m in neighbours(mask, full, needs))


def _problem(k: int, seed: int):
    """Costs and a noisy, mostly monotone accuracy per set, fixed by the set (not the call order)."""
    rng = np.random.default_rng(seed)
    names = [f"f{i}" for i in range(k)]
    weights = rng.uniform(0.0, 0.15, k)
    costs = {n: [float(rng.uniform(0.0, 1.0)), float(rng.uniform(0.0, 1e-3))] for n in names}

    def accuracy(features) -> float:
        mask = sum(1 << int(n[1:]) for n in features)
        noise = np.random.default_rng([seed, mask]).normal(0.0, 0.01)
        value = sum(weights[int(n[1:])] for n in features)
        return float(min(1.0, 0.3 + 0.7 * (1.0 - math.exp(-3.0 * value)) + noise))

    return names, costs, accuracy


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_servable_set_is_a_local_optimum_and_lookups_are_exact_over_what_was_trained(seed):
    names, costs, accuracy = _problem(12, seed)
    index = polydom.build(costs, accuracy, search="skyline", domain=(1.0, 1e6), prefix_chains=False)
    trained = index.exploration.accuracy
    space = FeatureSpace(names)
    # The guarantee: every neighbour of every set the index can serve was trained.
    for m in index.candidates:
        assert neighbours(m, space.full) <= trained.keys()
    # And the index is exact over the trained sets: brute force over them agrees.
    for size in np.geomspace(1.0, 1e6, 9):
        for budget in np.geomspace(0.2, 20.0, 9):
            fits = [a for m, a in trained.items() if index.cost_of(space.frozenset(m), size) <= budget]
            best = max(fits, default=None)
            got = index.lookup(size=size, budget=budget)
            assert (got.accuracy if got is not None else None) == best


def test_it_trains_a_share_of_the_lattice_and_serves_close_to_it():
    names, costs, accuracy = _problem(12, 3)
    skyline = polydom.build(costs, accuracy, search="skyline", e=0.0, domain=(1.0, 1e6), prefix_chains=False)
    every = {frozenset(s): accuracy(s) for r in range(13) for s in itertools.combinations(names, r)}
    lattice = polydom.build(costs, every.__getitem__, search="lattice", e=1.0, domain=(1.0, 1e6), prefix_chains=False)
    assert lattice.stats["expanded"] == 2 ** 12  # e=1 prunes nothing: the exhaustive answer
    assert skyline.stats["expanded"] < 2 ** 12 / 2
    losses = []
    for size in np.geomspace(1.0, 1e6, 15):
        for budget in np.geomspace(0.2, 20.0, 15):
            a, b = skyline.lookup(size=size, budget=budget), lattice.lookup(size=size, budget=budget)
            losses.append((b.accuracy if b else 0.0) - (a.accuracy if a else 0.0))
    assert min(losses) >= -1e-12  # the lattice's answer is the best there is (round-off aside)
    assert max(losses) <= 0.01 and float(np.mean(losses)) <= 0.001


def test_auto_explores_small_lattices_and_searches_large_ones():
    assert not uses_skyline_search("auto", LATTICE_SEARCH_MAX_ITEMS)
    assert uses_skyline_search("auto", LATTICE_SEARCH_MAX_ITEMS + 1)
    assert uses_skyline_search("skyline", 2) and not uses_skyline_search("lattice", 40)
    _, costs, accuracy = _problem(6, 4)
    auto = polydom.build(costs, accuracy, domain=(1.0, 1e6))
    lattice = polydom.build(costs, accuracy, search="lattice", domain=(1.0, 1e6))
    assert auto.params["search"] == "lattice"
    assert auto.exploration.accuracy == lattice.exploration.accuracy
    with pytest.raises(ValueError, match="search must be one of"):
        polydom.build(costs, accuracy, search="everything", domain=(1.0, 1e6))


def test_rounds_are_reported_with_what_they_ask_for():
    names, costs, accuracy = _problem(11, 5)
    space = FeatureSpace(names)
    seen = []
    cache = ExpansionCache(lambda m: accuracy(space.frozenset(m)))
    index_of = lambda scores: polydom.PolyDomIndex.from_trained(space, [polydom.CostCurve(costs[n]) for n in names],
                                                              dict(scores), domain=(1.0, 1e6)).candidates
    result = search_skyline(space, cache, index_of, on_round=lambda *a: seen.append(a))
    assert seen[0] == (0, 2 * 11 + 2, 0)  # the seeds: {}, the full set, each alone, each left out
    assert [r for r, _, _ in seen] == list(range(result.rounds + 1))
    assert sum(asked for _, asked, _ in seen) == len(result.accuracy) == cache.calls
    assert result.mode == "skyline" and not result.pruned


def _index(scores, std_error=None):
    space = FeatureSpace(["a", "b", "c"])
    curves = [polydom.CostCurve([1.0, 1e-6]), polydom.CostCurve([2.0, 2e-6]), polydom.CostCurve([5.0, 5e-6])]
    return polydom.PolyDomIndex.from_trained(space, curves, scores, domain=(1.0, 1e6), std_error=std_error)


def test_the_search_skips_sets_that_beat_a_cheaper_one_by_less_than_the_noise():
    # The empty set: 0.5; a: 0.80, b (costlier): 0.82, c (costliest): 0.90; standard errors 0.02.
    scores = {0: 0.5, 0b001: 0.80, 0b010: 0.82, 0b100: 0.90}
    plain = _index(scores)
    assert sets_to_search(plain) == plain.candidates  # no standard errors: every candidate
    assert sorted(plain.candidates, key=canonical_key) == [0, 0b001, 0b010, 0b100]
    noisy = _index(scores, {m: 0.02 for m in scores})
    assert set(noisy.candidates) == set(scores)  # every set is still indexed
    # b beats a by 0.02 < sqrt(2) * 0.02: a stands for it; c beats both by more.
    assert sets_to_search(noisy) == [0, 0b001, 0b100]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.5, 1.0), min_size=7, max_size=7), st.lists(st.floats(0.0, 0.05), min_size=7, max_size=7))
def test_every_skyline_entry_ties_with_a_searched_set_no_costlier(scores, errors):
    masks = list(range(8))
    acc, se = dict(zip(masks, [0.4] + scores)), dict(zip(masks, [0.0] + errors))
    index = _index(acc, se)
    searched = set(sets_to_search(index))
    assert searched <= set(index.candidates)
    for sky in index.skylines:
        entries = [index.candidates[c] for c in sky]  # cheapest first
        for j, m in enumerate(entries):
            assert any(t in searched and acc[t] >= acc[m] - math.hypot(se[t], se[m]) for t in entries[: j + 1])
