"""Shared preparatory steps: a set pays for the union of its features' steps, exactly."""

import itertools
import math

import numpy as np

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


# ---------------------------------------------------------------- the classifier's built-in features

class CountingStep:
    """The greyscale conversion, counting its calls (picklable, module-level)."""

    def __init__(self):
        self.calls = 0

    def __call__(self, image):
        self.calls += 1
        return STEPS_BEFORE["grey"].function(image)


STEPS_BEFORE = dict(__import__("polydom.featurizers", fromlist=["STEPS"]).STEPS)


@pytest.fixture(scope="module")
def small_digits():
    """Small digits in colour (the grey levels in three channels): converting them is work."""
    from polydom.featurizers.datasets import load_digits_images

    images, labels, _ = load_digits_images(sides=(16, 24), n_per_class=5, random_state=0)
    return [np.repeat(im[..., None], 3, axis=2) for im in images], labels, np.arange(len(images)) // 2


@pytest.mark.parametrize("backend", ["polydom", "greedy"])
def test_the_built_in_features_share_the_greyscale_step_and_serving_computes_it_once(
        small_digits, fast_params, backend, monkeypatch):
    from polydom.featurizers import STEPS, Step
    from polydom.index.ranking import step_needs, tight_set

    counting = CountingStep()
    monkeypatch.setitem(STEPS, "grey", Step("grey", counting, "counted", STEPS_BEFORE["grey"].does_work))
    images, labels, groups = small_digits
    names = ["intensity_hist", "thumbnail", "edge_density"]
    clf = polydom.CostSensitiveClassifier(features=names, selection=polydom.Selection(backend=backend),
                                          **fast_params).fit(images, labels, groups=groups)
    index = clf.index_
    assert clf.feature_names_ == tuple(names) and index.features == ("grey", *names)
    assert index.params["requires"] == {n: ["grey"] for n in names} and "grey" in clf.cost_fits_
    size = float(images[0].shape[0] * images[0].shape[1])
    together = index.cost_of({"intensity_hist", "thumbnail"}, size)
    apart = index.cost_of({"intensity_hist"}, size) + index.cost_of({"thumbnail"}, size)
    assert together == pytest.approx(apart - clf.cost_curves_["grey"](size)) and together < apart

    counting.calls = 0
    record = clf.explain(images[:1], budget=None)[0]
    assert len(record.features) >= 2 and counting.calls == 1
    assert record.steps[0] == ("compute", "grey") and record.steps.count(("compute", "grey")) == 1
    # Served the same labels as the features computed one by one, each converting on its own.
    from polydom.featurizers import compute_features

    vectors = compute_features(images[0], names)
    plan = clf.planner_.plan(index.space.mask(["grey", *record.features]))
    x = np.concatenate([vectors[n] for n in plan.names])
    assert plan.predictor.predict_one(x) == record.label

    # Whatever the budget, the set served holds the step its features need and no step they don't.
    needs = step_needs(index.space, index.params["requires"])
    for budget in (0.0, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 1.0):
        for side in (16, 24):
            key = index.lookup(float(side * side), budget).key
            assert tight_set(key, needs) == key, (budget, side, sorted(index.space.frozenset(key)))


def test_on_grey_images_each_feature_casts_the_image_itself(small_digits, fast_params):
    """The grey step does no work on grey images: no item of its own, no shared cost."""
    images, labels, groups = small_digits
    grey = [im[..., 0] for im in images]
    names = ["intensity_hist", "thumbnail"]
    clf = polydom.CostSensitiveClassifier(features=names, **fast_params).fit(grey, labels, groups=groups)
    assert clf.index_.features == tuple(names) and "requires" not in clf.index_.params
    assert "grey" not in clf.cost_fits_
    in_colour = polydom.CostSensitiveClassifier(features=names, **fast_params).fit(images, labels, groups=groups)
    assert in_colour.index_.features == ("grey", *names)
    # The same pixels, the same vectors, the same labels with every feature computed.
    assert np.array_equal(clf.predict(grey[:8], budget=None), in_colour.predict(images[:8], budget=None))


def test_a_custom_feature_takes_the_greyscale_step_once_with_the_built_in_ones(monkeypatch):
    from polydom.featurizers import STEPS, Step, compute_features, unregister_feature

    counting = CountingStep()
    monkeypatch.setitem(STEPS, "grey", Step("grey", counting, "counted", STEPS_BEFORE["grey"].does_work))

    @polydom.feature(dimension=1, requires=("grey",))
    def mean_grey(image, grey):
        "Mean grey level."
        return [grey.mean()]

    try:
        image = np.zeros((16, 16, 3))
        image[..., 0] = 1.0
        vectors = compute_features(image, ["mean_grey", "thumbnail", "intensity_hist"])
        assert counting.calls == 1 and vectors["mean_grey"][0] == pytest.approx(0.2125, abs=1e-3)
        assert mean_grey.requires == ("grey",)
        with pytest.raises(ValueError, match="unknown steps"):
            polydom.feature(requires=("blur",))(lambda image, blur: [0.0])
    finally:
        unregister_feature("mean_grey")


def test_greedy_adds_a_feature_with_the_steps_it_lacks():
    costs = {"a": [1.0], "b": [2.0], "grey": [5.0]}
    index = polydom.build(costs, lambda fs: 0.5 + 0.2 * len(fs), requires={"a": ["grey"], "b": ["grey"]},
                          backend="greedy", n0=1.0)
    names = index.space.names
    for sequence in index.sequences:
        order = [names[i] for i in sequence]
        assert order.index("grey") < min(order.index("a"), order.index("b"))  # the step before its users
    # Every budget that fits the step and a feature serves one; more budget never serves less.
    served = [index.lookup(1.0, b).accuracy for b in (0.0, 5.0, 6.0, 7.9, 8.0, 100.0)]
    assert served == sorted(served) and served[2] == pytest.approx(0.7) and served[4] == pytest.approx(0.9)
