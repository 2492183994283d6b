"""Traced walks (polydom.index.serving.walktrace) serve exactly what full walks serve, on random clocks."""

import copy
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polydom
from polydom.index.serving.anytime import serve_anytime
from polydom.index.serving.lateness import LatePrice
from polydom.index.serving.walkprep import prepared
from polydom.index.serving.walktrace import MAX_NODES, Node, edge


class Clock:
    """Time advances only when a feature is computed, by its scripted duration."""

    def __init__(self, durations):
        self.now, self.durations, self.computed = 0.0, durations, []

    def __call__(self):
        return self.now

    def compute(self, name):
        self.computed.append(name)
        self.now += self.durations[name]


def random_index(rng):
    """Up to six features with linear costs, monotone scores, and one of the walk's settings:
    plain, guards that cap each start, cost laws without a cap, or guards read as log-normals."""
    names = [f"f{i}" for i in range(rng.randint(1, 6))]
    costs = {n: [rng.uniform(0, 2), rng.choice([0.0, rng.uniform(0, 0.1)])] for n in names}
    accs = {}
    for m in sorted(range(1 << len(names)), key=int.bit_count):
        s = frozenset(names[i] for i in range(len(names)) if m >> i & 1)
        accs[s] = max([rng.random()] + [accs[s - {f}] for f in s])
    index = polydom.build(costs, accs.__getitem__, e=0.0, tolerance=0.0)
    setting = rng.choice(["plain", "cap", "laws", "lognormal"])
    params = dict(index.params)
    if setting != "plain":
        params["cost_guard"] = [rng.uniform(1.0, 1.6) for _ in names]
        params["start_cap"] = setting == "cap"
    if setting == "laws":
        laws = []
        for _ in names:
            low, high = rng.uniform(0.5, 1.0), rng.uniform(1.0, 1.8)
            laws.append([low + (high - low) * k / 40 for k in range(41)])
        params["cost_law"] = laws
    index.params = params
    return index, costs


def factor(rng):
    return rng.choice([1.0, 1.0, rng.uniform(0.5, 1.5), rng.lognormvariate(0.0, 0.3), 3.0, 0.0])


def both_walks(rng, index, costs, keys, walks, **options):
    """Walk ``walks`` times on a traced copy and on a copy that always reasons in full (its
    traces are cleared before each walk); assert every answer, step and computed feature agree.
    Returns the traced copy."""
    traced, full = copy.copy(index), copy.copy(index)
    prices = {"traced": LatePrice(0.05), "full": LatePrice(0.05)} if options.pop("priced", False) else None
    for _ in range(walks):
        size, budget = rng.choice(keys)
        durations = {n: polydom.CostCurve(c)(size) * factor(rng) for n, c in costs.items()}
        answers = []
        for name, ix in (("traced", traced), ("full", full)):
            if name == "full":
                prepared(ix).by_size.clear()
            clock = Clock(durations)
            extra = {"late_price": prices[name]} if prices else {}
            answers.append((serve_anytime(ix, size, budget, clock.compute, clock, **options, **extra), clock.computed))
        assert answers[0] == answers[1], (size, budget, durations)
    return traced


def traces_of(index):
    return [node for entry in prepared(index).by_size.values() for node in entry.traces.values() if isinstance(node, Node)]


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6), st.sampled_from([{}, {"guarded": False}, {"priced": True}]))
def test_a_traced_walk_serves_what_the_full_walk_serves(seed, options):
    rng = random.Random(seed)
    index, costs = random_index(rng)
    keys = [(rng.uniform(0, 20), rng.uniform(0, 6)) for _ in range(rng.randint(1, 3))]
    traced = both_walks(rng, index, costs, keys, 40, **dict(options))
    for root in traces_of(traced):
        root.check()
        assert root.nodes <= MAX_NODES


def test_walks_follow_their_trace_and_reason_only_where_it_does_not_hold():
    """On a clock that matches the curves, the third walk of a size and budget follows the trace
    the second one recorded: it never asks the index for a lookup."""
    rng = random.Random(3)
    index, costs = random_index(rng)
    size, budget = 5.0, 3.0
    durations = {n: polydom.CostCurve(c)(size) for n, c in costs.items()}
    lookups = []
    original = type(index).lookup

    class Counting(type(index)):
        def lookup(self, *args, **kwargs):
            lookups.append(args)
            return original(self, *args, **kwargs)

    counted = copy.copy(index)
    counted.__class__ = Counting
    answers = []
    for _ in range(4):
        clock = Clock(durations)
        answers.append(serve_anytime(counted, size, budget, clock.compute, clock))
    assert len(lookups) == 2  # the first walk (untraced) and the second (recording); none after
    assert all(answer == answers[0] for answer in answers)
    [root] = traces_of(counted)
    assert root.branches


def test_a_budget_seen_once_is_not_traced():
    rng = random.Random(5)
    index, costs = random_index(rng)
    for k in range(20):
        clock = Clock({n: 0.1 for n in costs})
        serve_anytime(index, 2.0, 0.5 + k / 7, clock.compute, clock)
    assert traces_of(index) == []


def test_a_trace_stops_growing_at_its_node_budget():
    rng = random.Random(11)
    index, costs = random_index(rng)
    both_walks(rng, index, costs, [(4.0, 3.0)], 400)
    traced = copy.copy(index)
    for _ in range(400):
        clock = Clock({n: polydom.CostCurve(c)(4.0) * rng.uniform(0.0, 2.0) for n, c in costs.items()})
        serve_anytime(traced, 4.0, 3.0, clock.compute, clock)
    for root in traces_of(traced):
        root.check()
        assert root.nodes <= MAX_NODES


def test_edge_finds_where_a_monotone_rule_turns():
    assert edge(lambda x: x <= 2.0, 0.0, 1.5) == 1.5
    found = edge(lambda x: x <= 2.0, 0.0, 3.0)
    assert 2.0 - 1e-6 < found <= 2.0
    assert edge(lambda x: x >= -1.0, 0.0, -5.0) == pytest.approx(-1.0, abs=1e-6)


def test_traces_over_many_sizes_stay_bounded(monkeypatch):
    """However many sizes and budgets come twice, the traces kept stay under the cap."""
    from polydom.index.serving import anytime

    monkeypatch.setattr(anytime, "_TRACED_KEPT", 8)
    rng = random.Random(13)
    index, costs = random_index(rng)
    for k in range(40):
        for _ in range(2):
            clock = Clock({n: 0.1 for n in costs})
            serve_anytime(index, 1.0 + k, 1.0, clock.compute, clock)
        assert len(traces_of(index)) <= 8
    assert prepared(index).traced <= 8
