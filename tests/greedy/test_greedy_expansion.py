"""Greedy's expansion: the variants' definitions, tie-breaks and counting."""

import math

import pytest

import polydom
from polydom.greedy import DEFAULT_LAMBDAS, greedy_sequences

N0 = 1.0


def _build(inst, **options):
    return polydom.build(inst.costs, inst.expand, domain=(1.0, 500.0), n0=N0, **options)


@pytest.mark.parametrize("k", [1, None])
@pytest.mark.parametrize("seed", range(3))
def test_greedy_acc_is_lambda_zero_and_greedy_cost_is_lambda_inf(k, seed):
    inst = polydom.make_synthetic(8, k=k, seed=seed)
    acc = _build(inst, backend="greedy-acc")
    cost = _build(inst, backend="greedy-cost")
    both = _build(inst, backend="greedy", lambdas=[0.0, math.inf])
    assert acc.lambdas == (0.0,) and cost.lambdas == (math.inf,)
    assert acc.sequences == _build(inst, backend="greedy", lambdas=[0]).sequences
    assert cost.sequences == _build(inst, backend="greedy", lambdas=[math.inf]).sequences
    assert both.sequences == acc.sequences + cost.sequences
    # The default grid starts with 0, so Greedy's sequences include GreedyAcc's.
    assert _build(inst, backend="greedy").sequence(0.0) == acc.sequence(0.0)
    assert acc.backend == "greedy-acc" and cost.backend == "greedy-cost"


@pytest.mark.parametrize("seed", range(4))
def test_greedy_cost_adds_features_cheapest_first(seed):
    inst = polydom.make_synthetic(10, k=None, seed=seed)
    index = _build(inst, backend="greedy-cost")
    names = index.sequence(math.inf)
    costs = [inst.costs[f](N0) for f in names]
    assert costs == sorted(costs)


def test_greedy_cost_breaks_cost_ties_by_accuracy_gain_and_trains_only_the_tied():
    costs = {"a": [2.0], "b": [2.0], "c": [1.0], "d": [3.0]}
    single = {"a": 0.6, "b": 0.7, "c": 0.55, "d": 0.8}
    calls = []

    def expand(fs):
        calls.append(fs)
        return max([0.5] + [single[f] for f in fs])

    index = polydom.build(costs, expand, backend="greedy-cost", n0=N0)
    assert index.sequence(math.inf) == ("c", "b", "a", "d")
    # {} and the 4 prefixes, plus {c, a} to break the a/b cost tie ({c, b} is the prefix).
    assert index.stats["trained"] == 6 and index.stats["expanded"] == 5
    assert len(calls) == len(set(calls)) == 6


def test_ties_go_to_lower_cost_then_lower_index():
    # Equal accuracies everywhere: every gain ties at every step.
    costs = {"x0": [3.0], "x1": [1.0], "x2": [1.0], "x3": [2.0]}
    index = polydom.build(costs, lambda fs: 0.5, backend="greedy", lambdas=[0.0, 1.0], n0=N0)
    assert index.sequence(0.0) == index.sequence(1.0) == ("x1", "x2", "x3", "x0")


@pytest.mark.parametrize("seed", range(5))
def test_cf1_sequences_are_deterministic_and_follow_the_tie_rule(seed):
    """Under cf₁ every Δa after the first step is 0, so the rest goes by cost, then index."""
    inst = polydom.make_synthetic(12, k=1, seed=seed)
    first, second = _build(inst, backend="greedy"), _build(inst, backend="greedy")
    assert first.sequences == second.sequences
    assert first.stats == {**second.stats, "build_seconds": first.stats["build_seconds"]}
    names = list(inst.costs)
    cost = {f: inst.costs[f](N0) for f in names}
    best = max(names, key=inst.single_accuracy.get)
    for lam in DEFAULT_LAMBDAS:
        seq = first.sequence(lam)
        head = max(names, key=lambda f: (inst.single_accuracy[f] - 0.5 - lam * cost[f], -cost[f], -names.index(f)))
        assert seq[0] == head
        # Once the best feature is in, the remaining features tie on Δa = 0: cheaper first.
        rest = seq[seq.index(best) + 1 :]
        assert list(rest) == sorted(rest, key=lambda f: (cost[f], names.index(f)))


@pytest.mark.parametrize("k", [1, None])
def test_each_set_is_trained_once_and_counted(k):
    inst = polydom.make_synthetic(9, k=k, seed=7)
    calls = []

    def expand(fs):
        calls.append(fs)
        return inst.expand(fs)

    index = polydom.build(inst.costs, expand, backend="greedy", n0=N0, domain=(1.0, 500.0))
    assert len(calls) == len(set(calls)) == index.stats["trained"]
    assert frozenset() in calls
    assert index.stats["expanded"] == index.stats["trained"] - 1
    f, L = 9, len(DEFAULT_LAMBDAS)
    assert index.stats["expanded"] <= L * f * (f + 1) // 2
    assert index.stats["lambdas"] == L
    assert 1 <= index.stats["sequences"] <= L
    assert index.stats["index_entries"] == len(index.skyline)


def test_expansion_function_directly():
    acc = {0b00: 0.5, 0b01: 0.7, 0b10: 0.8, 0b11: 0.9}
    out = greedy_sequences([1.0, 5.0], acc.__getitem__, [0.0, 0.1, math.inf])
    # λ = 0.1: gains 0.2 - 0.1 = 0.1 for bit 0, 0.3 - 0.5 < 0 for bit 1.
    assert out.sequences == ((1, 0), (0, 1), (0, 1))
    assert list(out.accuracy)[0] == 0
    assert out.trained == 4 and out.expanded == 3
