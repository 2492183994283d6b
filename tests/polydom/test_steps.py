"""Shared preparatory steps: a set pays for the union of its features' steps, exactly."""

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polydom
from polydom.steps import UsableSets, check_requires, closure

FEATURES = ("a", "b", "c", "d")
STEPS = ("grey", "small")


@st.composite
def instances(draw):
    """Linear costs for four features and two steps, each feature needing some steps, and
    additive (so monotone) accuracies over the features."""
    # Quarters: every cost and sum below is exact in binary floating point, so the brute force and
    # the index compare the same numbers.
    costs = {n: [draw(st.integers(0, 12)) / 4, draw(st.integers(0, 8)) / 4] for n in FEATURES + STEPS}
    requires = {f: draw(st.lists(st.sampled_from(STEPS), max_size=2, unique=True)) for f in FEATURES}
    weights = {f: draw(st.floats(0.01, 0.17)) for f in FEATURES}  # at most 0.3 + 4 * 0.17 < 1
    return costs, requires, weights


def _accuracy(weights, features) -> float:
    return 0.3 + sum(weights.get(f, 0.0) for f in features)  # a step no feature needs is worth nothing


def _union_cost(costs, requires, features, size) -> float:
    items = closure(features, requires)
    return math.fsum(costs[n][0] + costs[n][1] * size for n in items)


@settings(max_examples=40, deadline=None)
@given(instances(), st.integers(1, 10), st.integers(0, 160))
def test_lookup_equals_brute_force_under_union_costs(instance, size, quarters):
    budget = quarters / 4
    costs, requires, weights = instance
    index = polydom.build(costs, lambda fs: _accuracy(weights, fs), requires=requires, domain=(1.0, 10.0))
    items = FEATURES + STEPS  # a step no feature needs is an item like any other (worth nothing)
    best = max(_accuracy(weights, fs) for k in range(len(items) + 1) for fs in itertools.combinations(items, k)
               if _union_cost(costs, requires, fs, size) <= budget)
    choice = index.lookup(size, budget)
    assert choice.accuracy == pytest.approx(best, abs=1e-9)
    served = set(choice.features) - set(STEPS)
    assert closure(served, requires) <= set(choice.features) | served  # every step a served feature needs
    assert index.cost_of(served, size) <= budget


def test_two_features_that_share_a_step_cost_less_than_apart_and_the_walk_computes_it_once():
    costs = {"a": [1.0], "b": [2.0], "grey": [5.0]}
    requires = {"a": ["grey"], "b": ["grey"]}
    calls = []
    index = polydom.build(costs, lambda fs: (calls.append(fs), 0.5 + 0.2 * len(fs))[1], requires=requires)
    together = index.cost_of({"a", "b"}, 1.0)
    assert together == pytest.approx(1.0 + 2.0 + 5.0)
    assert together < index.cost_of({"a"}, 1.0) + index.cost_of({"b"}, 1.0)
    # expand sees features only, once per usable set, never a step.
    assert sorted(map(sorted, calls)) == [[], ["a"], ["a", "b"], ["b"]]
    choice = index.lookup(1.0, 8.0)
    assert set(choice.features) == {"a", "b", "grey"}
    assert index.lookup(1.0, 7.9).accuracy == pytest.approx(0.7)  # one feature and the step

    computed = []

    def compute(name, deadline=None):
        computed.append(name)

    index.select(1.0, math.inf, compute)
    assert sorted(computed) == ["a", "b", "grey"] and computed.count("grey") == 1
    # Steps first, although both features are cheaper: each feature finds its step computed.
    assert computed[0] == "grey"
    assert all(index.chains[m][0] == 2 for m in index.chains if m & 3)  # bit 2 is grey


def test_the_usable_set_of_a_lattice_set_and_bad_requirements():
    usable = UsableSets(lambda fs: len(fs), {"a": ["grey"], "b": []})
    assert usable.usable({"a"}) == frozenset() and usable.usable({"a", "grey", "b"}) == {"a", "b"}
    assert usable({"a", "grey"}) == 1 and usable({"grey", "a"}) == 1
    with pytest.raises(ValueError, match="costs does not list"):
        check_requires({"a": ["nope"]}, ["a"])
    with pytest.raises(ValueError, match="requires itself"):
        check_requires({"a": ["a"]}, ["a"])
    with pytest.raises(ValueError, match="steps need no steps"):
        check_requires({"a": ["s"], "s": ["t"]}, ["a", "s", "t"])
    with pytest.raises(TypeError, match="requires must map"):
        polydom.build({"a": [1.0]}, lambda fs: 0.5, requires=["a"])


@pytest.mark.parametrize("backend", ["polydom", "greedy"])
def test_the_steps_are_saved_with_the_index(backend, tmp_path):
    costs = {"a": [1.0], "b": [2.0], "grey": [5.0]}
    index = polydom.build(costs, lambda fs: 0.5 + 0.2 * len(fs), requires={"a": ["grey"], "b": ["grey"]},
                          backend=backend, **({"n0": 1.0} if backend == "greedy" else {}))
    index.save(tmp_path / "index")
    loaded = polydom.load(tmp_path / "index")
    assert loaded.cost_of({"a", "b"}, 1.0) == index.cost_of({"a", "b"}, 1.0) == 8.0
    assert loaded.params["requires"] == {"a": ["grey"], "b": ["grey"]}
