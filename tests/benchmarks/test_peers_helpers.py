"""The peers benchmark's equal-risk budgeting: the budget PolyDom's anytime walk needs for a set."""

import runpy
from pathlib import Path

import pytest

PEERS = runpy.run_path(str(Path(__file__).resolve().parents[2] / "benchmarks" / "peers.py"))


def _costs(values):
    return PEERS["Costs"](tuple(values), {name: (lambda size, c=c: c * size) for name, c in values.items()})


def test_the_guarded_cost_walks_the_cheapest_feature_first():
    costs = _costs({"a": 1.0, "b": 2.0, "c": 0.5})
    guards = {"a": 2.0, "b": 1.5, "c": 3.0}
    # c: 0 + 3 * 0.5 = 1.5; a: 0.5 + 2 * 1 = 2.5; b: 1.5 + 1.5 * 2 = 4.5 (at size 1; costs scale with it).
    assert PEERS["guarded_cost"](costs, ("a", "b", "c"), 1.0, guards) == pytest.approx(4.5)
    assert PEERS["guarded_cost"](costs, ("a", "b", "c"), 2.0, guards) == pytest.approx(9.0)
    assert PEERS["guarded_cost"](costs, ("c",), 1.0, guards) == pytest.approx(1.5)
    assert PEERS["guarded_cost"](costs, (), 1.0, guards) == 0.0


def test_guards_of_one_need_the_predicted_cost_and_more_features_never_need_less():
    costs = _costs({"a": 1.0, "b": 2.0, "c": 0.5})
    ones = dict.fromkeys("abc", 1.0)
    assert PEERS["guarded_cost"](costs, ("a", "b", "c"), 3.0, ones) == pytest.approx(costs.of("abc", 3.0))
    guards = {"a": 1.2, "b": 4.0, "c": 1.9}
    need = [PEERS["guarded_cost"](costs, prefix, 1.0, guards) for prefix in ((), ("c",), ("a", "c"), ("a", "b", "c"))]
    assert need == sorted(need)
