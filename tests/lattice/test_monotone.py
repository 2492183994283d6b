"""The monotone fit of scores: isotonic regression on the subset lattice, against a generic solver."""

import itertools
import random
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

import polydom.lattice.monotone as monotone
from polydom.lattice import audit_monotonicity, monotone_scores


def check_monotone(scores, tie_step=0.0):
    """No set scores below a subset (plus ``tie_step`` per extra feature, up to rounding)."""
    shifted = {m: v - tie_step * m.bit_count() for m, v in scores.items()}
    assert audit_monotonicity(shifted).max_violation <= 1e-12


def _noisy(seed: int, n: int, keep: float = 1.0):
    """Scores that grow with the features but are measured with noise (so often not monotone)."""
    rng = random.Random(seed)
    masks = [m for m in range(1 << n) if m == 0 or rng.random() < keep]
    acc = {m: min(1.0, max(0.0, 0.5 + 0.06 * m.bit_count() + rng.gauss(0, 0.05))) for m in masks}
    se = {m: rng.uniform(0.005, 0.05) for m in masks}
    return acc, se


def _reference(acc, se):
    """The same weighted projection by a generic constrained solver, every subset pair a constraint."""
    masks = list(acc)
    y = np.array([acc[m] for m in masks])
    w = np.array([1.0 / se[m] ** 2 for m in masks])
    w /= w.max()
    pairs = [(i, j) for i, a in enumerate(masks) for j, b in enumerate(masks) if a != b and a & b == a]
    result = minimize(
        lambda f: 0.5 * np.sum(w * (f - y) ** 2), y, jac=lambda f: w * (f - y), method="SLSQP",
        constraints=[{"type": "ineq", "fun": lambda f, i=i, j=j: f[j] - f[i]} for i, j in pairs],
        options={"ftol": 1e-15, "maxiter": 2000},
    )
    objective = lambda f: float(np.sum(w * (np.array([f[m] for m in masks]) - y) ** 2))  # noqa: E731
    return dict(zip(masks, result.x)), objective


@settings(deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6), st.integers(2, 4), st.sampled_from([1.0, 0.6]))
def test_the_fit_is_the_weighted_projection_onto_monotone_scores(seed, n, keep):
    acc, se = _noisy(seed, n, keep)
    fit = monotone_scores(acc, se, tie_step=0.0)
    reference, objective = _reference(acc, se)
    assert set(fit) == set(acc)
    check_monotone(fit)
    # Feasible, no worse than the generic solver's optimum, and the same point (it is unique).
    assert objective(fit) <= objective(reference) + 1e-12
    assert max(abs(fit[m] - reference[m]) for m in acc) < 1e-4


def test_monotone_scores_are_left_alone_and_ties_go_to_the_larger_set():
    acc = {0: 0.5, 1: 0.7, 2: 0.6, 3: 0.8}
    assert monotone_scores(acc, tie_step=0.0) == pytest.approx(acc, abs=1e-12)
    # {1} scores above its superset {1, 2}: the fit pools them, and the tie step ranks the superset first.
    pooled = monotone_scores({0: 0.5, 1: 0.8, 2: 0.6, 3: 0.7})
    assert pooled[1] == pytest.approx(0.75, abs=1e-5) and pooled[3] == pytest.approx(0.75, abs=1e-5)
    assert pooled[3] > pooled[1]
    check_monotone(pooled, tie_step=monotone.DEFAULT_TIE_STEP * 0.999)


def test_a_score_with_a_small_standard_error_moves_less():
    acc = {0: 0.5, 1: 0.8, 3: 0.7}
    sure_of_the_superset = monotone_scores(acc, {0: 0.01, 1: 0.05, 3: 0.01}, tie_step=0.0)
    sure_of_the_subset = monotone_scores(acc, {0: 0.01, 1: 0.01, 3: 0.05}, tie_step=0.0)
    # Weights 1/se^2: the pooled value is 25 times nearer the surer score.
    assert sure_of_the_superset[3] == pytest.approx((0.8 + 25 * 0.7) / 26)
    assert sure_of_the_subset[3] == pytest.approx((25 * 0.8 + 0.7) / 26)


def test_cover_pairs_are_the_transitive_reduction_of_the_subset_order():
    import networkx as nx

    rng = random.Random(3)
    masks = [m for m in range(1 << 6) if rng.random() < 0.5]
    lower, upper = monotone.cover_pairs(np.array(masks))
    order = nx.DiGraph([(a, b) for a, b in itertools.permutations(masks, 2) if a & b == a])
    order.add_nodes_from(masks)
    expected = set(nx.transitive_reduction(order).edges)
    assert {(masks[i], masks[j]) for i, j in zip(lower, upper)} == expected


def test_the_sparse_solver_for_large_lattices_agrees_and_says_it_drops_the_weights(monkeypatch):
    acc, se = _noisy(11, 8, keep=0.7)
    exact = monotone_scores(acc)
    monkeypatch.setattr(monotone, "DENSE_LIMIT", 0)
    iterative = monotone_scores(acc)
    check_monotone(iterative)
    assert max(abs(exact[m] - iterative[m]) for m in acc) < 1e-6
    with pytest.warns(RuntimeWarning, match="every set weighing the same"):
        unweighted = monotone_scores(acc, se)
    assert max(abs(exact[m] - unweighted[m]) for m in acc) < 1e-6


@settings(deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6), st.integers(5, 9), st.sampled_from([1.0, 0.5]))
def test_the_violated_pairs_alone_give_the_exact_weighted_projection(seed, n, keep):
    """Constraint generation finds the point one NNLS over the whole order finds."""
    acc, se = _noisy(seed, n, keep)
    masks = np.array(list(acc), dtype=np.int64)
    y = np.array([acc[int(m)] for m in masks])
    root_w = 1.0 / np.array([se[int(m)] for m in masks])
    lower, upper = monotone.cover_pairs(masks)
    whole = monotone._project_dense(y, root_w, lower, upper)  # one NNLS over every covering pair
    violated = monotone._project_violated(y, root_w, lower, upper)
    assert violated is not None
    assert np.max(np.abs(whole - violated)) < 1e-9
    assert np.all(violated[upper] >= violated[lower] - 1e-9)
    assert np.max(np.abs(monotone._project(y, root_w, lower, upper) - whole)) < 1e-9  # the path monotone_scores takes


def test_large_lattices_keep_their_weights_through_the_violated_pairs(monkeypatch):
    acc, se = _noisy(5, 9, keep=0.8)
    exact = monotone_scores(acc, se)
    monkeypatch.setattr(monotone, "DENSE_LIMIT", 200_000)  # the whole problem is above it, its violations not
    masks = np.array(list(acc), dtype=np.int64)
    assert len(monotone.cover_pairs(masks)[0]) * len(masks) > monotone.DENSE_LIMIT
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback to the unweighted iterative solver
        large = monotone_scores(acc, se)
    assert max(abs(exact[m] - large[m]) for m in acc) < 1e-9


def test_degenerate_inputs():
    assert monotone_scores({}) == {}
    assert monotone_scores({5: 0.7}) == {5: pytest.approx(0.7, abs=1e-15)}  # nothing to pool it with
    # Scores at the top of the range stay in it; zero standard errors take the smallest given.
    top = monotone_scores({0: 1.0, 1: 1.0, 3: 0.98}, {0: 0.0, 1: 0.01, 3: 0.0})
    assert all(0.0 <= v <= 1.0 for v in top.values()) and top[3] >= top[1]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(2, 5),
       tiny=st.sampled_from([0.0, 1e-17, 6.5e-17, 1e-12]), how_many=st.integers(1, 4))
def test_a_fitted_score_never_leaves_the_measured_range(seed, n, tiny, how_many):
    # Standard errors of zero or round-off size (folds that agreed exactly) must not let the fit
    # run away: a least-squares isotonic fit is a weighted average of the measurements.
    acc, se = _noisy(seed, n)
    rng = random.Random(seed)
    for m in rng.sample(sorted(acc), min(how_many, len(acc))):
        se[m] = tiny
    fit = monotone_scores(acc, se)
    lo, hi = min(acc.values()), max(acc.values())
    assert all(lo <= v <= hi for v in fit.values())
    check_monotone(fit, 0.0)


def test_two_sets_with_identical_folds_do_not_lift_every_score_to_one():
    # The user's case in miniature: two sets whose folds agreed exactly (standard error 6.5e-17)
    # among sets measured with ordinary noise. Before the weight floor the solver's rounding,
    # amplified by weights of 1e32, lifted fitted scores to 1.0 where the best measured was 0.98.
    acc, se = _noisy(7, 6)
    acc = {m: min(v, 0.979) for m, v in acc.items()}
    pair = sorted(acc)[10:12]
    for m in pair:
        acc[m], se[m] = 0.93, 6.5e-17
    fit = monotone_scores(acc, se)
    assert max(fit.values()) <= max(acc.values())
    assert sum(v >= 0.999 for v in fit.values()) == 0
