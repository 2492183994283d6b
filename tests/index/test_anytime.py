"""Anytime PolyDom on injected clocks: fall back on overrun, upgrade on early finish, never recompute; guards."""

import copy
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polydom
from polydom.greedy.anytime import walk_measured
from polydom.index.serving.anytime import (FeatureTimeout, _best_computed, _best_with_room, _Need, chain_prefixes, ranked_prefixes,
                                   serve_anytime)

# Three features; costs are constants (seconds) so the clock is easy to script.
COSTS = {"cheap": [1.0], "mid": [2.0], "slow": [4.0]}
ACC = {"": .5, "cheap": .6, "mid": .65, "slow": .7, "cheap mid": .75, "cheap slow": .85, "mid slow": .8,
       "cheap mid slow": .9}


def acc(s):
    return ACC[" ".join(n for n in COSTS if n in s)]


class ScriptedClock:
    """Time advances only when a feature is computed, by the duration scripted for it."""

    def __init__(self, durations):
        self.now, self.durations, self.computed = 0.0, durations, []

    def __call__(self):
        return self.now

    def compute(self, name):
        self.computed.append(name)
        self.now += self.durations[name]


@pytest.fixture(scope="module")
def index():
    ix = polydom.build(COSTS, acc, e=0.0, tolerance=0.0)
    ix.check_invariants()
    return ix


def test_every_servable_set_has_a_trained_chain(index):
    assert set(index.candidates) <= set(index.chains)
    for mask, order in index.chains.items():
        assert all(p in index.trained for p in chain_prefixes(order))


def test_a_clock_that_matches_the_curves_serves_what_lookup_returns(index):
    for budget in (0.0, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 10.0):
        clock = ScriptedClock({n: c[0] for n, c in COSTS.items()})
        choice = index.select(1.0, budget, clock.compute, clock)
        expected = index.lookup(1.0, budget)
        assert choice.features == expected.features and choice.accuracy == expected.accuracy
        assert choice.cost == pytest.approx(expected.cost)
        assert sorted(clock.computed) == sorted(expected.features)


def test_an_overrun_falls_back_to_the_best_computed_prefix(index):
    # Budget 5 buys {cheap, slow} (.85). Its chain's first feature takes 4.5 s instead of its
    # prediction, so the second no longer fits: the walk stops and serves what it computed.
    order = [index.space.names[i] for i in index.chains[index.lookup(1.0, 5.0).key]]
    durations = {n: c[0] for n, c in COSTS.items()}
    durations[order[0]] = 4.5  # overruns: the second feature no longer fits
    clock = ScriptedClock(durations)
    choice = index.select(1.0, 5.0, clock.compute, clock)
    assert clock.computed == [order[0]]
    assert choice.features == frozenset({order[0]})
    assert choice.accuracy == acc({order[0]}) and choice.cost == 4.5


def test_an_early_finish_upgrades_and_never_recomputes(index):
    # Budget 4.5 buys {cheap, mid} (.75, predicted 3). Its chain starts with cheap; when cheap
    # takes no time, 4.5 seconds remain and {cheap, slow} (.85) needs only slow (4): upgrade.
    assert index.lookup(1.0, 4.5).features == frozenset({"cheap", "mid"})
    assert index.chains[index.lookup(1.0, 4.5).key][0] == index.space.names.index("cheap")
    clock = ScriptedClock({"cheap": 0.0, "mid": 0.0, "slow": 4.0})
    mask, elapsed, steps = serve_anytime(index, 1.0, 4.5, clock.compute, clock)
    assert index.space.frozenset(mask) == frozenset({"cheap", "slow"}) and index.trained[mask] == 0.85
    assert steps[:2] == [("compute", "cheap"), ("upgrade", index.space.mask({"cheap", "slow"}))]
    assert clock.computed == ["cheap", "slow"]  # cheap is not computed again for the new target
    assert elapsed == 4.0


def test_a_feature_that_cannot_fit_is_never_started(index):
    clock = ScriptedClock({"cheap": 0.9, "mid": 5.0, "slow": 5.0})
    choice = index.select(1.0, 0.5, clock.compute, clock)  # nothing fits 0.5
    assert clock.computed == [] and choice.features == frozenset() and choice.cost == 0.0


def test_chains_and_standard_errors_survive_storage(index, tmp_path):
    index.save(tmp_path / "ix")
    loaded = polydom.load(tmp_path / "ix")
    assert loaded.chains == index.chains
    clock = ScriptedClock({"cheap": 0.0, "mid": 0.0, "slow": 4.0})
    assert loaded.select(1.0, 4.5, clock.compute, clock) == index.select(1.0, 4.5, *(lambda c: (c.compute, c))(
        ScriptedClock({"cheap": 0.0, "mid": 0.0, "slow": 4.0})))


def random_instance(rng):
    """A random instance of up to six features with linear costs and monotone scores, and its costs."""
    names = [f"f{i}" for i in range(rng.randint(1, 6))]
    costs = {n: [rng.uniform(0, 2), rng.choice([0.0, rng.uniform(0, 0.1)])] for n in names}
    accs = {}
    for m in sorted(range(1 << len(names)), key=int.bit_count):
        s = frozenset(names[i] for i in range(len(names)) if m >> i & 1)
        accs[s] = max([rng.random()] + [accs[s - {f}] for f in s])
    return polydom.build(costs, accs.__getitem__, e=0.0, tolerance=0.0), costs


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6))
def test_matching_clock_equals_lookup_on_random_instances(seed):
    rng = random.Random(seed)
    index, costs = random_instance(rng)
    index.check_invariants()
    for _ in range(10):
        size, budget = rng.uniform(0, 20), rng.uniform(0, 6)
        clock = ScriptedClock({n: polydom.CostCurve(c)(size) for n, c in costs.items()})
        mask, elapsed, steps = serve_anytime(index, size, budget, clock.compute, clock)
        expected = index.lookup(size, budget)
        assert index.trained[mask] == expected.accuracy, steps
        assert len(clock.computed) == len(set(clock.computed))
        assert elapsed <= budget * (1 + 1e-9)


@settings(deadline=None, max_examples=100)
@given(st.integers(0, 10**6))
def test_the_bisected_room_scan_finds_what_scanning_the_whole_skyline_finds(seed):
    # The walk skips the skyline's sets dearer than the time left plus all that is computed; the
    # plain scan of every set, from the most accurate down, must agree on every instance,
    # with guards below 1 (negative shares) and exact fits included.
    rng = random.Random(seed)
    index, costs = random_instance(rng)
    for _ in range(20):
        size = rng.uniform(0, 20)
        cost = [polydom.CostCurve(costs[n])(size) for n in index.space.names]
        need = _Need(cost, [rng.choice([0.5, 1.0, rng.uniform(0.5, 2.0)]) for _ in cost])
        computed = rng.getrandbits(len(index.space.names))
        ids = index.skyline_ids_at(size)
        pick = index.candidates[rng.choice(ids)]
        remaining = rng.choice([rng.uniform(0, 6), need(pick, computed)])  # an exact fit, at times
        floor = rng.choice([-1.0, rng.random()])
        beats = lambda c, acc: acc > floor  # noqa: E731
        plain = next((index.candidates[c] for c in reversed(ids)
                      if beats(c, index.candidate_accuracy[c]) and need(index.candidates[c], computed) <= remaining),
                     None)
        assert _best_with_room(index, size, computed, remaining, need, beats) == plain


def random_chains(rng, k: int, count: int):
    """``(trained, chains)``: accuracies of every subset of ``k`` features on a coarse grid (so
    that ties between different prefixes happen) and ``count`` chains of random sets."""
    trained = {m: rng.randint(0, 8) / 8 for m in range(1 << k)}
    chains = {}
    for _ in range(count):
        mask = rng.randint(1, (1 << k) - 1)
        order = [i for i in range(k) if mask >> i & 1]
        rng.shuffle(order)
        chains[mask] = tuple(order)
    return trained, chains


@settings(deadline=None, max_examples=100)
@given(st.integers(0, 10**6))
def test_the_ranked_prefixes_find_the_best_computed_prefix_as_walking_every_chain_does(seed):
    rng = random.Random(seed)
    k = rng.randint(1, 6)
    trained, chains = random_chains(rng, k, rng.randint(1, 5))

    class Index:
        pass

    index = Index()
    index.trained, index.chains = trained, chains
    index.ranked_prefixes = ranked_prefixes(chains, trained)
    for computed in range(1 << k):
        served = rng.choice([0, computed & rng.randint(0, (1 << k) - 1)])
        best, best_acc = served, trained[served]  # the definition: every chain, prefix by prefix
        for order in chains.values():
            for prefix in chain_prefixes(order):
                if prefix & ~computed:
                    break
                if trained[prefix] > best_acc:
                    best, best_acc = prefix, trained[prefix]
        assert _best_computed(index, computed, served) == best


@pytest.mark.parametrize("backend", ["polydom", "greedy"])
def test_lookups_outside_the_measured_sizes_follow_the_policy(backend):
    options = {"n0": 20.0} if backend == "greedy" else {}
    costs = {"a": [0.0, 1.0], "b": [1.0, 0.5]}
    accs = {frozenset(): .5, frozenset("a"): .7, frozenset("b"): .8, frozenset("ab"): .9}
    warn = polydom.build(costs, accs.__getitem__, measured_range=(10, 100), backend=backend, **options)
    warn.lookup(50.0, 10.0)  # inside: silent
    with pytest.warns(polydom.index.protocol.ExtrapolationWarning, match=r"size 500.0 is outside .*\[10, 100\]"):
        warn.lookup(500.0, 10.0)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn.lookup(600.0, 10.0)  # once per index
        polydom.build(costs, accs.__getitem__, measured_range=(10, 100), extrapolate="allow", backend=backend,
                      **options).lookup(5.0, 1.0)
    strict = polydom.build(costs, accs.__getitem__, measured_range=(10, 100), extrapolate="raise", backend=backend,
                           **options)
    with pytest.raises(ValueError, match="extrapolate='raise'"):
        strict.lookup(5.0, 1.0)
    assert strict.lookup(10.0, 1.0).features == frozenset()
    with pytest.raises(ValueError, match="extrapolate must be one of"):
        polydom.build(costs, accs.__getitem__, extrapolate="sometimes", backend=backend, **options)


@pytest.mark.parametrize("backend, options", [("polydom", {}), ("greedy", {"n0": 10.0})])
def test_cost_of_and_options_agree_with_the_curves(backend, options):
    inst = polydom.make_synthetic(5, k=None, seed=1)
    index = polydom.build(inst.costs, inst.expand, backend=backend, **options)
    for size in (0.0, 3.0, 10.0, 250.0):
        masks, costs, accuracies = index.options_at(size)
        assert costs == sorted(costs) and masks[0] == 0 and costs[0] == 0.0
        for m, c, a in zip(masks, costs, accuracies):
            names = index.space.frozenset(m)
            by_hand = sum(polydom.CostCurve(inst.costs[n])(size) for n in names)
            assert index.cost_of(names, size) == pytest.approx(by_hand, rel=1e-12)
            assert c == pytest.approx(by_hand, rel=1e-12) and a == index.trained[m]


# ------------------------------------------------------------------ cost guards
# A guard multiplies a feature's predicted cost when a walk decides whether to start it
# (CostSensitiveIndex.cost_guards); lookups ignore it.


def guarded(index, **guards):
    """A copy of ``index`` whose params carry per-feature guards (1 where not given)."""
    out = copy.copy(index)
    out.params = {**index.params, "cost_guard": [guards.get(n, 1.0) for n in index.space.names]}
    return out


@pytest.fixture(scope="module", params=["polydom", "greedy-cost"])
def any_index(request):
    return polydom.build(COSTS, acc, e=0.0, tolerance=0.0, backend=request.param, **(
        {"n0": 1.0} if request.param != "polydom" else {}))


def test_without_guards_every_feature_has_guard_one(any_index):
    assert any_index.cost_guards() == (1.0, 1.0, 1.0)


class RecordingClock(ScriptedClock):
    """Also records the time at which each feature was started."""

    def compute(self, name):
        self.started = getattr(self, "started", []) + [(name, self.now)]
        super().compute(name)


GUARDS = {"slow": 1.5}


def check_guarded_starts(clock, budget):
    for name, at in getattr(clock, "started", []):
        assert at + COSTS[name][0] * GUARDS.get(name, 1.0) <= budget + 1e-12, (name, at)


def test_a_feature_starts_only_when_its_guarded_cost_fits(any_index):
    # Budget 7 buys every feature at their predicted costs (1 + 2 + 4). With slow's guard at 1.5
    # slow may start only with 6 s left, so it must come first or after cheap alone.
    budget = 7.0
    assert any_index.lookup(1.0, budget).features == frozenset(COSTS)
    ix = guarded(any_index, **GUARDS)
    clock = RecordingClock({n: c[0] for n, c in COSTS.items()})
    choice = ix.select(1.0, budget, clock.compute, clock)
    check_guarded_starts(clock, budget)
    assert choice.cost <= budget and choice.features <= set(clock.computed)
    assert len(clock.computed) == len(set(clock.computed))  # never recomputed


@pytest.mark.parametrize("budget", [0.5, 1.0, 2.0, 3.0, 4.0, 4.5, 5.0, 6.0, 6.5, 7.0, 8.0, 9.0])
@pytest.mark.parametrize("slow_takes", [2.0, 4.0, 5.5])
def test_guarded_walks_never_start_what_has_no_room(any_index, budget, slow_takes):
    ix = guarded(any_index, **GUARDS)
    clock = RecordingClock({"cheap": 1.0, "mid": 2.0, "slow": slow_takes})
    choice = ix.select(1.0, budget, clock.compute, clock)
    check_guarded_starts(clock, budget)
    assert choice.features <= set(clock.computed) and len(clock.computed) == len(set(clock.computed))
    if slow_takes <= 4.0 * GUARDS["slow"]:  # no feature slower than its guard: no overrun
        assert choice.cost <= budget


def test_guards_off_start_whatever_the_predicted_cost_fits(any_index):
    ix = guarded(any_index, **GUARDS)
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


def test_guards_leave_lookups_alone(any_index):
    ix = guarded(any_index, cheap=3.0, mid=2.0, slow=1.5)
    for budget in (0.0, 1.0, 3.0, 5.0, 7.0, 100.0):
        assert ix.lookup(1.0, budget) == any_index.lookup(1.0, budget)


def test_bad_guards_are_refused(any_index):
    with pytest.raises(ValueError, match="cost_guard"):
        guarded(any_index, cheap=0.5).cost_guards()
    with pytest.raises(ValueError, match="cost_guard_by_size"):
        by_size(any_index, {1.0: {"cheap": 0.5}}).cost_guards(1.0)
    with pytest.raises(ValueError, match="cost_guard_by_size"):
        by_size(any_index, {1.0: {}, 4.0: {}}, rows=1).cost_guards(2.0)


def by_size(index, table, rows=None):
    """``guarded(index, **GUARDS)`` with per-size guards ``{size: {name: guard}}`` (1 where not given)."""
    out = guarded(index, **GUARDS)
    sizes = sorted(table)
    out.params["cost_guard_sizes"] = sizes
    out.params["cost_guard_by_size"] = [[table[n].get(f, 1.0) for f in index.space.names] for n in sizes][:rows]
    return out


def test_guards_by_size_apply_at_their_size_and_the_larger_between_two(any_index):
    ix = by_size(any_index, {1.0: {"slow": 1.5}, 4.0: {}})
    names = ix.space.names
    assert ix.cost_guards(1.0)[names.index("slow")] == 1.5
    assert ix.cost_guards(4.0) == (1.0, 1.0, 1.0) == ix.cost_guards(9.0)  # above the last: the last
    assert ix.cost_guards(2.0) == ix.cost_guards(0.5) == ix.cost_guards(1.0)
    assert ix.cost_guards() == guarded(any_index, **GUARDS).cost_guards()  # no size: over all sizes
    # Budget 7 buys every feature unguarded (1 + 2 + 4); slow's guard at size 1 forbids that order.
    for size, guard in ((1.0, 1.5), (2.0, 1.5), (4.0, 1.0)):
        clock = RecordingClock({n: c[0] for n, c in COSTS.items()})
        choice = ix.select(size, 7.0, clock.compute, clock)
        for name, at in clock.started:
            assert at + COSTS[name][0] * (guard if name == "slow" else 1.0) <= 7.0 + 1e-12
        if guard == 1.0:
            assert choice.features == frozenset(COSTS)
    without = copy.copy(ix)
    without.params = {**ix.params, "cost_guard": None}  # guards off: per-size guards are off too
    assert without.cost_guards(1.0) == (1.0, 1.0, 1.0)


def test_guards_survive_storage(any_index, tmp_path):
    ix = guarded(any_index, slow=1.25)
    ix.save(tmp_path / "ix")
    assert polydom.load(tmp_path / "ix").cost_guards() == ix.cost_guards()
    ix = by_size(any_index, {1.0: {"slow": 1.5}, 4.0: {"cheap": 1.25}})
    ix.save(tmp_path / "iy")
    loaded = polydom.load(tmp_path / "iy")
    assert [loaded.cost_guards(n) for n in (1.0, 2.0, 4.0)] == [ix.cost_guards(n) for n in (1.0, 2.0, 4.0)]


def test_the_greedy_walk_applies_each_features_guard():
    ticks = iter([0.0, 1.0, 3.0, 7.0])
    names, horners = ["a", "b", "c"], [(1.0,), (2.0,), (4.0,)]
    assert walk_measured(names, horners, 1.0, 7.0, lambda f: None, lambda: next(ticks)) == (3, 7.0)
    ticks = iter([0.0, 1.0, 3.0, 7.0])
    assert walk_measured(names, horners, 1.0, 7.0, lambda f: None, lambda: next(ticks), [1.0, 1.0, 1.01]) == (2, 3.0)


# ------------------------------------------------------------------ guards learned while serving


def test_serving_guards_learn_a_slower_machine_and_stop_starting_what_no_longer_fits(any_index):
    from polydom.index.serving.guards import ServingGuards

    learn = ServingGuards(any_index, quantile=0.98, window=64, min_calls=8, pool_min_calls=8, refresh=4)
    slow = any_index.space.names.index("slow")
    assert learn.guards(1.0) == any_index.cost_guards(1.0)
    # The machine now takes twice the curve for slow: the walks' own clock says so.
    twice = {"cheap": 1.0, "mid": 2.0, "slow": 8.0}
    served = []
    for _ in range(12):
        clock = RecordingClock(twice)
        served.append(any_index.select(1.0, 7.0, clock.compute, clock, serving_guards=learn))
    learn.check()
    # Its own calls say 2; a walk that stopped starting it before it had 8 keeps the band's pool,
    # whose middle half (cheap and mid at their curves, slow at twice) says less -- but above 1,
    # enough to refuse it at 7 after cheap and mid (3 + 4 * guard > 7).
    if learn.seen(1.0)[slow] >= 8:
        assert learn.guards(1.0)[slow] == pytest.approx(2.0)
    assert 1.0 < learn.guards(1.0)[slow] <= 2.0 + 1e-9
    assert learn.guards(1000.0) == any_index.cost_guards(1000.0)  # another size band: still the fit's
    assert served[0].cost > 7.0  # the fit's guard (1) let slow start and overrun ...
    clock = RecordingClock(twice)
    later = any_index.select(1.0, 7.0, clock.compute, clock, serving_guards=learn)
    assert later.cost <= 7.0 and "slow" not in clock.computed  # ... the learned one does not
    # Unguarded walks neither use nor feed it.
    before = learn.guards(1.0)
    clock = ScriptedClock({"cheap": 1.0, "mid": 2.0, "slow": 40.0})
    any_index.select(1.0, 7.0, clock.compute, clock, guarded=False, serving_guards=learn)
    assert learn.guards(1.0) == before


@pytest.mark.parametrize("after", ["recovered", "still slow", "never probed"])
def test_a_band_probes_a_guard_that_stopped_its_feature(any_index, after):
    from polydom.index.serving.guards import ServingGuards

    learn = ServingGuards(any_index, quantile=0.98, window=64, min_calls=8, pool_min_calls=8, refresh=4,
                          forget_after=None if after == "never probed" else 128)
    slow = any_index.space.names.index("slow")
    # A slow spell: slow took three times its curve, so its guard (3) refuses it at 7.0 ...
    for _ in range(8):
        learn.observe(slow, 1.0, 4.0, 12.0)
    assert learn.guards(1.0)[slow] == pytest.approx(3.0)
    # ... and the walks that refuse slow never measure it again.
    slow_takes = 12.0 if after == "still slow" else 4.0
    started = []
    for _ in range(400):
        clock = ScriptedClock({"cheap": 1.0, "mid": 2.0, "slow": slow_takes})
        any_index.select(1.0, 7.0, clock.compute, clock, serving_guards=learn)
        started.append("slow" in clock.computed)
        learn.check()
    assert not any(started[:100])
    if after == "never probed":
        assert not any(started) and learn.guards(1.0)[slow] == pytest.approx(3.0)
    elif after == "recovered":
        # Probed after 128 walks without it (looked for every 64): the probe ran at its curve, the
        # band forgot the spell, and slow's own calls set its guard back to the machine's.
        assert all(started[128 + 64:])
        assert learn.guards(1.0)[slow] == pytest.approx(1.0)
    else:
        # Each probe overran and kept the guard: one start per probe, not one per pool window.
        assert sum(started) == 2 and learn.guards(1.0)[slow] == pytest.approx(3.0)


def test_a_band_does_not_probe_a_learned_guard_below_the_index(any_index):
    from polydom.index.serving.guards import ServingGuards

    ix = guarded(any_index, slow=1.5)  # the fit saw slow's calls spread; this machine does not
    learn = ServingGuards(ix, quantile=0.98, window=64, min_calls=8, pool_min_calls=8, refresh=4, forget_after=128)
    slow = ix.space.names.index("slow")
    curve = ix.cost_of(["slow"], 1.0)
    for _ in range(8):
        learn.observe(slow, 1.0, curve, curve)
    assert learn.guards(1.0)[slow] == pytest.approx(1.0)
    # Walks at budgets too tight for slow: none computes it, far past forget_after ...
    for _ in range(400):
        assert learn.guards(1.0)[slow] == pytest.approx(1.0)  # ... and its guard stays the one it learned
    learn.check()
    if ix.backend == "polydom":
        # So a walk still starts slow where it was measured to fit (need 5 <= 5; the index's
        # guard would ask for 7).
        clock = ScriptedClock({n: c[0] for n, c in COSTS.items()})
        assert ix.select(1.0, 5.0, clock.compute, clock, serving_guards=learn).features == {"cheap", "slow"}


def test_a_probe_never_raises_a_guard(any_index):
    from polydom.index.serving.guards import ServingGuards

    # Two sizes of one band, whose index guards for slow lie either side of what it learns.
    ix = by_size(any_index, {1.0: {"slow": 1.2}, 1.15: {"slow": 2.0}})
    assert ServingGuards.band(1.0) == ServingGuards.band(1.15)
    learn = ServingGuards(ix, quantile=0.98, window=64, min_calls=8, pool_min_calls=8, refresh=4, forget_after=128)
    names = ix.space.names
    slow, cheap = names.index("slow"), names.index("cheap")
    curve = {n: ix.cost_of([n], 1.0) for n in names}

    def pool_at(ratio, calls):
        for _ in range(calls):
            learn.observe(cheap, 1.0, curve["cheap"], ratio * curve["cheap"])

    for _ in range(8):
        learn.observe(slow, 1.0, curve["slow"], 1.5 * curve["slow"])
    pool_at(2.5, 8)
    assert learn.guards(1.0)[slow] == learn.guards(1.15)[slow] == pytest.approx(1.5)
    for _ in range(200):  # idle, but served at 1.15 (1.5 <= 2.0): not probed
        learn.guards(1.15)
    assert learn.guards(1.0)[slow] == pytest.approx(1.5)
    for _ in range(200):  # idle: slow (1.5 > 1.2 at size 1) is probed
        learn.guards(1.0)
    learn.check()
    assert learn.guards(1.0)[slow] == pytest.approx(1.2)  # the index's guard, to give slow a chance ...
    assert learn.guards(1.15)[slow] == pytest.approx(1.5)  # ... but never above what it learned
    # The probe's call comes at 1.15, where the learned guard is below the index's: kept.
    learn.observe(slow, 1.15, curve["slow"], 1.1 * curve["slow"])
    assert learn.guards(1.15)[slow] == pytest.approx(1.5)
    assert learn.seen(1.15)[slow] == 9  # kept: its 8 calls and the probe's
    # Probed again; a faster call at size 1 forgets the record, and while it learns anew its
    # guard stays below what it forgot, though the pool stands higher.
    for _ in range(200):
        learn.guards(1.0)
    learn.observe(slow, 1.0, curve["slow"], 1.1 * curve["slow"])
    pool_at(2.5, 7)
    learn.check()
    assert learn.guards(1.0)[slow] == learn.snapshot().guards(1.0)[slow] == pytest.approx(1.5)
    for _ in range(7):
        learn.observe(slow, 1.0, curve["slow"], 1.1 * curve["slow"])
    learn.check()
    assert learn.guards(1.0)[slow] == pytest.approx(1.1)  # learned anew: its own calls again


@pytest.mark.parametrize("after", ["faster", "still slow"])
def test_a_chance_that_stopped_its_feature_goes_stale(any_index, after):
    from polydom.index.serving.guards import ServingGuards

    learn = ServingGuards(any_index, quantile=0.9, window=64, min_calls=8, pool_min_calls=8, refresh=4,
                          forget_after=128)
    slow = any_index.space.names.index("slow")
    curve = any_index.cost_of(["slow"], 1.0)
    # A slow spell of preemption: the wall clock ran three times the curve, the CPU at it. The
    # guard (from the CPU) stays low; the chance to finish within 1.2 times the curve is 0.
    for _ in range(8):
        learn.observe(slow, 1.0, curve, 3.0 * curve, cpu=curve)
    assert learn.guards(1.0)[slow] <= 1.0 and learn.finish_chance(slow, 1.0, 1.2) == 0.0
    for _ in range(127):  # walks that refuse slow (128 with the one above): it is measured no more
        learn.guards(1.0)
    assert learn.finish_chance(slow, 1.0, 1.2) == 0.0  # not stale yet
    learn.guards(1.0)
    assert learn.finish_chance(slow, 1.0, 1.2) is None  # stale: the fit's law decides again
    learn.check()
    if after == "faster":
        # The next call ran at the curve, faster than most of what the record held: learned anew.
        learn.observe(slow, 1.0, curve, curve, cpu=curve)
        assert learn.seen(1.0)[slow] == 1 and learn.finish_chance(slow, 1.0, 1.2) is None
        for _ in range(7):
            learn.observe(slow, 1.0, curve, curve, cpu=curve)
        assert learn.finish_chance(slow, 1.0, 1.2) == 1.0  # its own calls again
    else:
        learn.observe(slow, 1.0, curve, 3.0 * curve, cpu=curve)  # still slow: the record keeps it
        assert learn.seen(1.0)[slow] == 9 and learn.finish_chance(slow, 1.0, 1.2) == 0.0
    learn.check()


def test_a_forgotten_guard_stays_capped_when_nothing_else_is_learned(any_index):
    from polydom.index.serving.guards import ServingGuards

    ix = by_size(any_index, {1.0: {"slow": 1.2}, 1.15: {"slow": 2.0}})
    learn = ServingGuards(ix, quantile=0.98, window=64, min_calls=8, pool_min_calls=8, refresh=4, forget_after=128)
    slow = ix.space.names.index("slow")
    curve = ix.cost_of(["slow"], 1.0)
    for _ in range(8):  # only slow is served: its record and the band's pool learn 1.5
        learn.observe(slow, 1.0, curve, 1.5 * curve)
    for _ in range(200):
        learn.guards(1.0)
    learn.observe(slow, 1.0, curve, 1.1 * curve)  # the probe's call forgets both records
    learn.check()
    assert learn.guards(1.15)[slow] == pytest.approx(1.5)  # not the index's 2.0 there


def test_a_feature_not_yet_seen_in_a_band_takes_the_bands_pooled_guard(any_index):
    from polydom.index.serving.guards import ServingGuards

    learn = ServingGuards(any_index, quantile=0.98, window=64, min_calls=8, pool_min_calls=8, refresh=4)
    names = any_index.space.names
    cheap, slow = names.index("cheap"), names.index("slow")
    curve = {name: any_index.cost_of([name], 1.0) for name in names}
    for _ in range(8):  # only cheap is served, three times slower than its curve
        learn.observe(cheap, 1.0, curve["cheap"], 3.0 * curve["cheap"])
    learn.check()
    assert learn.seen(1.0)[slow] == 0
    assert learn.guards(1.0)[slow] == pytest.approx(max(3.0, any_index.cost_guards(1.0)[slow]))
    # A feature's own calls replace the pool once it has enough of them.
    for _ in range(8):
        learn.observe(slow, 1.0, curve["slow"], 1.5 * curve["slow"])
    assert learn.guards(1.0)[slow] == pytest.approx(1.5)
    # The pool never lowers the index's guard: a fast machine keeps the fit's guards.
    fast = ServingGuards(any_index, quantile=0.98, window=64, min_calls=8, pool_min_calls=8, refresh=4)
    for _ in range(8):
        fast.observe(cheap, 1.0, curve["cheap"], 0.5 * curve["cheap"])
    assert fast.guards(1.0)[slow] == any_index.cost_guards(1.0)[slow]
    # Bands do not borrow: a size band without calls keeps the index's guards.
    assert learn.guards(1000.0) == any_index.cost_guards(1000.0)


def test_a_snapshot_of_serving_guards_starts_equal_and_learns_apart(any_index):
    from polydom.index.serving.guards import ServingGuards

    learn = ServingGuards(any_index, window=64, min_calls=8, pool_min_calls=8, refresh=4)
    slow = any_index.space.names.index("slow")
    curve = any_index.cost_of(["slow"], 1.0)
    for _ in range(8):
        learn.observe(slow, 1.0, curve, 2.0 * curve)
    copy = learn.snapshot()
    assert copy.guards(1.0) == learn.guards(1.0) and copy.seen(1.0) == learn.seen(1.0)
    for _ in range(16):
        copy.observe(slow, 1.0, curve, 4.0 * curve)
    copy.check()
    assert copy.guards(1.0)[slow] == pytest.approx(4.0) and learn.guards(1.0)[slow] == pytest.approx(2.0)


def test_serving_guards_refuse_bad_settings(any_index):
    from polydom.index.serving.guards import ServingGuards

    with pytest.raises(ValueError, match="quantile"):
        ServingGuards(any_index, quantile=0.2)
    with pytest.raises(ValueError, match="min_calls"):
        ServingGuards(any_index, window=4, min_calls=5)
    with pytest.raises(ValueError, match="pool_min_calls"):
        ServingGuards(any_index, pool_min_calls=0)


# ------------------------------------------------------------------ trying past the guard


class DeadlineClock(ScriptedClock):
    """``compute(name, deadline)`` gives up at ``deadline`` as a worker abandoned there would."""

    def compute(self, name, deadline=None):
        if deadline is not None and self.now + self.durations[name] > deadline:
            self.now = deadline
            raise FeatureTimeout(name)
        super().compute(name)


def test_a_feature_the_guard_refuses_is_tried_with_a_deadline_and_never_answers_late(index):
    from polydom.index.serving.guards import ServingGuards

    ix = guarded(index, cheap=2.0)  # cheap (1 s) needs 2 s with its guard; budget 1.5 refuses it
    plain = DeadlineClock({"cheap": 1.2, "mid": 2.0, "slow": 4.0})
    assert ix.select(1.0, 1.5, plain.compute, plain).features == frozenset() and plain.computed == []
    # It finishes in time: the more accurate set is served.
    learn = ServingGuards(ix, quantile=0.98, window=64, min_calls=1, pool_min_calls=1, refresh=1)
    fast = DeadlineClock({"cheap": 1.2, "mid": 2.0, "slow": 4.0})
    choice, steps = ix.select_steps(1.0, 1.5, fast.compute, fast, speculate=True, serving_guards=learn)
    assert choice.features == frozenset({"cheap"}) and choice.cost == 1.2
    assert steps == [("speculate", "cheap"), ("compute", "cheap")]
    # It does not: the walk answers at the deadline with what it had, on time.
    slow = DeadlineClock({"cheap": 3.0, "mid": 2.0, "slow": 4.0})
    choice, steps = ix.select_steps(1.0, 1.5, slow.compute, slow, speculate=True, serving_guards=learn)
    assert choice.features == frozenset() and choice.cost == 1.5
    assert steps == [("speculate", "cheap"), ("abandon", "cheap")]
    assert learn.seen(1.0) == (0, 0, 0)  # speculative calls, finished or not, teach no guard
    # Never tried where even the unguarded prediction does not fit.
    tight = DeadlineClock({"cheap": 0.1, "mid": 2.0, "slow": 4.0})
    assert ix.select(1.0, 0.9, tight.compute, tight, speculate=True).features == frozenset() and tight.computed == []


def test_speculation_changes_nothing_where_the_guards_let_the_walk_through(index):
    for budget in (1.0, 3.0, 4.5, 7.0):
        a = ScriptedClock({n: c[0] for n, c in COSTS.items()})
        b = DeadlineClock({n: c[0] for n, c in COSTS.items()})
        assert index.select(1.0, budget, a.compute, a) == index.select(1.0, budget, b.compute, b, speculate=True)
        assert a.computed == b.computed


# ------------------------------------------------------------------ the start rule without a cap
# By default (a classifier's Serving(guard=None): params["start_cap"] False) a start is weighed by
# its chance to finish, read from the measured cost law, times the accuracy it leads to.

def with_laws(index, laws, start_cap=False, **guards):
    """A copy of ``index`` with per-feature cost laws (41 quantiles), the cap off, and guards."""
    out = guarded(index, **guards)
    out.params["cost_law"] = [laws.get(n) for n in index.space.names]
    out.params["start_cap"] = start_cap
    return out


def law_between(low, high):
    """A uniform law of measured / predicted time on [low, high], as 41 quantiles."""
    return [low + (high - low) * k / 40 for k in range(41)]


def test_law_chance_reads_the_quantiles_and_interpolates():
    from polydom.index.serving.anytime import law_chance

    law = law_between(0.5, 1.5)
    assert law_chance(law, 0.4) == 0.0 and law_chance(law, 1.5) == 1.0 and law_chance(law, 9.0) == 1.0
    assert law_chance(law, 1.0) == pytest.approx(0.5) and law_chance(law, 0.75) == pytest.approx(0.25)


def test_without_a_cap_a_start_worth_its_risk_is_taken():
    """Budget 5.2 at size 1: the lookup's {cheap, slow} (5 s, 0.85) needs 7 s under slow's guard
    of 1.5, so the cap refuses it for {cheap, mid} (0.75). Without the cap, once cheap is computed
    slow's law says it finishes in the 4.2 s left three times in four, and 0.75 * 0.85 beats the
    0.6 of {cheap}: the walk starts it."""
    ix = polydom.build(COSTS, acc, e=0.0, tolerance=0.0)
    laws = {"slow": law_between(0.6, 1.2), "cheap": law_between(0.9, 1.1), "mid": law_between(0.9, 1.1)}
    assert ix.lookup(1.0, 5.2).features == frozenset({"cheap", "slow"})
    capped = with_laws(ix, laws, start_cap=True, slow=1.5)
    clock = RecordingClock({n: c[0] for n, c in COSTS.items()})
    assert capped.select(1.0, 5.2, clock.compute, clock).features == frozenset({"cheap", "mid"})
    uncapped = with_laws(ix, laws, slow=1.5)
    clock = RecordingClock({n: c[0] for n, c in COSTS.items()})
    assert uncapped.select(1.0, 5.2, clock.compute, clock).features == frozenset({"cheap", "slow"})


def test_without_a_cap_a_start_not_worth_its_risk_is_refused():
    """The same walk with a law under which slow never finishes in the 4.2 s left: starting it
    is worth nothing, so the walk serves a set it can finish instead ({cheap, mid})."""
    ix = polydom.build(COSTS, acc, e=0.0, tolerance=0.0)
    laws = {"slow": law_between(1.06, 1.15), "cheap": law_between(0.9, 1.1), "mid": law_between(0.9, 1.1)}
    uncapped = with_laws(ix, laws)
    clock = RecordingClock({n: c[0] for n, c in COSTS.items()})
    choice = uncapped.select(1.0, 5.2, clock.compute, clock)
    assert "slow" not in clock.computed and choice.features == frozenset({"cheap", "mid"}) and choice.cost <= 5.2


def test_a_late_price_refuses_a_start_the_plain_rule_takes():
    """A price of lateness charges the start's chance to run late: at price 0 the slow start pays
    (0.75 * 0.85 > 0.6); at a price of 1 it does not (0.64 - 0.25 < 0.6)."""
    from polydom.index.serving.lateness import LatePrice

    ix = with_laws(polydom.build(COSTS, acc, e=0.0, tolerance=0.0),
                   {"slow": law_between(0.6, 1.2), "cheap": law_between(0.9, 1.1), "mid": law_between(0.9, 1.1)})
    price = LatePrice(0.02)
    cell = price._cell(1.0, 5.2)
    price._prices[cell] = 1.0
    clock = RecordingClock({n: c[0] for n, c in COSTS.items()})
    choice = ix.select(1.0, 5.2, clock.compute, clock, late_price=price)
    assert "slow" not in clock.computed and choice.features == frozenset({"cheap", "mid"})
    # The answer came on time: the price falls by rate * share.
    assert price.price(1.0, 5.2) == pytest.approx(1.0 - 0.5 * 0.02)
    price.check()


def test_a_late_price_holds_the_late_share_near_its_budget():
    """A stream of walks whose slow feature runs late one time in four when started: the plain rule
    starts it every time (25% late); with a 2% budget the price climbs until the walk starts it
    rarely, and the late share over the stream stays near the budget."""
    from polydom.index.serving.lateness import LatePrice

    ix = with_laws(polydom.build(COSTS, acc, e=0.0, tolerance=0.0),
                   {"slow": law_between(0.6, 1.2), "cheap": law_between(0.9, 1.1), "mid": law_between(0.9, 1.1)})
    rng = random.Random(0)

    def stream(price, walks=2000):
        late = 0
        for _ in range(walks):
            clock = RecordingClock({"cheap": 1.0, "mid": 2.0, "slow": 5.0 if rng.random() < 0.25 else 3.5})
            choice = ix.select(1.0, 5.2, clock.compute, clock, late_price=price)
            late += choice.cost > 5.2
        return late / walks

    assert stream(None) == pytest.approx(0.25, abs=0.04)
    price = LatePrice(0.02)
    assert stream(price) <= 0.03
    assert price.late_shares()[price._cell(1.0, 5.2)][0] == 2000
    price.check()


def test_the_walk_prepares_an_index_once_and_again_when_its_params_change(index):
    from polydom.index.serving.anytime import prepared

    ix = copy.copy(index)
    ix.__dict__.pop("_walk_prepared", None)
    first = prepared(ix)
    assert prepared(ix) is first
    ix.params = {**ix.params, "cost_guard": [1.0, 1.0, 2.0]}
    again = prepared(ix)
    assert again is not first and again.at(ix, 1.0).guards == (1.0, 1.0, 2.0)


@given(st.integers(0, 2**32 - 1))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_adding_one_feature_finds_the_best_computed_prefix_as_the_full_scan_does(seed):
    """The walk asks, after each feature it adds, for the best computed prefix: looking only at the
    prefixes that hold the new feature (by scan or by subset look-up) answers as the full scan."""
    from polydom.index.serving.anytime import _best_computed_adding, _Prepared

    rng = random.Random(seed)
    k = rng.randint(1, 7)
    trained, chains = random_chains(rng, k, rng.randint(1, 6))

    from polydom.index.serving.params import ServingParams

    class Index:  # the parts of the backend contract a walk prepares from
        serving_params = ServingParams.from_params({"start_cap": False}, k)

    index = Index()
    index.trained, index.chains, index.candidates, index.costs = trained, chains, [], [None] * k
    index.ranked_prefixes = ranked_prefixes(chains, trained)
    prep = _Prepared(index, ())
    order = list(range(k))
    rng.shuffle(order)
    computed, served = 0, 0
    for feature in order:
        computed |= 1 << feature
        expected = _best_computed(index, computed, served)
        served = _best_computed_adding(prep, computed, served, feature, trained)
        assert served == expected
