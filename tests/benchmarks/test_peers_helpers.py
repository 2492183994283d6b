"""The peers benchmark's equal-risk budgeting: the budget at which PolyDom's anytime walk takes a set."""

import runpy
from pathlib import Path

import pytest

import polydom
from polydom.index.anytime import serve_anytime

PEERS = runpy.run_path(str(Path(__file__).resolve().parents[2] / "benchmarks" / "peers.py"))


def _costs(values):
    return PEERS["Costs"](tuple(values), {name: (lambda size, c=c: c * size) for name, c in values.items()})


def test_the_guarded_cost_is_the_cost_plus_the_largest_guard_share():
    costs = _costs({"a": 1.0, "b": 10.0, "c": 0.5})
    guards = {"a": 5.0, "b": 1.0, "c": 3.0}
    # 11 predicted, plus a's share (5 - 1) * 1: a walk that starts b then a needs 10 + 5 * 1.
    assert PEERS["guarded_cost"](costs, ("a", "b"), 1.0, guards) == pytest.approx(15.0)
    assert PEERS["guarded_cost"](costs, ("a", "b", "c"), 2.0, guards) == pytest.approx(2 * (11.5 + 4.0))
    assert PEERS["guarded_cost"](costs, ("c",), 1.0, guards) == pytest.approx(1.5)
    assert PEERS["guarded_cost"](costs, (), 1.0, guards) == 0.0
    ones = dict.fromkeys("abc", 1.0)
    assert PEERS["guarded_cost"](costs, ("a", "b", "c"), 3.0, ones) == pytest.approx(costs.of("abc", 3.0))


class _Clock:
    def __init__(self, cost):
        self.now, self.cost = 0.0, cost

    def __call__(self):
        return self.now

    def compute(self, name):
        self.now += self.cost[name]


@pytest.mark.parametrize("budget", [10.9, 11.0, 14.9, 15.0, 15.1])
def test_polydom_takes_a_set_exactly_when_its_guarded_cost_fits(budget):
    # Two features whose set is the most accurate; a alone and b alone are worth less.
    cost = {"a": 1.0, "b": 10.0}
    accuracy = {frozenset(): 0.1, frozenset("a"): 0.5, frozenset("b"): 0.6, frozenset("ab"): 0.9}
    index = polydom.build({n: [c] for n, c in cost.items()}, accuracy.__getitem__, e=0.0)
    index.params["cost_guard"] = [5.0 if n == "a" else 1.0 for n in index.space.names]
    clock = _Clock(cost)
    mask, _, _ = serve_anytime(index, 1.0, budget, clock.compute, clock)
    need = PEERS["guarded_cost"](_costs(cost), ("a", "b"), 1.0, {"a": 5.0, "b": 1.0})
    assert (mask == index.space.mask({"a", "b"})) == (need <= budget)
