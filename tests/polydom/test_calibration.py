"""Serving calibration of cost curves: the overhead a request pays, and the guard from the tail."""

import numpy as np
import pytest

from polydom.costs.calibration import GUARD_CALLS_PER_SIZE, calibrate_fit, carry_calibration, guard_table
from polydom.costs.measure import CostFit
from polydom.index.costs.curve import CostCurve
from polydom.index.costs.fitting import evaluate_cost_curve


def timing_fit(coefficients=(1e-4, 2e-8)):
    sizes = np.repeat([100, 400, 1600, 6400], 3)
    return CostFit("f", CostCurve(coefficients), sizes, evaluate_cost_curve(coefficients, sizes), 0.5,
                   np.tile([0, 1, 2], 4))


def serving_calls(fit, overhead, noise, seed=0):
    rng = np.random.default_rng(seed)
    sizes = np.repeat([100, 900, 2500, 6400], 250).astype(float)
    base = evaluate_cost_curve(fit.curve.coefficients, sizes) + overhead
    return sizes, base * rng.lognormal(0.0, noise, len(sizes))


def test_a_constant_overhead_is_recovered_and_the_guard_covers_the_tail():
    fit = timing_fit()
    sizes, seconds = serving_calls(fit, 5e-5, 0.1)
    out = calibrate_fit(fit, sizes, seconds, quantile=0.99)
    assert out.timing_curve == fit.curve
    assert out.overhead[0] == pytest.approx(5e-5, rel=0.2) and out.overhead[1] >= 0.0
    predicted = evaluate_cost_curve(out.curve.coefficients, sizes)
    assert np.mean(seconds > predicted) == pytest.approx(0.5, abs=0.1)  # the curve is the median again
    assert out.guard_ratio > 1.0 and np.mean(seconds > out.guard_ratio * predicted) <= 0.011
    # Non-negative and non-decreasing: the overhead's coefficients are >= 0.
    assert all(c >= 0 for c in out.overhead)


def test_calls_faster_than_the_curve_add_nothing_and_the_guard_is_at_least_one():
    fit = timing_fit()
    sizes, seconds = serving_calls(fit, 0.0, 0.0)
    out = calibrate_fit(fit, sizes, seconds * 0.5, quantile=0.99)
    assert out.overhead == (0.0, 0.0) and out.curve == fit.curve and out.guard_ratio == 1.0


def test_no_guard_quantile_means_guard_one_and_unusable_calls_change_nothing():
    fit = timing_fit()
    sizes, seconds = serving_calls(fit, 5e-5, 0.3)
    assert calibrate_fit(fit, sizes, seconds, quantile=None).guard_ratio == 1.0
    assert calibrate_fit(fit, sizes, np.full(len(sizes), np.nan)) is fit


def test_calibrating_twice_starts_from_the_timing_curve():
    fit = timing_fit()
    sizes, seconds = serving_calls(fit, 5e-5, 0.1)
    once = calibrate_fit(fit, sizes, seconds)
    assert calibrate_fit(once, sizes, seconds) == once


def test_the_calibration_round_trips_through_json_and_carries_to_new_timings():
    fit = timing_fit()
    sizes, seconds = serving_calls(fit, 5e-5, 0.1)
    out = calibrate_fit(fit, sizes, seconds)
    back = CostFit.from_json("f", out.to_json())
    assert back.curve == out.curve and back.timing_curve == out.timing_curve
    assert back.overhead == out.overhead and back.guard_ratio == out.guard_ratio and back.guard_ratio_by_size == out.guard_ratio_by_size
    # A machine twice as slow: the carried overhead doubles with the intrinsic cost.
    slower = timing_fit((2e-4, 4e-8))
    carried = carry_calibration(out, slower)
    assert carried.guard_ratio == out.guard_ratio and carried.timing_curve == slower.curve
    assert carried.guard_ratio_by_size == out.guard_ratio_by_size
    assert carried.overhead[0] == pytest.approx(2 * out.overhead[0])


def test_each_size_with_enough_calls_gets_the_guard_its_own_tail_needs():
    fit = timing_fit()
    sizes, seconds = serving_calls(fit, 5e-5, 0.05)
    small = sizes == 100
    seconds[small] *= np.random.default_rng(1).lognormal(0.0, 0.3, small.sum())  # the smallest size jitters most
    out = calibrate_fit(fit, sizes, seconds, quantile=0.95)
    guards = dict(out.guard_ratio_by_size)
    assert sorted(guards) == [100.0, 900.0, 2500.0, 6400.0]
    assert guards[100.0] > out.guard_ratio > guards[6400.0] >= 1.0
    predicted = evaluate_cost_curve(out.curve.coefficients, sizes)
    # The guard over all sizes leaves the smallest size's tail uncovered; its own covers it.
    assert np.mean(seconds[small] > out.guard_ratio * predicted[small]) > 0.1
    assert np.mean(seconds[small] > guards[100.0] * predicted[small]) <= 0.06  # a 95th percentile of 250 calls
    # A size with too few calls gets no guard of its own.
    few = np.r_[sizes, np.full(GUARD_CALLS_PER_SIZE - 1, 20000.0)]
    more = np.r_[seconds, np.full(GUARD_CALLS_PER_SIZE - 1, 1e-3)]
    assert 20000.0 not in dict(calibrate_fit(fit, few, more).guard_ratio_by_size)
    # In index params: one row per size, features in index order, a missing size at its largest guard.
    table = guard_table({"f": out.guard_ratio_by_size, "g": ((900.0, 1.2),), "h": None}, ["h", "f", "g"])
    assert table["cost_guard_sizes"] == [100.0, 900.0, 2500.0, 6400.0]
    assert table["cost_guard_by_size"][0] == [1.0, guards[100.0], 1.2]
    assert table["cost_guard_by_size"][1] == [1.0, guards[900.0], 1.2]


def test_with_cpu_times_the_guard_ignores_preemptions_that_only_wall_times_carry():
    fit = timing_fit()
    sizes, cpu = serving_calls(fit, 5e-5, 0.1)
    wall = cpu.copy()
    wall[::10] += 5e-3  # one call in ten preempted for 5 ms: wall time only
    by_wall = calibrate_fit(fit, sizes, wall, quantile=0.95)
    by_cpu = calibrate_fit(fit, sizes, wall, quantile=0.95, cpu_seconds=cpu)
    assert by_wall.guard_ratio > 5.0
    assert 1.0 < by_cpu.guard_ratio < 1.5  # the lognormal spread of the feature's own work, 95th over median
    assert by_cpu.curve == by_wall.curve  # the median overhead comes from wall times either way


def test_after_a_parallel_extraction_a_sample_is_served_again_one_by_one():
    from polydom.costs.calibration import calibrate_fits
    from polydom.classifier.extraction import extract_features
    from polydom.featurizers import resolve_features
    from polydom.featurizers.datasets import load_digits_images

    images, _, _ = load_digits_images(sides=(16, 32), n_per_class=2, random_state=0)
    features = resolve_features(["intensity_hist", "thumbnail"])
    matrix = extract_features(images, features)
    sizes = np.array([im.shape[0] * im.shape[1] for im in images])
    fits = {f.name: timing_fit((1e-9,)) for f in features}  # curves far below any real call
    served = calibrate_fits(fits, images, features, matrix, sizes, parallel=True, count=6, random_state=0)
    reused = calibrate_fits(fits, images, features, matrix, sizes, parallel=False)
    for name in fits:
        for out in (served[name], reused[name]):
            assert out.overhead[0] > 1e-6 and out.guard_ratio >= 1.0  # raised to what real calls take
            assert out.timing_curve == fits[name].curve
