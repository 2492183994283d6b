"""An index that ranks sets by the monotone fit of their scores (``scores="monotone"``)."""

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polydom
from polydom.lattice import audit_monotonicity, monotone_scores
from polydom.testing import BruteForce


def _noisy_instance(seed: int, n: int = 5):
    """Costs, and scores that grow with the features but carry noise (so are rarely monotone)."""
    rng = random.Random(seed)
    names = [f"f{i}" for i in range(n)]
    costs = {f: [rng.uniform(0, 1e-3), rng.uniform(0, 1e-5)] for f in names}
    acc, se = {}, {}
    for m in range(1 << n):
        s = frozenset(names[i] for i in range(n) if m >> i & 1)
        acc[s] = min(1.0, max(0.0, 0.5 + 0.05 * len(s) + rng.gauss(0, 0.04)))
        se[s] = rng.uniform(0.005, 0.04)
    return names, costs, acc, se


@settings(deadline=None, max_examples=30, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6))
def test_answers_are_the_brute_force_optimum_of_the_monotone_fit(seed):
    names, costs, acc, se = _noisy_instance(seed)
    expand = lambda s: polydom.Expansion(acc[s], None, std_error=se[s])  # noqa: E731
    # e=1 trains every set, so the fit the index ranks by is the fit of the whole lattice.
    index = polydom.build(costs, expand, e=1.0, scores="monotone")
    space = index.space
    fitted = monotone_scores({space.mask(s): a for s, a in acc.items()}, {space.mask(s): v for s, v in se.items()})
    assert index.explored == pytest.approx(fitted)
    assert index.measured == pytest.approx({space.mask(s): a for s, a in acc.items()})
    assert audit_monotonicity(index.explored).max_violation == 0.0
    # The same fit up to rounding (the solver sees the sets in another order); judge the answers
    # on the index's own copy of it, exactly.
    brute = BruteForce(costs, lambda s: index.explored[space.mask(s)])
    rng = random.Random(seed)
    for size in [rng.uniform(0, 1e4) for _ in range(6)]:
        for budget in rng.sample(list(brute.costs_at(size)), 8):
            choice = index.lookup(size, float(budget))
            brute.check(choice, size, budget)


def test_with_e_auto_the_answer_is_the_optimum_of_the_fit_of_the_trained_sets():
    names, costs, acc, se = _noisy_instance(5, n=6)
    index = polydom.build(costs, lambda s: polydom.Expansion(acc[s], None, std_error=se[s]), scores="monotone")
    assert index.stats["scores_moved"] > 0 and index.stats["score_largest_fall"] > 0
    trained = {index.space.frozenset(m): a for m, a in index.explored.items()}
    assert index.explored == pytest.approx(monotone_scores(index.measured, index.std_error))
    for size in np.linspace(0, 1e4, 7):
        for budget in np.linspace(0, 6e-3, 13):
            affordable = [s for s in trained if index.cost_of(s, size) <= budget * (1 + 1e-9)]
            choice = index.lookup(size, budget)
            assert choice.accuracy == pytest.approx(max(trained[s] for s in affordable), abs=1e-12)


def test_the_measured_scores_survive_storage_and_an_unknown_mode_is_refused(tmp_path):
    names, costs, acc, se = _noisy_instance(2)
    expand = lambda s: polydom.Expansion(acc[s], None, std_error=se[s])  # noqa: E731
    index = polydom.build(costs, expand, scores="monotone")
    index.save(tmp_path / "ix")
    loaded = polydom.load(tmp_path / "ix")
    assert loaded.measured == index.measured and loaded.explored == index.explored
    assert loaded.params["scores"] == "monotone"
    for size in (0.0, 5e3):
        for budget in (1e-4, 1e-3, 1e-2):
            assert loaded.lookup(size, budget) == index.lookup(size, budget)
    plain = polydom.build(costs, expand)
    assert plain.params["scores"] == "measured" and plain.measured == {}
    with pytest.raises(ValueError, match=r"scores must be one of \('measured', 'monotone', 'bounded'\), got 'isotonic'"):
        polydom.build(costs, expand, scores="isotonic")
    with pytest.raises(TypeError, match="unexpected options for the greedy backend: \\['scores'\\]"):
        polydom.build(costs, expand, backend="greedy", n0=10.0, scores="monotone")


@settings(deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6))
def test_bounded_scores_never_serve_a_set_measured_far_below_an_affordable_one(seed):
    # Two sets whose folds agreed exactly (standard errors of round-off size) among noisy ones.
    names, costs, acc, se = _noisy_instance(seed)
    rng = random.Random(seed)
    for s in rng.sample(sorted(acc, key=sorted), 2):
        se[s] = 6.5e-17
    expand = lambda s: polydom.Expansion(acc[s], None, std_error=se[s])  # noqa: E731
    index = polydom.build(costs, expand, e=1.0, scores="bounded")
    space = index.space
    best_measured = max(acc.values())
    assert max(index.explored.values()) <= best_measured
    for size in (0.0, 50.0):
        for budget in np.geomspace(1e-4, 1e-2, 9):
            choice = index.lookup(size, float(budget))
            served = space.mask(choice.features)
            for s, a in acc.items():
                if index.cost_of(s, size) <= budget:
                    assert index.measured[served] >= a - se[s] - index.std_error[served] - 1e-12


def test_the_users_case_two_identical_fold_scores_lift_nothing_and_the_best_measured_set_is_served():
    # 240 scored items; two sets had identical fold scores (standard error 6.5e-17). The monotone
    # fit then weighed them 1e32 times the rest and served a weak cheap set at every budget with
    # a fitted score of 1.0. Ranked by the bounded fit, no score rises above the best measured
    # one and the best measured affordable set is served.
    rng = random.Random(3)
    names = [f"f{i}" for i in range(6)]
    costs = {f: [1e-3 * (i + 1)] for i, f in enumerate(names)}
    acc, se = {}, {}
    for m in range(1 << 6):
        s = frozenset(names[i] for i in range(6) if m >> i & 1)
        acc[s] = min(0.979, 0.55 + 0.07 * len(s) + rng.gauss(0, 0.03))
        se[s] = float(np.sqrt(acc[s] * (1 - acc[s]) / 240))
    twins = [frozenset({"f0", "f3"}), frozenset({"f0", "f4"})]
    for s in twins:
        acc[s], se[s] = 0.90, 6.5e-17
    expand = lambda s: polydom.Expansion(acc[s], None, std_error=se[s])  # noqa: E731
    index = polydom.build(costs, expand, e=1.0, scores="bounded")
    assert max(index.explored.values()) <= max(acc.values())
    for budget in (2.05e-3, 5.05e-3, 1.005e-2, 2.15e-2):  # away from exact sums: no float-order ties
        affordable = {s: a for s, a in acc.items() if sum(costs[f][0] for f in s) <= budget}
        best = max(affordable.values())
        served = index.lookup(1.0, budget)
        assert acc[frozenset(served.features)] == best, (budget, served)
