"""polydom.build + lookup against all 2**|F| sets, on hostile generators."""

import math
import os
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polydom
from polydom.testing import BruteForce

SETTINGS = settings(deadline=None, max_examples=int(os.environ.get("POLYDOM_EXAMPLES", "120")), suppress_health_check=[HealthCheck.too_slow])


def _coefficient(draw):
    kind = draw(st.sampled_from(["zero", "tiny", "small", "unit", "large"]))
    if kind == "zero":
        return 0.0
    exponent = {"tiny": (-7, -4), "small": (-4, -1), "unit": (-1, 1), "large": (1, 2)}[kind]
    return draw(st.floats(1.0, 9.99)) * 10.0 ** draw(st.integers(*exponent))


@st.composite
def instances(draw, max_features=7):
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
            degree = draw(st.integers(0, 3))
            costs[name] = [_coefficient(draw) for _ in range(degree + 1)]
    acc_style = draw(st.sampled_from(["monotone", "plateau", "cf1", "noisy"]))
    seed = draw(st.integers(0, 2**31))
    rng = random.Random(seed)
    base = {}
    masks = range(1 << n)
    for m in masks:
        v = rng.random()
        base[m] = round(v, 1) if acc_style in ("plateau", "cf1") else v
    if acc_style == "cf1":
        single = [round(rng.uniform(0.5, 0.8), 1) for _ in range(n)]
        mono = {m: max([0.5] + [single[i] for i in range(n) if m >> i & 1]) for m in masks}
    else:
        mono = {}
        for m in sorted(masks, key=int.bit_count):
            mono[m] = max([0.3 + 0.6 * base[m]] + [mono[m & ~(1 << i)] for i in range(n) if m >> i & 1])
    e = 0.0
    if acc_style == "noisy":
        e = draw(st.sampled_from([0.01, 0.05]))
        mono = {m: a - rng.uniform(0.0, e) for m, a in mono.items()}
    acc = {frozenset(names[i] for i in range(n) if m >> i & 1): a for m, a in mono.items()}
    return costs, acc, e


def _queries(index, brute, rng, count):
    lo, hi = index.domain
    top = min(hi, 1e4)
    sizes = [lo, top, *[b for b in index.bounds if b <= top]]
    sizes += [rng.uniform(lo, top) for _ in range(count)]
    # Skewed towards small sizes, but never subnormal: there relative rounding is unbounded.
    sizes += [lo + (top - lo) * max(rng.random() ** 4, 1e-12) for _ in range(count)]
    for size in sizes:
        if abs(size) < 1e-200:
            size = 0.0  # subnormal sizes underflow costs differently in each summation order
        costs = brute.costs_at(size)
        if np.any((costs != 0.0) & (np.abs(costs) < np.finfo(float).tiny)):
            # A tiny size (a skyline bound near 0) can still make a cost subnormal (n**2 at
            # n = 1e-158): relative rounding is unbounded there too.
            size = 0.0
            costs = brute.costs_at(size)
        budgets = [0.0, float(costs.max()) * 1.01, *rng.sample(list(costs), min(6, len(costs)))]
        budgets += [float(costs.max()) * rng.random() for _ in range(4)]
        for budget in budgets:
            yield size, float(budget)


@SETTINGS
@given(instances(), st.sampled_from([1.0, 1.1, 1.2]), st.sampled_from(["all", "snapshot"]), st.randoms(use_true_random=False))
def test_lookup_is_optimal_or_alpha_approximate(instance, alpha, sandwich, rng):
    costs, acc, e = instance
    index = polydom.build(costs, acc.__getitem__, alpha=alpha, e=e, sandwich=sandwich, validate=True)
    index.check_invariants()
    brute = BruteForce(costs, acc.__getitem__)
    naive = polydom.NaiveLookup(index)
    for size, budget in _queries(index, brute, rng, 12):
        choice = index.lookup(size, budget)
        brute.check(choice, size, budget, alpha=alpha)
        # NaiveLookup scans the same candidates; at a budget within rounding of a cost the two
        # may differ, so bracket the answer with slightly smaller and larger budgets.
        assert naive.lookup(size, budget * (1 - 1e-9)).accuracy <= choice.accuracy
        assert choice.accuracy <= naive.lookup(size, budget * (1 + 1e-9)).accuracy


@SETTINGS
@given(instances(max_features=6), st.randoms(use_true_random=False))
def test_bounded_domain(instance, rng):
    costs, acc, e = instance
    lo = rng.choice([0.0, 0.5, 3.0])
    hi = lo + rng.choice([1.0, 10.0, 500.0])
    index = polydom.build(costs, acc.__getitem__, e=e, domain=(lo, hi), validate=True)
    brute = BruteForce(costs, acc.__getitem__)
    for size, budget in _queries(index, brute, rng, 8):
        brute.check(index.lookup(size, budget), size, budget)
    with pytest.raises(ValueError, match="outside"):
        index.lookup(hi * 1.5 + 1, 1.0)
    if lo > 0:
        with pytest.raises(ValueError, match="outside"):
            index.lookup(lo / 2, 1.0)


@SETTINGS
@given(instances(max_features=6), st.randoms(use_true_random=False))
def test_baselines_and_batch_answer_identically(instance, rng):
    costs, acc, e = instance
    index = polydom.build(costs, acc.__getitem__, e=e)
    every = polydom.PolyDomIndexAll.from_index(index)
    naive = polydom.NaiveLookup.from_index(index)
    brute = BruteForce(costs, acc.__getitem__)
    queries = list(_queries(index, brute, rng, 6))
    batch = index.lookup_many([q[0] for q in queries], [q[1] for q in queries])
    assert len(batch) == len(queries)
    assert every.stats["index_entries"] >= index.stats["index_entries"]
    for i, (size, budget) in enumerate(queries):
        one = index.lookup(size, budget)
        assert batch[i] == one, (size, budget, batch.cost[i])
        for other in (every.lookup, naive.lookup, naive.lookup_numpy):
            brute.check(other(size, budget), size, budget)
            # At a budget within rounding of a cost the answers may differ; bracket them.
            assert other(size, budget * (1 - 1e-9)).accuracy <= one.accuracy
            assert one.accuracy <= other(size, budget * (1 + 1e-9)).accuracy


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("k", [1, None])
def test_ten_features_synthetic_exact(seed, k):
    inst = polydom.make_synthetic(10, k=k, seed=seed)
    index = polydom.build(inst.costs, inst.expand, domain=(1.0, 500.0))
    brute = BruteForce(inst.costs, inst.expand)
    rng = random.Random(seed)
    for _ in range(150):
        size = rng.choice([1.0, 500.0, rng.uniform(1, 500), rng.choice(index.bounds)])
        budget = rng.choice([rng.uniform(0, 3000), float(rng.choice(brute.costs_at(size)))])
        brute.check(index.lookup(size, budget), size, budget)


def test_noisy_accuracies_need_e():
    """With violations up to 0.05, e = 0.05 restores exactness at alpha = 1."""
    rng = np.random.default_rng(5)
    n = 8
    names = [f"x{i}" for i in range(n)]
    single = rng.uniform(0.55, 0.8, n)
    costs = {nm: [float(rng.uniform(0, 50)), float(rng.uniform(0, 5))] for nm in names}
    acc = {}
    for m in range(1 << n):
        fs = frozenset(names[i] for i in range(n) if m >> i & 1)
        clean = 1 - np.prod([1 - single[i] for i in range(n) if m >> i & 1]) if m else 0.5
        acc[fs] = float(clean - rng.uniform(0, 0.05) * (m != 0))
    brute = BruteForce(costs, acc.__getitem__)
    index = polydom.build(costs, acc.__getitem__, e=0.05)
    for size in [0.0, 1.0, 17.0, 300.0]:
        for budget in brute.costs_at(size)[::7]:
            brute.check(index.lookup(size, float(budget)), size, float(budget))


# Wide dynamic ranges: degree <= 4, coefficients from 1e-12 to 1e3 (zeros included), sizes over ten
# decades on the default domain. A large term shared by two sets must never hide their difference.


@st.composite
def wide_instances(draw, max_features=5):
    n = draw(st.integers(1, max_features))
    names = [f"w{i}" for i in range(n)]
    costs = {}
    for name in names:
        degree = draw(st.integers(0, 4))
        costs[name] = [
            0.0 if draw(st.integers(0, 2)) == 0 else draw(st.floats(1.0, 9.99)) * 10.0 ** draw(st.integers(-12, 2))
            for _ in range(degree + 1)
        ]
    rng = random.Random(draw(st.integers(0, 2**31)))
    mono = {}
    for m in sorted(range(1 << n), key=int.bit_count):
        mono[m] = max([0.3 + 0.6 * rng.random()] + [mono[m & ~(1 << i)] for i in range(n) if m >> i & 1])
    return costs, {frozenset(names[i] for i in range(n) if m >> i & 1): a for m, a in mono.items()}


@SETTINGS
@given(wide_instances(), st.randoms(use_true_random=False))
def test_wide_dynamic_range_matches_brute_force(instance, rng):
    costs, acc = instance
    index = polydom.build(costs, acc.__getitem__, validate=True)
    brute = BruteForce(costs, acc.__getitem__)
    sizes = [10.0 ** rng.uniform(-5, 5) for _ in range(25)]
    sizes += [b * f for b in index.bounds[1:] for f in (1 - 1e-6, 1 + 1e-6)]
    for size in sizes:
        set_costs = brute.costs_at(size)
        budgets = [float(c) * f for c in rng.sample(list(set_costs), min(8, len(set_costs))) for f in (0.999, 1.001)]
        for budget in budgets:
            brute.check(index.lookup(size, budget), size, budget)


def test_shared_high_degree_term_does_not_hide_a_crossing():
    # {a, big} and {b, big} share n^4; their difference n^2 - 1e-3 - 1e-9 n^3 changes sign near
    # n = 0.0316 and again near n = 1e9, where n^4 is 1e36 and drowns it in relative terms.
    costs = {"a": [1e-3, 0, 0, 1e-9], "b": [0, 0, 1.0], "big": [0, 0, 0, 0, 1.0]}
    acc = {frozenset(): .5, frozenset("a"): .6, frozenset("b"): .7, frozenset({"big"}): .8, frozenset("ab"): .75,
           frozenset({"a", "big"}): .9, frozenset({"b", "big"}): .95, frozenset({"a", "b", "big"}): .95}
    index = polydom.build(costs, acc.__getitem__, validate=True)
    naive = polydom.NaiveLookup.from_index(index)
    assert set(index.lookup(0.1, 0.005).features) == {"a", "big"}
    brute = BruteForce(costs, acc.__getitem__)
    for size in np.geomspace(1e-4, 1e10, 57):
        for budget in brute.costs_at(size) * 1.0001:
            choice = index.lookup(size, budget)
            brute.check(choice, size, budget)
            assert choice.accuracy == naive.lookup(size, budget).accuracy


def test_validate_catches_a_skyline_that_misses_a_set():
    from polydom.index.sweep import SweepResult, TheoremViolation, check_against_brute_force

    coef = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])  # 0, 1, n: n is cheaper than 1 below n = 1
    acc = [0.5, 0.8, 0.8]
    wrong = SweepResult(bounds=[0.0], skylines=[[0, 1]])  # forgets that n serves .8 for less below 1
    with pytest.raises(TheoremViolation, match="beats the stored skyline"):
        check_against_brute_force(wrong, coef, acc, coef, acc, (0.0, math.inf))
    right = SweepResult(bounds=[0.0, 1.0], skylines=[[0, 2], [0, 1]])
    check_against_brute_force(right, coef, acc, coef, acc, (0.0, math.inf))


@SETTINGS
@given(instances(max_features=6), st.randoms(use_true_random=False))
def test_auto_tolerance_is_exact_on_the_scores_it_has(instance, rng):
    costs, acc, _ = instance
    index = polydom.build(costs, acc.__getitem__, e="auto", validate=True)
    trained = {index.space.frozenset(m): a for m, a in index.trained.items()}
    on_trained = BruteForce({n: costs[n] for n in costs}, lambda s: trained.get(s, 0.0))
    everything = BruteForce(costs, acc.__getitem__)
    true_worst = polydom.audit_monotonicity({index.space.mask(s): a for s, a in acc.items()}).max_violation
    assert index.stats["e_observed"] <= index.stats["e_used"] <= true_worst + 1e-15
    for size, budget in _queries(index, everything, rng, 6):
        choice = index.lookup(size, budget)
        on_trained.check(choice, size, budget)  # the optimum of the stored scores, always
        if index.stats["e_used"] >= true_worst:
            everything.check(choice, size, budget)  # and of every set, once e covers the data


def test_auto_tolerance_trains_the_set_a_zero_tolerance_sandwich_skips():
    # At e = 0, {a} (.80) above its superset {a, c, d} (.78) sandwiches {a, c} (.95) away. The
    # trained sets also show a drop of .30 ({b} .90 -> {b, c, d} .60); e="auto" explores again
    # with it, and then nothing sandwiches {a, c}.
    special = {"a": .8, "b": .9, "acd": .78, "bcd": .6, "ac": .95, "abcd": .85}
    costs = {f: [1.0] for f in "abcd"}

    def acc(s):
        return special.get("".join(sorted(s)), 0.5 + 0.05 * len(s))

    paper = polydom.build(costs, acc, e=0.0)
    assert paper.lookup(1.0, 2.0).features == frozenset("b")
    auto = polydom.build(costs, acc, e="auto")
    assert auto.stats["e_used"] == pytest.approx(0.3)
    assert auto.lookup(1.0, 2.0).features == frozenset("ac")
