"""A batch under one total budget: planned before any feature is computed, served anytime, re-planned
with the time left, never handing an image more than is left; on a real fitted classifier, with a
replayed clock where spend is asserted (no timed assertions)."""

import math
import warnings

import numpy as np
import pytest

import polydom
import polydom.serving.batchaccount
from polydom.serving.batchaccount import BatchAccount, BatchSpend, served_options, spread_order
from polydom.serving.batch import BatchServer
from polydom.index.serving.planning import option_table
from polydom.featurizers import REGISTRY, Feature
from polydom.featurizers.datasets import load_digits_images
from polydom.serving.planner import ServingPlanner

SIDES = (16, 24, 32)
NAMES = ["intensity_hist", "thumbnail", "edge_density"]


class Counter:
    """Wraps a feature function and counts its calls (picklable, module-level)."""

    def __init__(self, function):
        self.function = function
        self.calls = 0

    def __call__(self, image):
        self.calls += 1
        return self.function(image)


@pytest.fixture(scope="module")
def digits():
    images, labels, _ = load_digits_images(sides=SIDES, n_per_class=4, random_state=1)
    return images, labels, np.arange(len(images)) // len(SIDES)


@pytest.fixture(scope="module", params=["polydom", "polydom-ties", "greedy-cost"])
def fitted(request, digits, fast_params):
    """A classifier over counting features (counters reset by each test that reads them); with
    ``-ties``, the tie rule on (a lookup may serve a cheaper set than an option it lists)."""
    images, labels, groups = digits
    features = [Feature(f"counted_{n}", Counter(REGISTRY[n].function), dimension=REGISTRY[n].dimension)
                for n in NAMES]
    backend, _, ties = request.param.partition("-")
    options = {"tolerance": None} if ties else {}
    clf = polydom.CostSensitiveClassifier(features=features, selection=polydom.Selection(backend=backend, **options),
                                          **fast_params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a contended machine's timing warning is not under test here
        return clf.fit(images, labels, groups=groups)


def counters(clf) -> dict:
    return {name: f.function for name, f in clf.planner_.features.items()}


def sizes_of(images) -> list:
    return [im.shape[0] * im.shape[1] for im in images]


def full_cost(clf, images) -> float:
    """Predicted seconds to serve every image its most accurate set."""
    return clf.index_.plan_batch(sizes_of(images), math.inf).total_cost


class ReplayedClock:
    """The index, serving on a clock that advances by ``factor`` times each computed feature's
    predicted cost: what a machine ``factor`` times slower than its cost curves measures."""

    def __init__(self, index, factor: float):
        self._index, self.factor, self.now = index, factor, 0.0

    def __getattr__(self, name):
        value = getattr(self._index, name)
        if name in ("select", "select_steps"):  # the ways serving computes on a clock
            return lambda size, budget, compute, **options: self._replayed(value, size, budget, compute, **options)
        return value

    def _replayed(self, method, size, budget, compute, **options):
        # Each walk's clock starts at zero: a clock carried on from earlier items makes a
        # walk's elapsed time (after - start) differ from the sum of its predicted costs by a
        # rounding, and a planned set that fits its budget exactly then loses its last feature.
        self.now = 0.0

        def timed(name):
            value = compute(name)
            self.now += self.factor * self._index.cost_of([name], size)
            return value

        return method(size, budget, timed, clock=lambda: self.now, **options)


def replayed(clf, factor: float) -> ServingPlanner:
    return ServingPlanner(ReplayedClock(clf.index_, factor), clf.planner_.features)


def check_left_before_each(explanations, total: float) -> None:
    """The invariant: no image is given more than the time left before it."""
    spent = 0.0
    for e in explanations:
        assert e.budget <= max(0.0, total - spent) * (1 + 1e-12), (e.item, e.budget, total - spent)
        spent += e.measured_cost


# ------------------------------------------------------------------------------ planning first


def test_the_batch_is_planned_before_any_feature_is_computed(fitted, digits, monkeypatch):
    images = digits[0][:30]
    index = fitted.index_
    seen = []
    real = polydom.serving.batchaccount.solve_table

    def spy(table, total_budget, **options):
        seen.append((sorted(table.sizes.tolist()), total_budget, sum(c.calls for c in counters(fitted).values())))
        return real(table, total_budget, **options)

    total = 0.5 * full_cost(fitted, images)
    monkeypatch.setattr(polydom.serving.batchaccount, "solve_table", spy)
    for c in counters(fitted).values():
        c.calls = 0
    explanations = fitted.explain(images, total_budget=total)
    assert seen[0] == (sorted(sizes_of(images)), total, 0)  # every image's size, nothing computed yet
    computed = sum(len(e.features) for e in explanations)
    assert computed > 0 and sum(c.calls for c in counters(fitted).values()) >= computed
    plan = explanations.plan  # in input order, each set at its own predicted cost
    assert plan.total_cost <= total and len(plan) == len(images)
    for i, size in enumerate(sizes_of(images)):
        assert plan.choices.cost[i] == pytest.approx(index.cost_of(plan.choices.features(i), size), rel=1e-12)
    seen.clear()
    for c in counters(fitted).values():
        c.calls = 0
    fitted.predict(images, total_budget=total)
    assert seen[0][2] == 0


def test_an_invalid_image_is_named_before_planning(fitted, digits, monkeypatch):
    images = list(digits[0][:4]) + [np.zeros((3, 3), dtype=np.uint8)]
    monkeypatch.setattr(polydom.serving.batchaccount, "solve_table", lambda *a, **k: pytest.fail("planned an invalid batch"))
    with pytest.raises(ValueError, match="4"):
        fitted.predict(images, total_budget=1.0)


# ------------------------------------------------------------------------------ spend


def test_no_image_is_given_more_than_the_time_left_and_the_summary_adds_up(fitted, digits):
    images = digits[0]
    for fraction in (0.0, 0.2, 0.7):
        total = fraction * full_cost(fitted, images)
        explanations = fitted.explain(images, total_budget=total)
        check_left_before_each(explanations, total)
        assert all(e.steps for e in explanations if e.features)  # where each image stopped, and why
        s = explanations.summary
        assert isinstance(s, BatchSpend) and s.items == len(images) and s.total_budget == total
        assert s.spent == pytest.approx(math.fsum(e.measured_cost for e in explanations), rel=1e-9, abs=1e-15)
        assert s.served_accuracy == pytest.approx(np.mean([e.estimated_accuracy for e in explanations]))
        assert s.planned_cost <= total and s.planned_accuracy == explanations.plan.mean_accuracy
        assert s.slowdown >= 1 and s.planning_seconds >= 0 and s.left == total - s.spent
        assert s.as_dict()["within_budget"] == s.within_budget
        if fraction == 0.0:
            assert all(e.features == () and e.measured_cost == 0.0 for e in explanations)
            assert s.spent == 0.0 and s.replans == 0


@pytest.mark.parametrize("fraction", [0.1, 0.4, 0.8])
def test_on_a_replayed_clock_the_spend_stays_within_the_total(fitted, digits, fraction):
    images = digits[0]
    total = fraction * full_cost(fitted, images)
    server = BatchServer(replayed(fitted, 1.0))
    explanations = server.explain(images, total)
    check_left_before_each(explanations, total)
    s = explanations.summary
    assert s.spent <= total * (1 + 1e-9) and server.summary_ == s
    assert s.slowdown == pytest.approx(1.0)
    # The clock matches the curves, so each image is served what a lookup at its budget serves.
    first = explanations[0]
    assert set(first.features) == set(fitted.index_.lookup(first.size, first.budget).features)


def test_a_slower_machine_is_calibrated_and_overruns_by_at_most_one_image(fitted, digits):
    images = digits[0]
    total = 0.5 * full_cost(fitted, images)
    explanations = BatchServer(replayed(fitted, 3.0)).explain(images, total)
    check_left_before_each(explanations, total)
    s = explanations.summary
    assert s.slowdown >= 3.0 - 1e-9 and s.replans >= 1
    worst = max(max(0.0, e.measured_cost - e.budget) for e in explanations)
    assert s.spent <= total + worst + 1e-12
    # Calibrated, the last images still get features rather than the first ones taking all.
    assert any(e.features for e in explanations[-len(images) // 4:])


def test_re_plans_happen_every_k_images(fitted, digits):
    images = digits[0][:40]
    total = 10 * full_cost(fitted, images)  # generous: never runs out
    for k in (1, 7, 40):
        explanations = BatchServer(replayed(fitted, 1.0), replan_every=k, drift=math.inf).explain(images, total)
        assert explanations.summary.replans == (len(images) - 1) // k
    default = BatchServer(replayed(fitted, 1.0), drift=math.inf).explain(images, total)
    start, expected = 0, 0  # by default, once a quarter of the images left at the last plan are served
    while start + max(1, math.ceil(len(images[start:]) / 4)) < len(images):
        start += max(1, math.ceil(len(images[start:]) / 4))
        expected += 1
    assert default.summary.replans == expected


def test_an_infinite_total_serves_what_unlimited_budgets_serve(fitted, digits):
    images = digits[0][:24]
    want = fitted.explain(images)
    got = fitted.explain(images, total_budget=math.inf)
    assert [e.features for e in got] == [e.features for e in want]
    assert [e.label for e in got] == [e.label for e in want] and all(e.budget == math.inf for e in got)
    assert np.array_equal(fitted.predict(images, total_budget=math.inf), fitted.predict(images))
    assert got.summary.replans == 0


# ------------------------------------------------------------------------------ accuracy


def test_the_plan_holds_what_serving_delivers_and_beats_or_matches_an_equal_split(fitted, digits):
    images = digits[0]
    sizes = sizes_of(images)
    index = fitted.index_
    table, budgets = served_options(index, sizes)
    with np.errstate(invalid="ignore"):  # the check subtracts the padding's infinities
        table.check_invariants()
    valid = table.valid
    assert (budgets[valid] >= table.costs[valid]).all() and np.isinf(budgets[~valid]).all()
    for i in range(0, len(sizes), 7):  # each entry is what a lookup at its budget serves
        for j in range(table.counts[i]):
            choice = index.lookup(sizes[i], budgets[i, j])
            assert (choice.key, choice.cost, choice.accuracy) == (table.masks[i, j], table.costs[i, j],
                                                                  table.accuracy[i, j])
    spread = max(float(np.ptp(table.accuracy[i, : table.counts[i]])) for i in range(len(sizes)))
    for fraction in (0.05, 0.2, 0.5):
        total = fraction * full_cost(fitted, images)
        equal = index.lookup_many(sizes, [total / len(sizes)] * len(sizes))
        greedy = BatchServer(replayed(fitted, 1.0)).explain(images, total)
        exact = BatchServer(replayed(fitted, 1.0), exact=True).explain(images, total)
        assert exact.plan.solver == "milp" and exact.plan.total_cost <= total
        if fitted.selection.backend == "polydom":
            # The equal split is a plan over the same table: every item's set is among its served sets.
            assert all(k in table.masks[i] for i, k in enumerate(equal.keys.tolist()))
            # Greedy is within one item's accuracy range of the optimum, which the equal split cannot beat.
            assert greedy.summary.planned_accuracy >= equal.accuracy.mean() - spread / len(sizes) - 1e-12
            assert exact.summary.planned_accuracy >= equal.accuracy.mean() - 1e-3
        # On a clock that matches the curves, what is served is what was planned, or better.
        assert greedy.summary.served_accuracy >= greedy.summary.planned_accuracy - spread / len(sizes) - 1e-12


def test_without_ties_serving_delivers_every_option(built_without_ties):
    index, sizes = built_without_ties
    table, budgets = served_options(index, sizes, max_item_budget=300.0)
    options = option_table(index, sizes, max_item_budget=300.0)
    for name in ("masks", "costs", "accuracy", "counts"):
        assert np.array_equal(getattr(table, name), getattr(options, name), equal_nan=name == "accuracy"), name
    assert np.array_equal(budgets[table.valid], table.costs[table.valid])


@pytest.fixture(scope="module")
def built_without_ties():
    inst = polydom.make_synthetic(6, k=None, seed=4)
    index = polydom.build(inst.costs, inst.expand, tolerance=0.0)
    return index, np.random.default_rng(0).uniform(1, 10, 30)


def test_predict_proba_and_score_take_a_total(fitted, digits):
    images, labels, _ = digits
    total = 0.3 * full_cost(fitted, images)
    proba = fitted.predict_proba(images[:10], total_budget=total)
    assert proba.shape == (10, len(fitted.classes_)) and np.allclose(proba.sum(axis=1), 1.0)
    score = fitted.score(images, labels, total_budget=total)
    assert 0.0 <= score <= 1.0
    assert fitted.predict(images[:10], total_budget=total).shape == (10,)


def test_an_empty_batch_has_an_empty_account(fitted):
    out = fitted.explain([], total_budget=1.0)
    assert out == [] and out.summary.items == 0 and out.summary.spent == 0.0
    assert fitted.predict([], total_budget=1.0).shape == (0,)


# ------------------------------------------------------------------------------ bad input


def test_bad_input_is_named(fitted, digits):
    images = digits[0][:3]
    with pytest.raises(ValueError, match="budget.*total_budget.*not both"):
        fitted.predict(images, budget=0.01, total_budget=1.0)
    with pytest.raises(ValueError, match="budget.*total_budget.*not both"):
        fitted.explain(images, budget=0.0, total_budget=1.0)
    with pytest.raises(ValueError, match=r"total_budget must be >= 0 .*-1"):
        fitted.predict(images, total_budget=-1)
    with pytest.raises(ValueError, match="total_budget must be >= 0"):
        fitted.explain(images, total_budget=float("nan"))
    with pytest.raises(TypeError, match="total_budget must be a real number"):
        fitted.predict(images, total_budget="1s")
    with pytest.raises(TypeError, match="total_budget must be a real number"):
        fitted.predict(images, total_budget=True)
    with pytest.raises(TypeError, match="positional"):
        fitted.predict(images, 0.01, 1.0)  # keyword only: a positional third argument is refused
    index, sizes = fitted.index_, sizes_of(images)
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="replan_every"):
            BatchAccount(index, sizes, 1.0, replan_every=bad)
    with pytest.raises(ValueError, match="drift"):
        BatchAccount(index, sizes, 1.0, drift=-0.1)
    with pytest.raises(ValueError, match="max_item_budget"):
        BatchAccount(index, sizes, 1.0, max_item_budget=-1.0)


def test_not_fitted_is_refused_with_a_total():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        polydom.CostSensitiveClassifier().predict([np.zeros((16, 16), dtype=np.uint8)], total_budget=1.0)


def test_docstring_examples_run():
    import doctest

    assert doctest.testmod(polydom.serving.batchaccount).failed == 0


def test_spread_order_is_a_permutation_spread_along_the_batch():
    for n in (0, 1, 2, 3, 7, 8, 100, 1000):
        order = spread_order(n)
        assert sorted(order.tolist()) == list(range(n))
        for k in (2, 4, 10):
            if n >= 4 * k:  # any prefix of k positions leaves no gap much wider than n / k
                assert np.diff(np.sort(np.r_[order[:k], n])).max() <= 2 * n / k + 1
