"""Greedy's retrieval on random instances: within budget, never above PolyDom, batch
parity and the state round trip."""

import json
import math
import os
import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polydom
from polydom.greedy import GreedyIndex, prefix_masks
from polydom.index.queries import BUDGET_SLACK  # the protocol's slack, which lookups apply
from polydom.testing import BruteForce

SETTINGS = settings(
    deadline=None,
    max_examples=int(os.environ.get("POLYDOM_GREEDY_EXAMPLES", "60")),
    suppress_health_check=[HealthCheck.too_slow],
)
SLACK = 1e-9


@st.composite
def instances(draw, max_features=6, monotone_only=False):
    """``(costs, accuracy by frozenset, domain, n0)`` with ties in costs and accuracies."""
    n = draw(st.integers(1, max_features))
    names = [f"x{i}" for i in range(n)]
    costs = {}
    for i, name in enumerate(names):
        style = draw(st.sampled_from(["random", "random", "zero", "copy"]))
        if style == "zero":
            costs[name] = [0.0]
        elif style == "copy" and i > 0:
            costs[name] = list(costs[names[draw(st.integers(0, i - 1))]])
        else:
            degree = draw(st.integers(0, 2))
            costs[name] = [draw(st.sampled_from([0.0, 0.5, 1.0, 3.0, 10.0, 0.01])) for _ in range(degree + 1)]
    styles = ["monotone", "plateau", "cf1", "cfinf"] + ([] if monotone_only else ["noisy"])
    style = draw(st.sampled_from(styles))
    rng = random.Random(draw(st.integers(0, 2**31)))
    masks = range(1 << n)
    single = [rng.uniform(0.5, 0.8) for _ in range(n)]
    if style == "cf1":
        single = [round(a, 1) for a in single]
        acc = {m: max([0.5] + [single[i] for i in range(n) if m >> i & 1]) for m in masks}
    elif style == "cfinf":
        acc = {m: 1 - math.prod(1 - single[i] for i in range(n) if m >> i & 1) if m else 0.5 for m in masks}
    else:
        acc = {}
        for m in sorted(masks, key=int.bit_count):
            v = rng.random()
            v = round(v, 1) if style == "plateau" else v
            acc[m] = max([0.3 + 0.6 * v] + [acc[m & ~(1 << i)] for i in range(n) if m >> i & 1])
        if style == "noisy":
            acc = {m: a - rng.uniform(0.0, 0.05) for m, a in acc.items()}
    by_set = {frozenset(names[i] for i in range(n) if m >> i & 1): a for m, a in acc.items()}
    lo = draw(st.sampled_from([0.0, 1.0]))
    domain = (lo, draw(st.sampled_from([50.0, 500.0, math.inf])))
    n0 = draw(st.sampled_from([lo, lo + 1.0, 10.0, 40.0]))
    return costs, by_set, domain, n0


def _queries(brute, domain, rng, count):
    lo, hi = domain
    top = min(hi, 1000.0)
    for size in [lo, top, *[rng.uniform(lo, top) for _ in range(count)]]:
        costs = brute.costs_at(size)
        budgets = [0.0, float(costs.max()), float(costs.max()) * 1.5 + 1.0]
        budgets += [float(b) for b in rng.sample(list(costs), min(5, len(costs)))]
        budgets += [float(costs.max()) * rng.random() for _ in range(4)]
        for budget in budgets:
            yield size, budget


def _lambdas(draw_grid):
    return {"default": None, "zero": [0.0], "mixed": [0.0, 0.05, 1.0, math.inf]}[draw_grid]


@SETTINGS
@given(instances(), st.sampled_from(["greedy", "greedy-acc", "greedy-cost"]), st.sampled_from(["default", "mixed"]), st.randoms(use_true_random=False))
def test_lookup_stays_within_budget_and_returns_a_walked_prefix(instance, backend, grid, rng):
    costs, acc, domain, n0 = instance
    lambdas = _lambdas(grid) if backend == "greedy" else None
    index = polydom.build(costs, acc.__getitem__, backend=backend, n0=n0, domain=domain, lambdas=lambdas)
    index.check_invariants()
    brute = BruteForce(costs, acc.__getitem__)
    prefixes = {m for s in index.sequences for m in prefix_masks(s)}
    queries = list(_queries(brute, domain, rng, 6))
    batch = index.lookup_many([q[0] for q in queries], [q[1] for q in queries])
    for i, (size, budget) in enumerate(queries):
        choice = index.lookup(size, budget)
        assert batch[i] == choice
        assert choice.cost <= budget * BUDGET_SLACK
        true_cost = brute.costs_at(size)[brute.sets.index(choice.features)]
        assert math.isclose(choice.cost, true_cost, rel_tol=1e-9, abs_tol=1e-12)
        assert choice.accuracy == acc[choice.features]
        assert choice.key in prefixes and index.space.frozenset(choice.key) == choice.features
        # The walk stops only when the next feature of its sequence does not fit.
        entry = index.skyline[max(np.searchsorted([e.cost for e in index.skyline], budget * BUDGET_SLACK, side="right") - 1, 0)]
        sequence = index.sequence(index.lambdas[entry.lam])
        k = len(choice.features)
        assert frozenset(sequence[:k]) == choice.features
        if k < len(sequence):
            assert choice.cost + costs_at(costs, sequence[k], size) > budget * BUDGET_SLACK


def costs_at(costs, name, size):
    return polydom.CostCurve(costs[name])(size)


@SETTINGS
@given(instances(monotone_only=True), st.sampled_from(["greedy", "greedy-acc", "greedy-cost"]), st.randoms(use_true_random=False))
def test_never_above_polydom_and_equal_once_everything_fits(instance, backend, rng):
    costs, acc, domain, n0 = instance
    greedy = polydom.build(costs, acc.__getitem__, backend=backend, n0=n0, domain=domain)
    exact = polydom.build(costs, acc.__getitem__, domain=domain)
    brute = BruteForce(costs, acc.__getitem__)
    full = frozenset(costs)
    for size, budget in _queries(brute, domain, rng, 6):
        got = greedy.lookup(size, budget)
        # Costs are summed in different orders; bracket the budget by rounding slack.
        assert got.accuracy <= exact.lookup(size, budget * (1 + SLACK) + 1e-12).accuracy
        full_cost = brute.costs_at(size)[brute.sets.index(full)]
        if budget >= full_cost * (1 + SLACK) + 1e-12:
            assert got.features == full
            assert got.accuracy == exact.lookup(size, budget).accuracy == max(acc.values())


@SETTINGS
@given(instances(), st.sampled_from(["greedy", "greedy-acc", "greedy-cost"]), st.randoms(use_true_random=False))
def test_state_round_trip_gives_identical_lookups(instance, backend, rng):
    costs, acc, domain, n0 = instance
    index = polydom.build(costs, acc.__getitem__, backend=backend, n0=n0, domain=domain)
    state = index.to_state()
    json.dumps(state.meta, allow_nan=False)
    assert all(isinstance(a, np.ndarray) and a.ndim == 1 for a in state.arrays.values())
    again = GreedyIndex.from_state(state)
    assert again.backend == backend and again.sequences == index.sequences and again.skyline == index.skyline
    assert again.lambdas == index.lambdas and again.n0 == index.n0 and again.domain == index.domain
    assert again.stats == json.loads(json.dumps(state.meta["stats"]))
    assert again.to_state().meta == state.meta
    brute = BruteForce(costs, acc.__getitem__)
    queries = list(_queries(brute, domain, rng, 4))
    for size, budget in queries:
        assert again.lookup(size, budget) == index.lookup(size, budget)
    sizes, budgets = [q[0] for q in queries], [q[1] for q in queries]
    a, b = index.lookup_many(sizes, budgets), again.lookup_many(sizes, budgets)
    assert np.array_equal(a.keys, b.keys) and np.array_equal(a.accuracy, b.accuracy) and np.array_equal(a.cost, b.cost)


def test_budget_below_every_skyline_entry_returns_the_empty_set_model():
    costs = {"a": [4.0], "b": [2.0, 1.0], "c": [3.0]}
    acc = {"": 0.5, "a": 0.7, "b": 0.8, "c": 0.6, "ab": 0.85, "ac": 0.75, "bc": 0.82, "abc": 0.9}

    def expand(fs):
        return polydom.Expansion(acc["".join(sorted(fs))], model=("model", fs))

    for backend in ("greedy", "greedy-acc", "greedy-cost"):
        index = polydom.build(costs, expand, backend=backend, n0=1.0)
        cheapest_nonempty = min(e.cost for e in index.skyline if e.mask)
        assert cheapest_nonempty > 1.9
        for budget in (0.0, 1.0, 1.9):
            choice = index.lookup(0.0, budget)
            assert choice.features == frozenset() and choice.cost == 0.0
            assert choice.accuracy == 0.5 and choice.model == ("model", frozenset())
            assert index.lookup_many([0.0], [budget])[0].model == ("model", frozenset())


def test_walk_adapts_to_the_item_size():
    """A budget chosen at n0 buys more features on a smaller item and fewer on a larger one."""
    costs = {"a": [0.0, 1.0], "b": [0.0, 2.0], "c": [0.0, 4.0]}
    acc = {frozenset(): 0.5}
    for fs, a in {"a": 0.6, "b": 0.7, "c": 0.8, "ab": 0.75, "ac": 0.85, "bc": 0.9, "abc": 0.95}.items():
        acc[frozenset(fs)] = a
    index = polydom.build(costs, acc.__getitem__, backend="greedy-acc", n0=10.0)
    assert index.sequence(0.0) == ("c", "b", "a")
    at_n0 = index.lookup(10.0, 60.0)
    assert at_n0.features == frozenset("cb") and at_n0.cost == 60.0
    assert index.lookup(5.0, 60.0).features == frozenset("abc")
    assert index.lookup(12.0, 60.0).features == frozenset("c")
    assert index.lookup(40.0, 60.0).features == frozenset()


def test_all_models_returned_are_prefix_models():
    inst = polydom.make_synthetic(6, k=None, seed=3)

    def expand(fs):
        return polydom.Expansion(inst.expand(fs), model=tuple(sorted(fs)))

    index = polydom.build(inst.costs, expand, backend="greedy", n0=1.0, domain=(1.0, 500.0))
    prefixes = {m for s in index.sequences for m in prefix_masks(s)}
    assert set(index.models) == prefixes
    for size in (1.0, 50.0, 500.0):
        for budget in (0.0, 100.0, 1e4, 1e7):
            choice = index.lookup(size, budget)
            assert choice.model == tuple(sorted(choice.features))
