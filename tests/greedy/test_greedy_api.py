"""``polydom.build(..., backend="greedy*")``: same surface as PolyDom, clear errors, storage hooks."""

import math
import sys
import types

import numpy as np
import pytest

import polydom
from polydom.greedy import DEFAULT_LAMBDAS, GreedyIndex, accuracy_vs_budget
from polydom.backends import index_class

COSTS = {"a": [1.0], "b": [0.0, 2.0], "c": [0.5, 0.0, 0.1]}


def _acc(fs):
    return 0.5 + 0.1 * len(fs) + 0.05 * ("b" in fs)


def _build(**options):
    options.setdefault("n0", 1.0)
    return polydom.build(COSTS, _acc, **options)


@pytest.mark.parametrize("backend", ["greedy", "greedy-acc", "greedy-cost"])
def test_same_surface_as_polydom(backend):
    index = _build(backend=backend)
    assert isinstance(index, GreedyIndex) and index.backend == backend
    assert index.space.names == ("a", "b", "c") and len(index.costs) == 3
    assert index.domain == (0.0, math.inf)
    assert index.params["n0"] == 1.0
    assert {"trained", "expanded", "sequences", "index_entries", "lambdas"} <= set(index.stats)
    choice = index.lookup(2.0, 100.0)
    assert isinstance(choice, polydom.Choice) and choice.features == frozenset("abc")
    batch = index.lookup_many([2.0, 3.0], 100.0)
    assert isinstance(batch, polydom.Batch) and batch[0] == choice
    assert index_class(backend) is GreedyIndex
    assert backend in repr(index)


def test_default_grid_is_the_papers():
    assert _build(backend="greedy").lambdas == DEFAULT_LAMBDAS == (
        0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0,
    )


def test_missing_n0_is_a_clear_type_error():
    with pytest.raises(TypeError, match="n0"):
        polydom.build(COSTS, _acc, backend="greedy")


@pytest.mark.parametrize(
    "n0, error, match",
    [(-1.0, ValueError, "outside"), (600.0, ValueError, "outside"), (math.nan, ValueError, "finite"),
     (math.inf, ValueError, "finite"), ("1", TypeError, "n0"), (True, TypeError, "n0")],
)
def test_bad_n0(n0, error, match):
    with pytest.raises(error, match=match):
        polydom.build(COSTS, _acc, backend="greedy", n0=n0, domain=(0.0, 500.0))


@pytest.mark.parametrize("backend", ["greedy-acc", "greedy-cost"])
def test_lambdas_with_a_single_sequence_variant_is_an_error(backend):
    with pytest.raises(TypeError, match=r"lambdas.*apply to \['greedy'\]"):
        _build(backend=backend, lambdas=[0.0, 1.0])


@pytest.mark.parametrize(
    "lambdas, error, match",
    [([0.0, -0.1], ValueError, ">= 0"), ([-math.inf], ValueError, ">= 0"), ([math.nan], ValueError, "NaN"),
     ([], ValueError, "empty"), ([1.0, 1.0], ValueError, "distinct"), ("01", TypeError, "lambdas"),
     (["x"], TypeError, "real"), (0.5, TypeError, "lambdas")],
)
def test_bad_lambdas(lambdas, error, match):
    with pytest.raises(error, match=match):
        _build(backend="greedy", lambdas=lambdas)


def test_unknown_option_is_rejected():
    with pytest.raises(TypeError, match="lambda"):
        _build(backend="greedy", lambda_=[0.0])


@pytest.mark.parametrize(
    "size, budget, error, match",
    [(1.0, math.nan, ValueError, "NaN"), (math.nan, 1.0, ValueError, "NaN"), (1.0, -1.0, ValueError, ">= 0"),
     (1.0, -math.inf, ValueError, "finite"), (600.0, 1.0, ValueError, "outside"), ("1", 1.0, TypeError, "real")],
)
def test_bad_queries(size, budget, error, match):
    index = _build(backend="greedy", domain=(0.0, 500.0))
    with pytest.raises(error, match=match):
        index.lookup(size, budget)
    if error is ValueError:  # check_queries parses numeric strings, as for PolyDom
        with pytest.raises(ValueError):
            index.lookup_many([size], [budget])


def test_save_delegates_to_the_store(monkeypatch):
    calls = []
    fake = types.ModuleType("polydom.index.store")
    fake.save_index = lambda index, path, **options: calls.append((index, path, options))
    monkeypatch.setitem(sys.modules, "polydom.index.store", fake)
    index = _build(backend="greedy-cost")
    index.save("/tmp/where", map_size=1 << 20)
    assert calls == [(index, "/tmp/where", {"map_size": 1 << 20})]
    with pytest.raises(RuntimeError, match="not loaded"):
        index.refresh()


def test_state_models_and_arrays():
    index = polydom.build(COSTS, lambda fs: polydom.Expansion(_acc(fs), model=len(fs)), backend="greedy", n0=1.0)
    state = index.to_state()
    assert state.meta["backend"] == "greedy" and state.meta["n0"] == 1.0
    assert state.arrays["lambdas"].dtype == np.float64 and state.arrays["sequences"].dtype == np.int64
    assert dict(state.models) == dict(index.models)
    again = index_class(state.meta["backend"]).from_state(state)
    assert again.lookup(3.0, 10.0) == index.lookup(3.0, 10.0)
    assert again.lookup(3.0, 10.0).model == len(index.lookup(3.0, 10.0).features)


def test_accuracy_vs_budget_matches_lookups():
    index = _build(backend="greedy")
    budgets = [0.0, 1.0, 5.0, 50.0]
    assert accuracy_vs_budget(index, 3.0, budgets) == [index.lookup(3.0, b).accuracy for b in budgets]
    exact = polydom.build(COSTS, _acc)
    assert accuracy_vs_budget(exact, 3.0, budgets) == [exact.lookup(3.0, b).accuracy for b in budgets]


def test_polydom_backend_is_unchanged():
    index = polydom.build(COSTS, _acc)
    assert index.backend == "polydom"
    with pytest.raises(TypeError, match="unexpected options"):
        polydom.build(COSTS, _acc, n0=1.0)
