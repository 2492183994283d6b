"""The start rule on injected clocks with injected preemption: robust learned guards and the stake.

A walk starts a feature when its guard fits the time left (the guard learned from the middle
half of the feature's calls, so preempted calls do not become refusals) and when starting raises
the expected on-time accuracy (the chance to finish times the target's accuracy beats what is
already computed).
"""

import copy
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polydom
from polydom.index.serving.guards import TAIL_ROOM, ServingGuards, robust_guard, upper_quantile


class JitterClock:
    """Time advances only when a feature is computed: by its scripted duration, plus a
    preemption of ``stall`` seconds on the calls ``preempt()`` picks."""

    def __init__(self, durations, preempt, stall):
        self.now, self.durations, self.preempt, self.stall, self.computed = 0.0, durations, preempt, stall, []

    def __call__(self):
        return self.now

    def compute(self, name):
        self.computed.append(name)
        self.now += self.durations[name] + (self.stall if self.preempt() else 0.0)


def one_feature(majority: float, accuracy: float, guard: float = 1.2):
    """An index over one feature ``a`` (1 s at every size) with the fit's ``guard`` for it."""
    scores = {frozenset(): majority, frozenset({"a"}): accuracy, frozenset({"b"}): accuracy - 0.05,
              frozenset({"a", "b"}): accuracy + 0.01}
    index = polydom.build({"a": [1.0], "b": [50.0]}, lambda s: scores[frozenset(s)], e=1.0, tolerance=0.0)
    out = copy.copy(index)
    out.params = {**index.params, "cost_guard": [guard, 1.0], "cost_guard_quantile": 0.99}
    return out


def preempted_calls(learn, n: int, share: float, seed: int = 0):
    """``n`` calls of feature 0 at 1.0-1.05 times its curve, ``share`` of them preempted by 4 s."""
    rng = random.Random(seed)
    for _ in range(n):
        learn.observe(0, 1.0, 1.0, rng.uniform(1.0, 1.05) + (4.0 if rng.random() < share else 0.0))


def test_a_minority_of_preempted_calls_does_not_move_the_learned_guard():
    rng = np.random.default_rng(1)
    quiet = rng.uniform(1.0, 1.05, 256)
    for share in (0.02, 0.06, 0.2):
        ratios = quiet.copy()
        ratios[rng.random(256) < share] += 4.0
        # The raw 0.99 quantile is a preempted call: a guard of 5 would refuse the feature for good.
        assert upper_quantile(ratios, 0.99) > 4.0
        assert robust_guard(ratios, 0.99) <= TAIL_ROOM * 1.1
    # With no outliers the robust guard is the window's own quantile (never above it).
    assert robust_guard(quiet, 0.99) <= upper_quantile(quiet, 0.99) + 1e-12
    # A real slowdown of every call moves it all the way.
    assert robust_guard(3.0 * quiet, 0.99) >= 3.0


def test_preemption_injected_into_walks_does_not_turn_into_refusal():
    # Budget 1.5 fits a (1 s, fit guard 1.2). One call in sixteen is preempted by 4 s. Before, the
    # learned 0.99 quantile became such a call (a guard near 5) and the walks served the majority
    # class from then on; now a keeps being started and served on time in most walks.
    index = one_feature(majority=0.10, accuracy=0.85)
    learn = ServingGuards(index, window=256, min_calls=20, pool_min_calls=20, refresh=4)
    calls = iter(range(10**6))
    clock_of = lambda: JitterClock({"a": 1.0, "b": 50.0}, lambda: next(calls) % 16 == 7, 4.0)  # noqa: E731
    served = []
    for _ in range(400):
        clock = clock_of()
        choice = index.select(1.0, 1.5, clock.compute, clock, serving_guards=learn)
        served.append((choice.features == frozenset({"a"}), choice.cost <= 1.5))
    learn.check()
    later = served[100:]
    assert learn.guards(1.0)[0] <= 1.5
    assert sum(a for a, _ in later) == len(later)  # a started in every walk ...
    on_time = sum(a and t for a, t in later) / len(later)
    assert on_time >= 0.9  # ... and on time but for the preempted calls (1 in 16)


@pytest.mark.parametrize("majority, accuracy, starts", [(0.10, 0.85, True), (0.90, 0.92, False)])
def test_the_stake_decides_a_start_the_guard_allows(majority, accuracy, starts):
    # 6% of a's calls are preempted, so it finishes within 1.4 s in about 94% of calls; its
    # learned guard (from the middle half) fits 1.4 s. Where the fall-back is the majority class
    # (0.10) and a gives 0.85, starting pays; where the fall-back gives 0.90 and a 0.92, it does
    # not (0.94 * 0.92 < 0.90).
    index = one_feature(majority, accuracy)
    learn = ServingGuards(index, window=256, min_calls=20, pool_min_calls=20, refresh=4)
    preempted_calls(learn, 256, 0.06)
    assert learn.guards(1.0)[0] * 1.0 <= 1.4
    chance = learn.finish_chance(0, 1.0, 1.4)
    assert 0.9 < chance < 0.97
    clock = JitterClock({"a": 1.0, "b": 50.0}, lambda: False, 0.0)
    choice, steps = index.select_steps(1.0, 1.4, clock.compute, clock, serving_guards=learn)
    assert (choice.features == frozenset({"a"})) is starts
    assert (clock.computed == ["a"]) is starts
    if not starts:
        assert steps == [("stop", "a")]
    # Unguarded walks take no stake: they start whatever fits.
    clock = JitterClock({"a": 1.0, "b": 50.0}, lambda: False, 0.0)
    assert index.select(1.0, 1.4, clock.compute, clock, guarded=False).features == frozenset({"a"})


def test_before_serving_learns_the_stake_reads_the_fits_guard_as_a_quantile():
    # Fit guard 2 at the 0.99 quantile: 2 s left gives a 0.99 chance. 0.99 * 0.92 > 0.90 starts,
    # 0.99 * 0.92 < 0.915 does not.
    for majority, starts in ((0.90, True), (0.915, False)):
        index = one_feature(majority, 0.92, guard=2.0)
        clock = JitterClock({"a": 1.0, "b": 50.0}, lambda: False, 0.0)
        assert (index.select(1.0, 2.0, clock.compute, clock).features == frozenset({"a"})) is starts


def test_a_band_explores_a_feature_the_fits_guard_refuses_and_then_trusts_what_it_measured():
    # The fit (on a busier machine) says a's calls reach 1.6 times its curve; here they take
    # 1.0-1.05. Budget 1.3 fits a at its curve but not its fit guard. With serving guards the walk
    # starts a up to min_calls times to measure it, and from then on its own guard lets it start.
    index = one_feature(majority=0.10, accuracy=0.85, guard=1.6)
    clock = JitterClock({"a": 1.0, "b": 50.0}, lambda: False, 0.0)
    assert index.select(1.0, 1.3, clock.compute, clock).features == frozenset()  # the fit's guard alone
    learn = ServingGuards(index, window=64, min_calls=8, pool_min_calls=8, refresh=4)
    rng = random.Random(0)
    kinds = []
    for _ in range(40):
        clock = JitterClock({"a": rng.uniform(1.0, 1.05), "b": 50.0}, lambda: False, 0.0)
        choice, steps = index.select_steps(1.0, 1.3, clock.compute, clock, serving_guards=learn)
        assert choice.features == frozenset({"a"})
        kinds.append([k for k, _ in steps])
    learn.check()
    assert sum("explore" in k for k in kinds) == 8  # min_calls starts to learn ...
    assert all("explore" not in k and "compute" in k for k in kinds[8:])  # ... then its own guard
    assert learn.guards(1.0)[0] < 1.3
    # Where the feature truly is slow, the band learns that after its samples and stops.
    slow = ServingGuards(index, window=64, min_calls=8, pool_min_calls=8, refresh=4)
    started = []
    for _ in range(40):
        clock = JitterClock({"a": 1.7, "b": 50.0}, lambda: False, 0.0)
        index.select(1.0, 1.3, clock.compute, clock, serving_guards=slow)
        started.append("a" in clock.computed)
    assert sum(started) == 8 and not any(started[8:])


class CpuJitterClock(JitterClock):
    """:class:`JitterClock` with the computing thread's CPU clock beside it: a preemption stalls
    the wall clock only."""

    def __init__(self, durations, preempt, stall):
        super().__init__(durations, preempt, stall)
        self.cpu = 0.0

    def compute(self, name):
        self.cpu += self.durations[name]
        super().compute(name)


def test_with_the_cpu_clock_even_frequent_preemption_leaves_the_guard_to_the_features_own_cost():
    # 40% of the calls are preempted by 0.5 s: the wall clock's upper quartile moves, the CPU
    # clock's does not. The guard stays the feature's own (1.0-1.05); the chance to finish in 1.4 s
    # (60%) is what the stake weighs: 0.6 * 0.85 beats the majority's 0.10, so a still starts.
    index = one_feature(majority=0.10, accuracy=0.85)
    rng = random.Random(3)
    with_cpu = ServingGuards(index, window=256, min_calls=20, pool_min_calls=20, refresh=4)
    wall_only = ServingGuards(index, window=256, min_calls=20, pool_min_calls=20, refresh=4)
    for _ in range(300):
        for learn, cpu in ((with_cpu, True), (wall_only, False)):
            clock = CpuJitterClock({"a": rng.uniform(1.0, 1.05), "b": 50.0}, lambda: rng.random() < 0.4, 0.5)
            learn_clock = (lambda c=clock: c.cpu) if cpu else None
            index.select(1.0, 1.4, clock.compute, clock, serving_guards=learn, cpu_clock=learn_clock)
    with_cpu.check()
    assert with_cpu.guards(1.0)[0] <= 1.05 * TAIL_ROOM + 1e-9
    assert wall_only.guards(1.0)[0] > 1.4  # the wall clock's quartile is a preempted call
    assert 0.5 < with_cpu.finish_chance(0, 1.0, 1.4) < 0.7
    clock = CpuJitterClock({"a": 1.0, "b": 50.0}, lambda: False, 0.0)
    assert index.select(1.0, 1.4, clock.compute, clock, serving_guards=with_cpu).features == frozenset({"a"})


def test_a_first_slow_stretch_does_not_decide_the_band_the_fits_chance_weighs_as_min_calls_calls():
    # The band's first 20 calls of a were all preempted (1.3 s on the wall clock, 1.0 s of CPU):
    # none would have finished in 1.25 s. The guard (from the CPU) lets a start; the share of its
    # calls alone (0) would refuse it. The fit says a finishes in 1.25 s with a chance of about
    # 0.998 (guard 1.2 at the 0.99 quantile); weighed as 20 calls it halves the record's 0 to about
    # 0.5, and 0.5 * 0.85 beats the majority's 0.10: a starts, and the band keeps learning.
    index = one_feature(majority=0.10, accuracy=0.85, guard=1.2)
    learn = ServingGuards(index, window=256, min_calls=20, pool_min_calls=20, refresh=4)
    for _ in range(20):
        learn.observe(0, 1.0, 1.0, 1.3, cpu=1.0)
    learn.check()
    assert learn.guards(1.0)[0] <= 1.25 and learn.finish_chance(0, 1.0, 1.25) == 0.0
    assert learn.finish_chance(0, 1.0, 1.25, prior=0.998) == pytest.approx(20 * 0.998 / 40)
    alone = ServingGuards(index, window=256, min_calls=20, pool_min_calls=20, refresh=4, prior_calls=0)
    for _ in range(20):
        alone.observe(0, 1.0, 1.0, 1.3, cpu=1.0)
    assert alone.finish_chance(0, 1.0, 1.25, prior=0.998) == 0.0  # prior_calls=0: the calls alone
    assert alone.snapshot().prior_calls == 0
    with pytest.raises(ValueError, match="prior_calls"):
        ServingGuards(index, prior_calls=-1)
    clock = CpuJitterClock({"a": 1.0, "b": 50.0}, lambda: False, 0.0)
    choice = index.select(1.0, 1.25, clock.compute, clock, serving_guards=learn, cpu_clock=lambda: clock.cpu)
    assert choice.features == frozenset({"a"}) and clock.computed == ["a"]
    assert learn.seen(1.0)[0] == 21  # it learned from the start
    # A band that stays slow: a full window of such calls outweighs the fit (20 * 0.998 / 276,
    # about 0.07, and 0.07 * 0.85 < 0.10), and a is refused.
    for _ in range(260):  # a window (256) and a refresh's worth past the fast call
        learn.observe(0, 1.0, 1.0, 1.3, cpu=1.0)
    assert learn.finish_chance(0, 1.0, 1.25, prior=0.998) == pytest.approx(20 * 0.998 / 276)
    clock = CpuJitterClock({"a": 1.0, "b": 50.0}, lambda: False, 0.0)
    assert index.select(1.0, 1.25, clock.compute, clock, serving_guards=learn).features == frozenset()
    assert clock.computed == []


@settings(deadline=None, max_examples=300)
@given(st.lists(st.floats(1e-6, 50.0, allow_nan=False) | st.just(0.0), min_size=1, max_size=300),
       st.sampled_from([0.5, 0.75, 0.9, 0.95, 0.98, 0.99, 0.999, 1.0]) | st.floats(0.5, 1.0))
def test_the_learned_guards_quantiles_are_numpys_to_the_bit(values, q):
    """A learned guard is refreshed on the request path without numpy's quantile; it must give
    numpy's answers exactly, so that guards learn as they did."""
    import numpy as np

    from polydom.index.serving.guards import _sorted_median, sorted_quantile

    ordered = sorted(values)
    assert sorted_quantile(ordered, q) == float(np.quantile(np.asarray(values), q))
    assert _sorted_median(ordered) == float(np.median(np.asarray(values)))

    def old_robust_guard(ratios, quantile):  # the numpy version this replaced
        v = np.sort(np.fromiter(ratios, float))
        raw = float(np.quantile(v, quantile))
        if not (quantile >= 1.0 or len(v) < 2):
            raw = min(raw, float(v[-2]))
        if quantile >= 1.0 or len(v) < 4:
            return raw
        median = float(np.median(v))
        if not median > 0.0:
            return raw
        spread = max(float(np.quantile(v, 0.75)) / median, 1.0)
        from statistics import NormalDist
        modelled = median * spread ** (NormalDist().inv_cdf(quantile) / NormalDist().inv_cdf(0.75))
        return min(raw, TAIL_ROOM * modelled)

    assert robust_guard(values, q) == old_robust_guard(values, q)
