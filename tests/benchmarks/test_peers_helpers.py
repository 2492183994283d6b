"""The peers benchmark's equal-risk budgeting: the budget at which PolyDom's anytime walk takes a set."""

import runpy
from pathlib import Path

import pytest

import polydom
from polydom.index.serving.anytime import serve_anytime

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


# --------------------------------------------------------------------------- settings and load

DEFAULTS = ((28, 50), (0.001, 0.01), ("hog", "glcm", "lbp"))
REALDATA = ((28, 56, 112), (0.0002, 0.2), ("hog", "lbp", "gabor"))


def test_lists_parse_and_name_the_option_they_fail_on():
    assert PEERS["parse_list"]("28, 56,112,", int, "--sides") == (28, 56, 112)
    assert PEERS["parse_list"]("0.0002,1e-3", float, "--budgets") == (0.0002, 0.001)
    with pytest.raises(ValueError, match="--sides"):
        PEERS["parse_list"]("28,5x", int, "--sides")
    with pytest.raises(ValueError, match="--features: empty"):
        PEERS["parse_list"](" , ", str, "--features")


def test_the_report_is_named_after_the_settings_that_differ_from_the_defaults():
    name = lambda *s, busy=0: PEERS["report_name"]("digits", *s, busy, defaults=DEFAULTS, realdata=REALDATA)  # noqa: E731
    assert name(*DEFAULTS) == "peers-digits.md"
    assert name(*DEFAULTS, busy=2) == "peers-digits-busy2.md"
    assert name(*REALDATA, busy=1) == "peers-digits-realdata-busy1.md"
    assert name((28,), (0.001, 0.01), DEFAULTS[2]) == "peers-digits-s28.md"
    assert name(DEFAULTS[0], (0.0002, 0.001), ("hog", "lbp", "gabor")) == "peers-digits-b0.2-1-+gabor-glcm.md"
    assert name(DEFAULTS[0], DEFAULTS[1], ("lbp", "hog", "glcm")) == "peers-digits-flbp-hog-glcm.md"


def test_the_realdata_settings_are_realdata_py_s():
    sides, budgets, features = PEERS["realdata_settings"]()
    assert sides == (28, 56, 112)
    assert budgets == pytest.approx((0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2))
    assert len(features) == 8 and "gabor" in features and "glcm" not in features


def test_served_sides_outside_the_demo_timing_range_are_timed():
    from lab.settings import TIMING_SIDES

    assert PEERS["timing_sides"]((28, 56, 112)) == TIMING_SIDES
    assert PEERS["timing_sides"]((16, 400)) == (16, *TIMING_SIDES, 400)


def test_busy_processes_spin_while_the_block_runs_and_are_stopped_after_an_error(monkeypatch):
    # Spawned children import the target's module by name: load peers.py as the module "peers".
    import importlib
    import os
    import sys
    import time

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "benchmarks"))
    monkeypatch.delitem(sys.modules, "peers", raising=False)
    peers = importlib.import_module("peers")
    procs = []
    with pytest.raises(RuntimeError, match="boom"):
        with peers.busy_processes(1) as procs:
            t0 = time.monotonic()
            while time.monotonic() - t0 < 20 and not (peers.cpu_seconds(procs[0].pid) or 0) > 0.05:
                time.sleep(0.05)  # spawning imports numpy: give it time to start spinning
            assert procs[0].is_alive()
            if os.path.exists(f"/proc/{procs[0].pid}/stat"):
                assert peers.cpu_seconds(procs[0].pid) > 0.05
            raise RuntimeError("boom")
    assert len(procs) == 1 and not procs[0].is_alive()
    with peers.busy_processes(0) as none:
        assert none == []
