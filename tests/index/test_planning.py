"""Batch plans under one total budget: the greedy LP-hull solver, the integer program, brute force."""

import doctest
import itertools
import math
import random
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polydom
from polydom.index.serving import planning
from polydom.index.serving.planning import BatchPlan, option_table, plan_batch, upper_hull
from polydom.index.protocol import ExtrapolationWarning
from polydom.index.queries import Batch
from polydom.index.values import Choice

BACKENDS = [{}, {"backend": "greedy", "n0": 3.0}]


def _tiny(seed: int, n: int = 3):
    """Random quadratic costs and monotone accuracies over ``n`` features."""
    rng = random.Random(seed)
    names = [f"f{i}" for i in range(n)]
    costs = {f: [rng.uniform(0, 2), rng.uniform(0, 1), rng.choice([0.0, rng.uniform(0, 0.2)])] for f in names}
    acc = {}
    for m in sorted(range(1 << n), key=int.bit_count):
        s = frozenset(names[i] for i in range(n) if m >> i & 1)
        acc[s] = max([0.4 + 0.55 * rng.random()] + [acc[s - {f}] for f in s])
    return costs, acc


def _brute_force(index, sizes, budget, cap=None, accuracy=None):
    """The best summed accuracy over every combination of the items' options (and its cost)."""
    rows = []
    for i, size in enumerate(sizes):
        masks, costs, accs = index.options_at(float(size))
        if accuracy is not None:
            accs = accuracy[i][: len(masks)]
        rows.append([(c, a) for c, a in zip(costs, accs) if cap is None or c <= cap])
    best = -math.inf
    for combo in itertools.product(*rows):
        if math.fsum(c for c, _ in combo) <= budget:
            best = max(best, math.fsum(a for _, a in combo))
    return best


def _ranges(index, sizes):
    return [max(index.options_at(float(s))[2]) - min(index.options_at(float(s))[2]) for s in sizes]


def _check_plan(plan, index, sizes, budget, cap=None):
    assert isinstance(plan, BatchPlan) and isinstance(plan.choices, Batch)
    plan.check_invariants()
    assert plan.total_cost <= budget
    assert len(plan) == len(sizes)
    for i, size in enumerate(sizes):
        masks, costs, _ = index.options_at(float(size))
        j = masks.index(int(plan.choices.keys[i]))
        assert plan.choices.cost[i] == costs[j]
        if cap is not None:
            assert plan.choices.cost[i] <= cap


def test_docstring_examples_run():
    assert doctest.testmod(planning, raise_on_error=False).failed == 0


# --------------------------------------------------------------------------- against brute force


@pytest.mark.parametrize("build_options", BACKENDS, ids=["polydom", "greedy"])
@settings(deadline=None, max_examples=30, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), items=st.integers(1, 4), fraction=st.floats(0.0, 1.0), capped=st.booleans())
def test_exact_equals_brute_force_and_greedy_is_within_one_item(build_options, seed, items, fraction, capped):
    costs, acc = _tiny(seed)
    index = polydom.build(costs, acc.__getitem__, **build_options)
    rng = np.random.default_rng(seed)
    sizes = rng.uniform(0, 10, items)
    most = sum(max(index.options_at(float(s))[1]) for s in sizes)
    budget = fraction * most
    cap = float(rng.uniform(0.3, 1.0) * max(index.options_at(float(sizes[0]))[1])) if capped else None
    if cap is not None and any(min(index.options_at(float(s))[1]) > cap for s in sizes):
        cap = None
    best = _brute_force(index, sizes, budget, cap)
    exact = plan_batch(index, sizes, budget, exact=True, max_item_budget=cap, mip_rel_gap=0.0)
    greedy = plan_batch(index, sizes, budget, max_item_budget=cap)
    for plan in (exact, greedy):
        _check_plan(plan, index, sizes, budget, cap)
    assert math.fsum(exact.choices.accuracy.tolist()) == pytest.approx(best, abs=1e-9)
    total = math.fsum(greedy.choices.accuracy.tolist())
    assert total <= best + 1e-12
    assert total >= best - max(_ranges(index, sizes)) - 1e-12
    assert greedy.accuracy_bound * items >= best - 1e-9


@settings(deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), items=st.integers(1, 4), fraction=st.floats(0.0, 1.0))
def test_accuracy_overrides_in_every_form_plan_alike_and_match_brute_force(seed, items, fraction):
    costs, acc = _tiny(seed)
    index = polydom.build(costs, acc.__getitem__)
    rng = np.random.default_rng(seed)
    sizes = rng.uniform(0, 10, items)
    counts = [len(index.options_at(float(s))[0]) for s in sizes]
    rows = [rng.uniform(0, 1, k) for k in counts]
    square = np.full((items, max(counts)), np.nan)
    for i, row in enumerate(rows):
        square[i, : len(row)] = row
    budget = fraction * sum(max(index.options_at(float(s))[1]) for s in sizes)
    best = _brute_force(index, sizes, budget, accuracy=rows)
    plans = [plan_batch(index, sizes, budget, accuracy=a, exact=True, mip_rel_gap=0.0)
             for a in (square, rows, lambda i, masks: rows[i])]
    for plan in plans:
        _check_plan(plan, index, sizes, budget)
        assert math.fsum(plan.choices.accuracy.tolist()) == pytest.approx(best, abs=1e-9)
    greedy = plan_batch(index, sizes, budget, accuracy=rows)
    assert math.fsum(greedy.choices.accuracy.tolist()) >= best - max(np.ptp(r) for r in rows) - 1e-12


# --------------------------------------------------------------------------- against the integer program


@pytest.mark.parametrize("seed,fraction,override", [(1, 0.03, False), (2, 0.15, True), (3, 0.4, False)])
def test_greedy_matches_milp_on_random_instances(seed, fraction, override):
    inst = polydom.make_synthetic(6, k=None, seed=seed)
    index = polydom.build(inst.costs, inst.expand)
    rng = np.random.default_rng(seed)
    n = 800
    sizes = rng.uniform(0, 100, n)
    table = option_table(index, sizes)
    accuracy = None
    if override:  # item-specific estimates, no longer monotone along each item's options
        accuracy = [np.clip(np.array(index.options_at(float(s))[2]) + rng.normal(0, 0.05, table.counts[i]), 0, 1)
                    for i, s in enumerate(sizes)]
    budget = fraction * float(table.costs[np.arange(n), table.counts - 1].sum())
    greedy = plan_batch(index, sizes, budget, accuracy=accuracy)
    exact = plan_batch(index, sizes, budget, accuracy=accuracy, exact=True)
    for plan in (greedy, exact):
        plan.check_invariants()
        assert plan.total_cost <= budget
    assert abs(greedy.mean_accuracy - exact.mean_accuracy) <= 1e-4
    # The guarantee behind it: the LP bound is above every plan, greedy within one item of it.
    assert greedy.accuracy_bound >= exact.mean_accuracy - 1e-9 * 1 / n
    assert greedy.mean_accuracy >= greedy.accuracy_bound - 1.0 / n
    # And both beat the equal split by a wide margin.
    equal = index.lookup_many(sizes, np.full(n, budget / n))
    if not override:
        assert greedy.mean_accuracy > float(equal.accuracy.mean()) + 0.01


# --------------------------------------------------------------------------- behaviour


@pytest.mark.parametrize("build_options", BACKENDS, ids=["polydom", "greedy"])
def test_the_contract_method_plans_on_both_backends(build_options):
    inst = polydom.make_synthetic(5, k=None, seed=4)
    index = polydom.build(inst.costs, inst.expand, **build_options)
    sizes = np.random.default_rng(4).uniform(0, 50, 300)
    budget = 0.2 * sum(max(index.options_at(float(s))[1]) for s in sizes)
    plan = index.plan_batch(sizes, budget)
    _check_plan(plan, index, sizes, budget)
    assert plan.solver == "greedy"
    choice = plan.choices[0]
    assert isinstance(choice, Choice) and choice.features == index.space.frozenset(choice.key)
    assert choice.accuracy == index.trained[choice.key]
    capped = index.plan_batch(sizes, budget, max_item_budget=budget / len(sizes), exact=True)
    _check_plan(capped, index, sizes, budget, cap=budget / len(sizes))
    assert capped.solver == "milp"
    # The equal split is one feasible plan; the shared budget does at least as well, up to one item.
    equal = index.lookup_many(sizes, np.full(len(sizes), budget / len(sizes)))
    assert plan.mean_accuracy >= float(equal.accuracy.mean()) - 1.0 / len(sizes)


def test_budget_extremes_and_exact_fits():
    costs, acc = _tiny(5)
    index = polydom.build(costs, acc.__getitem__)
    sizes = [1.0, 2.0, 3.0]
    nothing = plan_batch(index, sizes, 0.0)
    assert nothing.total_cost == 0.0 and list(nothing.choices.keys) == [0, 0, 0]
    for exact in (False, True):
        everything = plan_batch(index, sizes, math.inf, exact=exact)
        assert everything.optimal
        assert [everything.choices.accuracy[i] for i in range(3)] == [max(index.options_at(s)[2]) for s in sizes]
    # A budget equal to a plan's cost admits that plan exactly.
    most = math.fsum(index.options_at(s)[1][-1] for s in sizes)
    assert plan_batch(index, sizes, most, exact=True, mip_rel_gap=0.0).total_cost == most
    empty = plan_batch(index, [], 5.0)
    assert len(empty) == 0 and empty.total_cost == 0.0 and empty.mean_accuracy == 0.0


def test_the_hull_keeps_exactly_the_concave_points():
    costs = {"a": [1.0], "b": [2.0], "c": [3.0]}
    acc = {"a": 0.70, "b": 0.75, "c": 0.90}
    index = polydom.build(costs, lambda s: max([acc[f] for f in s], default=0.5))
    table = option_table(index, [1.0, 1.0])
    table.check_invariants()
    positions, lengths = upper_hull(table)
    assert list(lengths) == [3, 3]
    assert [table.costs[0, p] for p in positions[0, :3]] == [0.0, 1.0, 3.0]  # B (2, .75) lies under A-C
    plan = index.plan_batch([1.0, 1.0], 4.0)
    assert sorted(plan.choices.accuracy) == [0.7, 0.9] and plan.mean_accuracy == pytest.approx(0.8)


def test_outside_the_measured_sizes_the_index_policy_applies():
    costs, acc = _tiny(6)
    index = polydom.build(costs, acc.__getitem__, measured_range=(0.0, 5.0))
    with pytest.warns(ExtrapolationWarning):
        plan_batch(index, [1.0, 9.0], 10.0)
    strict = polydom.build(costs, acc.__getitem__, measured_range=(0.0, 5.0), extrapolate="raise")
    with pytest.raises(ValueError, match="outside the sizes"):
        plan_batch(strict, [9.0], 10.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan_batch(index, [1.0, 4.0], 10.0)


def test_bad_input_is_named(costly_backend):
    costs, acc = _tiny(7)
    index = polydom.build(costs, acc.__getitem__, domain=(0.0, 100.0))
    width = option_table(index, [1.0, 2.0]).costs.shape[1]
    cases = [
        (dict(total_budget=-1.0), ValueError, "total_budget must be >= 0"),
        (dict(total_budget=math.nan), ValueError, "total_budget must be >= 0"),
        (dict(total_budget="5"), TypeError, "total_budget must be a real number"),
        (dict(sizes=[1.0, 200.0]), ValueError, "size .*200.0.* at position 1 is outside"),
        (dict(sizes=[1.0, math.nan]), ValueError, "size is NaN at position 1"),
        (dict(sizes=["a"]), TypeError, "sizes must hold real numbers"),
        (dict(max_item_budget=-1.0), ValueError, "max_item_budget must be >= 0"),
        (dict(exact="yes"), TypeError, "exact must be True or False"),
        (dict(time_limit=0), ValueError, "time_limit must be > 0"),
        (dict(mip_rel_gap=2.0), ValueError, "mip_rel_gap must be in"),
        (dict(accuracy=np.zeros((2, width + 1))), ValueError, "accuracy must have shape"),
        (dict(accuracy=np.full((2, width), 1.5)), ValueError, "must be finite and in \\[0, 1\\]"),
        (dict(accuracy=lambda i, masks: [0.5]), ValueError, "accuracy\\(0, masks\\) returned shape"),
        (dict(accuracy=[[0.5], [0.5, 0.5], [0.5]]), ValueError, "3 rows for 2 items"),
        (dict(accuracy=[[0.5], [0.5, 0.5]]), ValueError, "accuracy row 0 has shape"),
        (dict(accuracy=5), TypeError, "accuracy must be an"),
    ]
    for options, error, message in cases:
        args = {"sizes": [1.0, 2.0], "total_budget": 5.0, **options}
        with pytest.raises(error, match=message):
            plan_batch(index, **args)
    with pytest.raises(TypeError, match="index must be a polydom index"):
        plan_batch(object(), [1.0], 5.0)
    with pytest.raises(ValueError, match="below the 3.0 the items' cheapest options cost together"):
        plan_batch(costly_backend, [0.0, 0.0, 0.0], 2.0)
    with pytest.raises(ValueError, match="no option of item 1 \\(size 2.0\\) costs at most max_item_budget=2.5"):
        plan_batch(costly_backend, [1.0, 2.0], 10.0, max_item_budget=2.5)


def test_exact_refuses_what_it_cannot_hold(monkeypatch):
    costs, acc = _tiny(8)
    index = polydom.build(costs, acc.__getitem__)
    sizes = np.linspace(1, 5, 10)
    monkeypatch.setattr(planning, "MILP_MAX_VARIABLES", 5)
    with pytest.raises(ValueError, match="binary variables .* use exact=False"):
        plan_batch(index, sizes, 10.0, exact=True)
    assert plan_batch(index, sizes, 10.0).total_cost <= 10.0  # greedy has no such limit


def _same_plan(a, b) -> bool:
    return (np.array_equal(a.choices.keys, b.choices.keys) and np.array_equal(a.choices.cost, b.choices.cost)
            and a.total_cost == b.total_cost)


@pytest.mark.parametrize("build_options", BACKENDS, ids=["polydom", "greedy"])
def test_exact_at_its_time_limit_falls_back_to_the_greedy_plan(monkeypatch, build_options):
    """A solver stopped at its limit with no plan, or a worse one, gives way to the greedy plan;
    with one at least as good, its own plan stands, not called optimal."""
    import scipy.optimize
    from scipy.optimize import OptimizeResult

    inst = polydom.make_synthetic(5, k=None, seed=4)
    index = polydom.build(inst.costs, inst.expand, **build_options)
    sizes = np.random.default_rng(4).uniform(1, 100, 40)
    budget = 0.2 * math.fsum(max(index.options_at(float(s))[1]) for s in sizes)
    greedy = plan_batch(index, sizes, budget)
    real_milp = scipy.optimize.milp
    seen = []

    def stopped(plan):
        def milp(c, *, integrality, bounds, constraints, options):
            seen.append(options["time_limit"])
            result = real_milp(c, integrality=integrality, bounds=bounds, constraints=constraints, options=options)
            if plan == "none":
                return OptimizeResult(x=None, status=1, message="Time limit reached.", mip_dual_bound=None)
            if plan == "cheapest":  # every item's first Pareto option: a poor plan
                matrix, x = constraints.A, np.zeros(len(c))
                for row in range(len(sizes)):
                    x[matrix.indices[matrix.indptr[row]:matrix.indptr[row + 1]].min()] = 1.0
                result.x = x
            result.status = 1
            return result
        return milp

    for plan in ("none", "cheapest"):
        monkeypatch.setattr(scipy.optimize, "milp", stopped(plan))
        fallback = plan_batch(index, sizes, budget, exact=True)
        assert fallback.solver == "greedy" and _same_plan(fallback, greedy)
        assert fallback.optimal == greedy.optimal
        assert fallback.accuracy_bound <= greedy.accuracy_bound
        fallback.check_invariants()
    monkeypatch.setattr(scipy.optimize, "milp", stopped("own"))
    own = plan_batch(index, sizes, budget, exact=True, mip_rel_gap=0.0)
    assert own.solver == "milp" and not own.optimal and own.mean_accuracy >= greedy.mean_accuracy
    own.check_invariants()
    plan_batch(index, sizes, budget, exact=True, time_limit=0.5)
    # The default scales with the batch; a given limit is passed on as it is.
    assert seen == [planning.default_time_limit(len(sizes))] * 3 + [0.5]
    assert seen[0] == pytest.approx(1.04)


def test_default_time_limit_rule():
    assert planning.default_time_limit(0) == planning.MILP_SECONDS_BASE
    assert planning.default_time_limit(117) == pytest.approx(1.117)
    assert planning.default_time_limit(10**6) == planning.DEFAULT_TIME_LIMIT
    limits = [planning.default_time_limit(n) for n in range(0, 100_000, 997)]
    assert limits == sorted(limits)
