"""The public API's contract: answers on the paper's Figure 3 index, and one clear error per bad input."""

import math
import subprocess
import sys

import numpy as np
import pytest

import polydom
from polydom.testing import BruteForce

FIG3_COSTS = {"F1": [0, 0, 3], "F2": [5, 2], "F3": [30], "F4": [40]}
# Give each figure curve its own feature and make every union worse than its best member at equal
# or higher cost, so the candidates are exactly {} and F1..F4 (the figure's curves).
FIG3_ACC = {"F1": 0.70, "F2": 0.75, "F3": 0.65, "F4": 0.80}


def fig3_expand(features):
    if not features:
        return 0.5
    return max(FIG3_ACC[f] for f in features)


@pytest.fixture(scope="module")
def fig3():
    return polydom.build(FIG3_COSTS, fig3_expand, validate=True)


@pytest.mark.parametrize("size, budget, expected", [
    (1, 3, "F1"), (1, 7, "F2"), (1, 100, "F4"), (2, 10, "F2"),
    (13, 30.9, "F3"), (13, 31, "F2"), (20, 39, "F3"), (20, 41, "F4"),
])
def test_figure3_sample_lookups(fig3, size, budget, expected):
    choice = fig3.lookup(size, budget)
    assert choice.features == frozenset({expected})
    assert choice.cost == polydom.CostCurve(FIG3_COSTS[expected])(size)


def test_figure3_index_shape(fig3):
    assert fig3.bounds == pytest.approx([0.0, 5 / 3, 12.5, 17.5])
    named = [[sorted(fig3.space.frozenset(fig3.candidates[c])) for c in sky] for sky in fig3.skylines]
    assert [[n[0] if n else "{}" for n in sky] for sky in named] == [
        ["{}", "F1", "F2", "F4"], ["{}", "F2", "F4"], ["{}", "F3", "F2", "F4"], ["{}", "F3", "F4"],
    ]
    assert fig3.stats["crossings"] == 5
    assert fig3.stats["interesting_points"] == 3
    assert fig3.stats["index_entries"] == 14


def test_boundary_budget_counts_and_zero_budget_gets_the_empty_set(fig3):
    assert fig3.lookup(1, 7.0).features == {"F2"}             # F2 costs exactly 7 at n = 1
    assert fig3.lookup(5 / 3, 0.0).features == frozenset()
    at_zero = fig3.lookup(0, 0)                                # 3n^2 is free at n = 0
    assert at_zero.features == {"F1"} and at_zero.cost == 0.0


def test_models_come_back_with_the_choice():
    models = {}

    def expand(features):
        models[features] = object()
        return polydom.Expansion(accuracy=fig3_expand(features), model=models[features])

    index = polydom.build(FIG3_COSTS, expand)
    choice = index.lookup(20, 41)
    assert choice.model is models[frozenset({"F4"})]
    assert index.stats["trained"] == len(models)


def test_choice_is_a_cheap_immutable_value(fig3):
    c = fig3.lookup(1, 3)
    assert c == fig3.lookup(1, 3) and hash(c) == hash(fig3.lookup(1, 3))
    with pytest.raises(AttributeError):
        c.cost = 0
    assert "F1" in repr(c)


def test_stats_keys(fig3):
    for key in ("trained", "expanded", "candidates", "crossings", "interesting_points", "index_entries"):
        assert isinstance(fig3.stats[key], int)


@pytest.mark.parametrize("size, budget, exc, words", [
    (float("nan"), 1.0, ValueError, "size is NaN"),
    (1.0, float("nan"), ValueError, "budget is NaN"),
    (math.inf, 1.0, ValueError, "size must be finite"),
    (1.0, -math.inf, ValueError, "budget must be finite"),
    (-1.0, 1.0, ValueError, "size must be >= 0"),
    (1.0, -0.5, ValueError, "budget must be >= 0"),
    ("3", 1.0, TypeError, "size must be a real number"),
    (1.0, None, TypeError, "budget must be a real number"),
])
def test_bad_queries(fig3, size, budget, exc, words):
    with pytest.raises(exc, match=words):
        fig3.lookup(size, budget)


@pytest.mark.parametrize("backend, options", [("polydom", {}), ("greedy", {"n0": 10.0})])
def test_an_infinite_budget_gets_the_most_accurate_set(backend, options):
    index = polydom.build(FIG3_COSTS, fig3_expand, backend=backend, **options)
    best = index.lookup(10.0, 1e300)
    assert index.lookup(10.0, math.inf) == best
    assert index.lookup_many([10.0, 20.0], [math.inf, math.inf])[0] == best
    with pytest.raises(ValueError, match="budget must be finite; infinite at position 1"):
        index.lookup_many([10.0, 20.0], [1.0, -math.inf])


def test_size_outside_domain_is_not_clamped():
    index = polydom.build(FIG3_COSTS, fig3_expand, domain=(1.0, 100.0))
    assert index.lookup(1.0, 3).features == {"F1"}
    assert index.lookup(100.0, 40).features == {"F4"}
    for size in (0.5, 100.5):
        with pytest.raises(ValueError, match="outside the index's domain"):
            index.lookup(size, 10)


@pytest.mark.parametrize("costs, expand, kwargs, exc, words", [
    ({}, fig3_expand, {}, ValueError, "at least one feature"),
    ({1: [1.0]}, fig3_expand, {}, TypeError, "strings"),
    ({"a": [-1.0, 1.0]}, lambda f: 0.5, {}, ValueError, "'a'.*negative"),
    ({"a": [1.0, -1.0]}, lambda f: 0.5, {}, ValueError, "'a'.*negative"),
    ({"a": [float("nan")]}, lambda f: 0.5, {}, ValueError, "'a'.*finite"),
    ({"a": "12"}, lambda f: 0.5, {}, TypeError, "'a'"),
    ([1.0], lambda f: 0.5, {}, TypeError, "mapping"),
    ({"a": [1.0]}, lambda f: 1.5, {}, ValueError, r"\[0, 1\]"),
    ({"a": [1.0]}, lambda f: float("nan"), {}, ValueError, "finite"),
    ({"a": [1.0]}, lambda f: "0.5", {}, TypeError, "Expansion"),
    ({"a": [1.0]}, lambda f: None, {}, TypeError, "Expansion"),
    ({"a": [1.0]}, "not callable", {}, TypeError, "callable"),
    ({"a": [1.0]}, lambda f: 0.5, {"alpha": 0.5}, ValueError, "alpha"),
    ({"a": [1.0]}, lambda f: 0.5, {"e": -0.1}, ValueError, "e must be"),
    ({"a": [1.0]}, lambda f: 0.5, {"domain": (5, 1)}, ValueError, "lo < hi"),
    ({"a": [1.0]}, lambda f: 0.5, {"domain": (-1, 1)}, ValueError, "domain lower end"),
    ({"a": [1.0]}, lambda f: 0.5, {"sandwich": "some"}, ValueError, "sandwich"),
    ({"a": [1.0]}, lambda f: 0.5, {"candidate_alpha": 0.9}, ValueError, "candidate_alpha"),
    ({"a": [1.0]}, lambda f: 0.5, {"backend": "fast"}, ValueError, "backend"),
])
def test_bad_build_arguments(costs, expand, kwargs, exc, words):
    with pytest.raises(exc, match=words):
        polydom.build(costs, expand, **kwargs)


def test_negative_cost_outside_domain_is_fine():
    index = polydom.build({"a": [-1.0, 1.0]}, lambda f: 0.5 + 0.1 * len(f), domain=(2.0, 10.0))
    assert index.lookup(3.0, 2.0).features == {"a"}


def test_accepts_curves_sequences_and_arrays():
    costs = {"a": polydom.CostCurve([1.0]), "b": (0.0, 2.0), "c": np.array([0.5, 0.0, 1.0])}
    index = polydom.build(costs, lambda f: 0.5 + 0.1 * len(f))
    assert index.lookup(1.0, 4.5).features == {"a", "b", "c"}


def test_paper_literal_candidate_alpha_keeps_fewer_candidates():
    inst = polydom.make_synthetic(9, k=None, seed=2)
    # Without prefix chains, which train more sets for more candidates: this compares explorations.
    exact = polydom.build(inst.costs, inst.expand, alpha=1.2, prefix_chains=False)
    literal = polydom.build(inst.costs, inst.expand, alpha=1.2, candidate_alpha=1.2, prefix_chains=False)
    assert literal.stats["candidates"] < exact.stats["candidates"]
    assert literal.stats["trained"] == exact.stats["trained"]


def test_naive_expand_all_calls_every_set():
    calls = []
    result = polydom.naive_expand_all(["a", "b", "c"], lambda f: calls.append(f) or 0.5)
    assert result.calls == 8 and len(set(calls)) == 8


def test_synthetic_generator_is_seeded_and_in_range():
    a = polydom.make_synthetic(6, seed=3)
    b = polydom.make_synthetic(6, seed=3)
    assert a.costs == b.costs and a.single_accuracy == b.single_accuracy
    for curve in a.costs.values():
        a0, a1, a2 = curve.coefficients
        assert 0 <= a0 <= 100 and 0 <= a1 <= (100 - a0) / 10 and 0 <= a2 <= (100 - a0 - a1) / 4
    assert all(0.5 <= v <= 0.8 for v in a.single_accuracy.values())
    full = frozenset(a.costs)
    cf1, cfinf = polydom.make_synthetic(6, seed=3, k=1), polydom.make_synthetic(6, seed=3, k=None)
    assert cf1.expand(full) == max(a.single_accuracy.values())
    assert cfinf.expand(full) > cf1.expand(full)


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120)


def test_building_and_serving_do_not_import_sklearn_or_sympy():
    proc = _run(
        "import sys, polydom\n"
        "inst = polydom.make_synthetic(6, k=None, seed=0)\n"
        "index = polydom.build(inst.costs, inst.expand)\n"
        "index.lookup(10.0, 100.0); index.lookup_many([1.0, 2.0], [5.0, 500.0])\n"
        "bad = [m for m in ('sklearn', 'sympy', 'skimage', 'matplotlib') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    assert proc.returncode == 0, proc.stderr


def test_unrelated_top_level_packages_do_not_shadow_polydom(tmp_path):
    # A user's own ``index``, ``lattice``, ``greedy`` and ``featurizers`` come first on sys.path;
    # polydom's layers live under ``polydom.*`` and never see them.
    for name in ("index", "lattice", "greedy", "featurizers"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("raise RuntimeError('the user module was imported')\n")
    proc = _run(
        f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
        "import polydom\n"
        "inst = polydom.make_synthetic(5, k=None, seed=1)\n"
        f"index = polydom.build(inst.costs, inst.expand); index.save({str(tmp_path / 'ix')!r})\n"
        "greedy = polydom.build(inst.costs, inst.expand, backend='greedy', n0=10.0)\n"
        f"loaded = polydom.load({str(tmp_path / 'ix')!r})\n"
        "assert loaded.lookup(10.0, 50.0) == index.lookup(10.0, 50.0)\n"
        "assert greedy.lookup(10.0, 50.0).accuracy >= 0\n"
        "assert all(not m.startswith(('index', 'lattice', 'greedy', 'featurizers')) for m in sys.modules)\n"
    )
    assert proc.returncode == 0, proc.stderr


def test_the_installed_distribution_adds_one_top_level_name(tmp_path):
    from importlib.metadata import files

    top = {f.parts[0] for f in files("polydom") if f.parts[0] not in ("..", "__pycache__")}
    assert not top & {"index", "lattice", "greedy", "featurizers", "index.py"}, top
    proc = subprocess.run(
        [sys.executable, "-P", "-c", "import polydom.index, polydom.lattice, polydom.greedy, polydom.featurizers\n"
         "try:\n    import index\nexcept ModuleNotFoundError:\n    pass\nelse:\n    raise SystemExit('index imported')"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr


def test_crossings_closer_than_1e_12_near_zero_stay_apart():
    # Crossings at 1e-9 and 1.0001e-9: an absolute merge tolerance would fuse them.
    import itertools

    costs = {"a": [0, 1.0], "b": [1e-9], "c": [0, 2.0], "d": [2.0002e-9]}
    base = {"a": .6, "b": .7, "c": .62, "d": .72}
    acc = {frozenset(s): .5 if not s else max(base[x] for x in s) + .01 * (len(s) - 1)
           for r in range(5) for s in itertools.combinations(costs, r)}
    index = polydom.build(costs, acc.__getitem__, validate=True)
    BruteForce(costs, acc.__getitem__).check(index.lookup(1.00005e-9, 2.0001e-9), 1.00005e-9, 2.0001e-9)


def test_curves_equal_at_every_sample_but_apart_far_away_still_swap():
    costs = {"A": [100.0, 0, 0, 1e-7], "B": [100.0 - 2e-11, 0, 0, 1e-7 + 2e-11]}
    acc = {frozenset(): .5, frozenset("A"): .6, frozenset("B"): .7, frozenset("AB"): .8}
    index = polydom.build(costs, acc.__getitem__, validate=True)
    assert index.lookup(1e4, 100110.0).features == {"A"}


@pytest.mark.parametrize("size, budget, words", [
    (np.array([1.0]), 1.0, "size must be a real number"),
    (True, 1.0, "size must be a real number"),
    (1.0, False, "budget must be a real number"),
    (10**400, 1.0, "size must be finite"),
])
def test_query_types_are_checked(fig3, size, budget, words):
    with pytest.raises((TypeError, ValueError), match=words):
        fig3.lookup(size, budget)


def test_numpy_scalars_are_served_as_floats(fig3):
    choice = fig3.lookup(np.float32(1.0), np.int64(7))
    assert choice.features == {"F2"} and type(choice.cost) is float


@pytest.mark.parametrize("sizes, budgets, exc", [
    (["1"], [2.0], TypeError), ([True], [1.0], TypeError), ([None], [1.0], TypeError),
    ([1.0, 2.0], [1.0, 2.0, 3.0], ValueError), ([float("nan")], [1.0], ValueError), ([1.0], [-1.0], ValueError),
])
def test_bad_batches(fig3, sizes, budgets, exc):
    with pytest.raises(exc):
        fig3.lookup_many(sizes, budgets)


def test_a_failing_black_box_is_named_with_the_set_it_failed_on():
    def expand(features):
        if features == {"F3"}:
            return {"F2": 1}["F3"]  # a typo between costs and expand: a bare KeyError
        return fig3_expand(features)

    with pytest.raises(polydom.ExpansionError, match=r"expand\(\['F3'\]\) raised KeyError: 'F3'") as info:
        polydom.build(FIG3_COSTS, expand, alpha=1.0, e=0.0, sandwich="all")
    assert isinstance(info.value, polydom.PolydomError) and isinstance(info.value.__cause__, KeyError)


def test_too_many_features_are_refused_before_any_training():
    calls = []
    costs = {f"f{i}": [1.0] for i in range(63)}
    with pytest.raises(ValueError, match="at most 62 features"):
        polydom.build(costs, lambda s: calls.append(s) or 0.5)
    assert calls == []
