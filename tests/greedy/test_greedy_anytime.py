"""Measured mode: ``index.select`` (the paper's anytime walk) with an injected clock."""

import math

import numpy as np
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polydom


class FakeClock:
    """A clock that only moves when a feature is computed, by that feature's actual cost."""

    def __init__(self, actual):
        self.now = 0.0
        self.actual = actual
        self.computed = []

    def __call__(self):
        return self.now

    def compute(self, name):
        self.computed.append(name)
        self.now += self.actual[name]


def _index(n_features=8, seed=0, k=None, backend="greedy"):
    inst = polydom.make_synthetic(n_features, k=k, seed=seed)

    def expand(fs):
        return polydom.Expansion(inst.expand(fs), model=("m", fs))

    return inst, polydom.build(inst.costs, expand, backend=backend, n0=1.0, domain=(1.0, 500.0))


@pytest.mark.parametrize("size", [1.0, 7.0, 50.0])
@pytest.mark.parametrize("backend", ["greedy", "greedy-acc", "greedy-cost"])
def test_exact_predictions_serve_at_least_lookup_and_exactly_it_at_n0(size, backend):
    inst, index = _index(backend=backend)
    actual = {f: inst.costs[f](size) for f in inst.costs}
    for budget in (0.0, 50.0, 300.0, 1e3, 1e4, 1e5):
        clock = FakeClock(actual)
        got = index.anytime(size, budget, clock.compute, clock=clock)
        want = index.lookup(size, budget)
        # At n0 the lookup's prefix is the most accurate that fits; elsewhere another sequence's
        # prefix may fit better at this size, and the walk takes it.
        assert got.accuracy >= want.accuracy
        if size == index.n0:
            assert got.features == want.features and got.key == want.key and got.accuracy == want.accuracy
            assert got.cost == want.cost
        assert got.cost <= budget * (1 + 1e-12)  # the protocol's slack
        assert got.model == ("m", got.features)
        assert frozenset(clock.computed) == got.features


@settings(deadline=None, max_examples=60)
@given(
    st.integers(0, 20), st.sampled_from([1, None]), st.floats(1.0, 500.0),
    st.floats(0.0, 2e4), st.lists(st.floats(0.0, 1.0), min_size=8, max_size=8),
)
def test_features_no_slower_than_predicted_stay_within_budget(seed, k, size, budget, speed):
    inst, index = _index(seed=seed, k=k)
    names = list(inst.costs)
    actual = {f: inst.costs[f](size) * s for f, s in zip(names, speed)}
    clock = FakeClock(actual)
    got = index.anytime(size, budget, clock.compute, clock=clock)
    predicted = index.lookup(size, budget)
    assert got.cost <= budget * (1 + 1e-12)  # the protocol's slack
    assert math.isclose(got.cost, sum(actual[f] for f in clock.computed), rel_tol=1e-9, abs_tol=1e-9)
    # Faster features can only leave room for more: never less accurate than the lookup.
    assert got.accuracy >= predicted.accuracy
    assert got.features <= frozenset(clock.computed)
    assert got.model == ("m", got.features)


def _walked_sequence(index, budget):
    entries = [e for e in index.skyline if e.cost <= budget] or index.skyline[:1]
    return index.sequence(index.lambdas[entries[-1].lam])


def test_overrunning_feature_stops_the_walk_early():
    inst, index = _index(seed=2, k=None)
    size, budget = 1.0, 1e4
    predicted = index.lookup(size, budget)
    walked = _walked_sequence(index, budget)
    assert predicted.features == frozenset(walked)
    actual = {f: inst.costs[f](size) for f in inst.costs}
    # The first feature overruns its prediction, leaving less room than the second predicts.
    actual[walked[0]] = budget - inst.costs[walked[1]](size) / 2
    clock = FakeClock(actual)
    got = index.anytime(size, budget, clock.compute, clock=clock)
    # The second feature no longer fits and is never started; the walk may go on with another
    # sequence's prefix that fits what is left, and serves at least the computed prefix.
    assert clock.computed[0] == walked[0] and walked[1] not in clock.computed
    assert got.cost == sum(actual[f] for f in clock.computed) <= budget
    assert got.accuracy >= index.accuracy[index.space.mask(walked[:1])]
    assert got.features <= frozenset(clock.computed)
    assert got.model == ("m", got.features)


@pytest.mark.parametrize("backend", ["greedy", "greedy-acc", "greedy-cost"])
def test_budgets_an_ulp_from_a_sets_cost_serve_the_lookups_set_at_n0(backend):
    # A clock matching the curves may sum the same costs in another order than the budget was
    # summed in (a batch plan's set cost against the walk's per-feature sum). Lookup and walk
    # share the protocol's slack, so an ulp either way changes neither, and they agree.
    inst, index = _index(backend=backend)
    size = index.n0
    for entry in index.skyline[1:]:
        for budget in (entry.cost, float(np.nextafter(entry.cost, 0.0)), float(np.nextafter(entry.cost, math.inf))):
            choice = index.lookup(size, budget)
            assert choice.features == index.lookup(size, entry.cost).features
            for late in (False, True):
                clock = FakeClock({f: inst.costs[f](size) for f in inst.costs})
                read = (lambda: float(np.nextafter(clock.now, math.inf))) if late else clock
                got = index.anytime(size, budget, clock.compute, clock=read)
                assert got.features == choice.features and got.accuracy == choice.accuracy
                assert got.cost <= budget * (1 + 1e-12) or late
            batch = index.lookup_many([size], [budget])
            assert batch[0].features == choice.features and batch[0].cost == choice.cost


def test_overrun_past_the_budget_keeps_the_computed_prefix_and_reports_measured_time():
    inst, index = _index(seed=1, k=None)
    size, budget = 1.0, 1e4
    first = index.lookup(size, budget)
    clock = FakeClock({f: 2 * budget for f in inst.costs})
    got = index.anytime(size, budget, clock.compute, clock=clock)
    assert len(clock.computed) == 1 and len(first.features) >= 1
    assert got.features == frozenset(clock.computed) and got.cost == 2 * budget


def test_default_clock_and_argument_checks():
    inst, index = _index(n_features=4)
    seen = []
    got = index.anytime(1.0, 1e9, seen.append)
    assert got.features == frozenset(seen) == frozenset(inst.costs)
    assert 0.0 <= got.cost < 10.0
    with pytest.raises(ValueError, match="NaN"):
        index.anytime(1.0, math.nan, seen.append)
    with pytest.raises(ValueError, match="outside"):
        index.anytime(600.0, 1.0, seen.append)
    with pytest.raises(TypeError, match="compute"):
        index.anytime(1.0, 1.0, None)


def test_real_time_budget_is_respected_with_sleeping_features():
    costs = {"a": [0.002], "b": [0.002], "c": [0.002]}
    acc = {frozenset(): 0.5, frozenset("a"): 0.6, frozenset("b"): 0.55, frozenset("c"): 0.52}
    for fs in ("ab", "ac", "bc", "abc"):
        acc[frozenset(fs)] = 0.6 + 0.05 * len(fs)
    index = polydom.build(costs, acc.__getitem__, backend="greedy-acc", n0=1.0)
    slow = {"a": 0.0, "b": 0.05, "c": 0.0}
    got = index.anytime(1.0, 0.02, lambda f: time.sleep(slow[f]))
    # a is instant, b overruns its 2 ms prediction by far: c is never started.
    assert index.sequence(0.0)[:2] == ("a", "b")
    assert got.features == frozenset("ab") and got.cost >= 0.05


@settings(deadline=None, max_examples=40)
@given(st.integers(0, 50), st.sampled_from(["greedy", "greedy-acc", "greedy-cost"]), st.floats(1.0, 500.0),
       st.lists(st.floats(1.0, 4.0), min_size=8, max_size=8))
def test_served_accuracy_never_falls_as_the_budget_grows(seed, backend, size, guards):
    # Guards that refuse a sequence's first feature once made Greedy serve nothing at a budget
    # where a smaller one served a prefix of another sequence; on a clock that matches the curves
    # the walk now serves the most accurate prefix it can reach, which only grows with the budget.
    import copy

    inst, index = _index(seed=seed, backend=backend)
    index = copy.copy(index)
    index.params = {**index.params, "cost_guard": list(guards)}
    actual = {f: inst.costs[f](size) for f in inst.costs}
    total = sum(actual.values()) * 4.0
    served = []
    for budget in [0.0] + list(total * 2.0 ** -np.arange(16.0)[::-1]):
        clock = FakeClock(actual)
        got = index.anytime(size, float(budget), clock.compute, clock=clock)
        assert got.cost <= budget * (1 + 1e-12)
        served.append(got.accuracy)
    assert all(b >= a for a, b in zip(served, served[1:])), served


def test_a_guard_that_refuses_the_lookups_first_feature_falls_back_on_another_sequence():
    # Two sequences: (a, b) for accuracy, (b, a) for cost. At budget 1 the lookup walks (a, b),
    # whose first feature a (1 s) has a guard of 3: refused. The walk used to stop there and serve
    # nothing (0.5) where budget 0.5 served {b} (0.6); it now reaches b along (b, a).
    import copy

    acc = {frozenset(): 0.5, frozenset("a"): 0.8, frozenset("b"): 0.6, frozenset("ab"): 0.9}
    index = polydom.build({"a": [1.0], "b": [0.2]}, acc.__getitem__, backend="greedy", n0=1.0)
    assert {index.sequence(lam) for lam in index.lambdas} == {("a", "b"), ("b", "a")}
    index = copy.copy(index)
    index.params = {**index.params, "cost_guard": [3.0, 1.0]}
    served = {}
    for budget in (0.1, 0.5, 1.0, 2.0, 3.2):
        clock = FakeClock({"a": 1.0, "b": 0.2})
        served[budget] = index.anytime(1.0, budget, clock.compute, clock=clock)
    assert index.lookup(1.0, 1.0).features == frozenset("a")
    assert [served[b].features for b in served] == [frozenset(), frozenset("b"), frozenset("b"), frozenset("b"),
                                                    frozenset("ab")]
