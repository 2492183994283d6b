"""Cost guards on injected clocks: a feature starts only when its guarded cost fits; batches ignore them."""

import copy

import pytest

import polydom
from polydom.greedy.anytime import walk_measured

COSTS = {"cheap": [1.0], "mid": [2.0], "slow": [4.0]}
ACC = {"": .5, "cheap": .6, "mid": .65, "slow": .7, "cheap mid": .75, "cheap slow": .85, "mid slow": .8,
       "cheap mid slow": .9}


def acc(s):
    return ACC[" ".join(n for n in COSTS if n in s)]


class ScriptedClock:
    def __init__(self, durations):
        self.now, self.durations, self.computed = 0.0, durations, []

    def __call__(self):
        return self.now

    def compute(self, name):
        self.computed.append(name)
        self.now += self.durations[name]


def guarded(index, **guards):
    """A copy of ``index`` whose params carry per-feature guards (1 where not given)."""
    out = copy.copy(index)
    out.params = {**index.params, "cost_guard": [guards.get(n, 1.0) for n in index.space.names]}
    return out


@pytest.fixture(scope="module", params=["polydom", "greedy-cost"])
def index(request):
    return polydom.build(COSTS, acc, e=0.0, tolerance=0.0, backend=request.param, **(
        {"n0": 1.0} if request.param != "polydom" else {}))


def test_without_guards_every_feature_has_guard_one(index):
    assert index.cost_guards() == (1.0, 1.0, 1.0)


class RecordingClock(ScriptedClock):
    """Also records the time at which each feature was started."""

    def compute(self, name):
        self.started = getattr(self, "started", []) + [(name, self.now)]
        super().compute(name)


GUARDS = {"slow": 1.5}


def check_guarded_starts(clock, budget):
    for name, at in getattr(clock, "started", []):
        assert at + COSTS[name][0] * GUARDS.get(name, 1.0) <= budget + 1e-12, (name, at)


def test_a_feature_starts_only_when_its_guarded_cost_fits(index):
    # Budget 7 buys every feature at their predicted costs (1 + 2 + 4). With slow's guard at 1.5
    # slow may start only with 6 s left, so it must come first or after cheap alone.
    budget = 7.0
    assert index.lookup(1.0, budget).features == frozenset(COSTS)
    ix = guarded(index, **GUARDS)
    clock = RecordingClock({n: c[0] for n, c in COSTS.items()})
    choice = ix.select(1.0, budget, clock.compute, clock)
    check_guarded_starts(clock, budget)
    assert choice.cost <= budget and choice.features <= set(clock.computed)
    assert len(clock.computed) == len(set(clock.computed))  # never recomputed


@pytest.mark.parametrize("budget", [0.5, 1.0, 2.0, 3.0, 4.0, 4.5, 5.0, 6.0, 6.5, 7.0, 8.0, 9.0])
@pytest.mark.parametrize("slow_takes", [2.0, 4.0, 5.5])
def test_guarded_walks_never_start_what_has_no_room(index, budget, slow_takes):
    ix = guarded(index, **GUARDS)
    clock = RecordingClock({"cheap": 1.0, "mid": 2.0, "slow": slow_takes})
    choice = ix.select(1.0, budget, clock.compute, clock)
    check_guarded_starts(clock, budget)
    assert choice.features <= set(clock.computed) and len(clock.computed) == len(set(clock.computed))
    if slow_takes <= 4.0 * GUARDS["slow"]:  # no feature slower than its guard: no overrun
        assert choice.cost <= budget


def test_guards_off_start_whatever_the_predicted_cost_fits(index):
    ix = guarded(index, **GUARDS)
    free = ScriptedClock({n: c[0] for n, c in COSTS.items()})
    assert ix.select(1.0, 7.0, free.compute, free, guarded=False).features == frozenset(COSTS)
    assert sorted(free.computed) == sorted(COSTS)


def test_a_guard_that_leaves_no_room_serves_the_best_set_that_has_room():
    ix = guarded(polydom.build(COSTS, acc, e=0.0, tolerance=0.0), slow=1.5)
    # Budget 5: the lookup's {cheap, slow} needs 5 + 2 = 7 with the guard; {mid, cheap} (3 s) has room.
    assert ix.lookup(1.0, 5.0).features == frozenset({"cheap", "slow"})
    clock = RecordingClock({n: c[0] for n, c in COSTS.items()})
    choice = ix.select(1.0, 5.0, clock.compute, clock)
    check_guarded_starts(clock, 5.0)
    assert choice.features == frozenset({"cheap", "mid"}) and choice.cost == 3.0


def test_guards_leave_lookups_alone(index):
    ix = guarded(index, cheap=3.0, mid=2.0, slow=1.5)
    for budget in (0.0, 1.0, 3.0, 5.0, 7.0, 100.0):
        assert ix.lookup(1.0, budget) == index.lookup(1.0, budget)


def test_bad_guards_are_refused(index):
    with pytest.raises(ValueError, match="cost_guard"):
        guarded(index, cheap=0.5).cost_guards()


def test_guards_survive_storage(index, tmp_path):
    ix = guarded(index, slow=1.25)
    ix.save(tmp_path / "ix")
    assert polydom.load(tmp_path / "ix").cost_guards() == ix.cost_guards()


def test_the_greedy_walk_applies_each_features_guard():
    ticks = iter([0.0, 1.0, 3.0, 7.0])
    names, horners = ["a", "b", "c"], [(1.0,), (2.0,), (4.0,)]
    assert walk_measured(names, horners, 1.0, 7.0, lambda f: None, lambda: next(ticks)) == (3, 7.0)
    ticks = iter([0.0, 1.0, 3.0, 7.0])
    assert walk_measured(names, horners, 1.0, 7.0, lambda f: None, lambda: next(ticks), [1.0, 1.0, 1.01]) == (2, 3.0)
