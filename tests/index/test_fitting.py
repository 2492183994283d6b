"""Least-area non-negative cost curves above measured quantiles."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polydom.index.fitting import evaluate_cost_curve, fit_cost_curve, quantile_per_size


def _power_sum(coefficients, sizes):
    sizes = np.asarray(sizes, dtype=float)
    return sum(c * sizes**j for j, c in enumerate(coefficients))


def _area(coefficients, low, high):
    return sum(c * (high ** (j + 1) - low ** (j + 1)) / (j + 1) for j, c in enumerate(coefficients))


@st.composite
def timings(draw):
    """Positive timings at 1..7 distinct sizes spanning many magnitudes."""
    degree = draw(st.integers(0, 3))
    sizes = draw(
        st.lists(st.integers(1, 10**6), min_size=degree + 1, max_size=7, unique=True)
    )
    all_sizes, all_seconds = [], []
    for size in sizes:
        exponents = draw(st.lists(st.floats(-6.0, 1.0), min_size=1, max_size=5))
        all_sizes += [size] * len(exponents)
        all_seconds += [10.0**e for e in exponents]
    quantile = draw(st.sampled_from([0.0, 0.5, 0.9, 0.95, 1.0, "max"]))
    return np.array(all_sizes), np.array(all_seconds), degree, quantile


@settings(deadline=None, max_examples=50)
@given(timings())
def test_fit_is_nonnegative_monotone_and_covers_the_quantile(case):
    sizes, seconds, degree, quantile = case
    coefficients = fit_cost_curve(sizes, seconds, degree=degree, quantile=quantile, mode="cover")
    assert coefficients.shape == (degree + 1,)
    assert np.all(np.isfinite(coefficients)) and np.all(coefficients >= 0)

    unique, targets = quantile_per_size(sizes, seconds, quantile)
    assert np.all(evaluate_cost_curve(coefficients, unique) >= targets)
    assert np.all(_power_sum(coefficients, unique) >= targets)
    if quantile in ("max", 1.0):
        assert np.all(evaluate_cost_curve(coefficients, sizes) >= seconds)

    grid = np.linspace(0, 2 * unique.max(), 200)
    assert np.all(np.diff(evaluate_cost_curve(coefficients, grid)) >= 0)

    # Least area: no simpler feasible curve (c * n^j alone) does better.
    low, high = unique.min(), unique.max()
    fitted = _area(coefficients, low, high)
    for j in range(degree + 1):
        single = np.zeros(degree + 1)
        single[j] = np.max(targets / unique.astype(float) ** j)
        assert fitted <= _area(single, low, high) * (1 + 1e-6) + 1e-300


def test_max_covers_every_sample():
    rng = np.random.default_rng(3)
    sizes = np.repeat([64, 256, 1024, 4096, 16384], 20)
    seconds = 1e-5 + 3e-9 * sizes * rng.lognormal(0, 0.5, sizes.size)
    for degree in (1, 2, 3):
        coefficients = fit_cost_curve(sizes, seconds, degree=degree, quantile="max")
        assert np.all(evaluate_cost_curve(coefficients, sizes) >= seconds)
        q95 = fit_cost_curve(sizes, seconds, degree=degree)
        assert _area(q95, 64, 16384) <= _area(coefficients, 64, 16384)


def test_line_through_the_data_is_recovered():
    sizes = np.array([256, 1024, 4096])
    seconds = 1e-3 + 2e-6 * sizes
    coefficients = fit_cost_curve(sizes, seconds, degree=1, quantile="max")
    np.testing.assert_allclose(coefficients, [1e-3, 2e-6], rtol=1e-6)


def test_quadratic_through_endpoints_and_midpoint_is_recovered():
    # Simpson's rule is exact for quadratics, so any quadratic that is >= the
    # data at a, (a + b) / 2 and b has at least the data's area.
    sizes = np.array([1e4, 5.05e5, 1e6])
    truth = np.array([2e-6, 3e-8, 4e-12])
    seconds = evaluate_cost_curve(truth, sizes)
    coefficients = fit_cost_curve(sizes, seconds, degree=2, quantile="max")
    np.testing.assert_allclose(coefficients, truth, rtol=1e-5)
    assert np.all(evaluate_cost_curve(coefficients, sizes) >= seconds)


def test_extreme_magnitudes_stay_exact():
    sizes = np.array([1, 10, 1000, 10**5, 10**6])
    seconds = np.array([1e-6, 1.2e-6, 5e-5, 0.3, 10.0])
    for degree in range(4):
        coefficients = fit_cost_curve(sizes, seconds, degree=degree, quantile="max")
        assert np.all(coefficients >= 0)
        assert np.all(evaluate_cost_curve(coefficients, sizes) >= seconds)


def test_degree_zero_is_the_largest_quantile():
    coefficients = fit_cost_curve([5, 5, 9], [1.0, 3.0, 2.0], degree=0, quantile="max")
    np.testing.assert_array_equal(coefficients, [3.0])


def test_size_zero_and_zero_times():
    coefficients = fit_cost_curve([0, 10, 20], [0.5, 0.5, 1.0], degree=1, quantile="max")
    assert evaluate_cost_curve(coefficients, [0.0])[0] >= 0.5
    np.testing.assert_array_equal(fit_cost_curve([1, 2, 3], [0, 0, 0]), np.zeros(3))


def test_quantile_per_size_matches_numpy():
    sizes = [30, 10, 30, 10, 20, 30]
    seconds = [3.0, 1.0, 5.0, 2.0, 7.0, 4.0]
    unique, q = quantile_per_size(sizes, seconds, 0.5)
    np.testing.assert_array_equal(unique, [10, 20, 30])
    np.testing.assert_allclose(q, [1.5, 7.0, 4.0])
    _, top = quantile_per_size(sizes, seconds, "max")
    np.testing.assert_array_equal(top, [2.0, 7.0, 5.0])
    _, one = quantile_per_size(sizes, seconds, 1.0)
    np.testing.assert_array_equal(one, top)


@pytest.mark.parametrize(
    "sizes, seconds, kwargs, words",
    [
        ([1, 2, np.nan], [1, 1, 1], {}, "sizes contains NaN"),
        ([1, 2, 3], [1, np.inf, 1], {}, "seconds contains NaN or infinite"),
        ([1, 2, 3], [1, -1, 1], {}, "seconds must be >= 0"),
        ([-1, 2, 3], [1, 1, 1], {}, "sizes must be >= 0"),
        ([1, 2, 3], [1, 1], {}, "differ in length"),
        ([], [], {}, "no samples"),
        ([[1, 2, 3]], [[1, 1, 1]], {}, "1-D"),
        (["a", "b", "c"], [1, 1, 1], {}, "real numbers"),
        ([1, 1, 2, 2], [1, 1, 1, 1], {}, "at least 3 distinct sizes, got 2"),
        ([1, 2, 3], [1, 1, 1], {"degree": -1}, "degree"),
        ([1, 2, 3], [1, 1, 1], {"degree": 1.5}, "degree"),
        ([1, 2, 3], [1, 1, 1], {"quantile": 1.5}, "quantile"),
        ([1, 2, 3], [1, 1, 1], {"quantile": "median"}, "quantile"),
    ],
)
def test_bad_input_gives_clear_errors(sizes, seconds, kwargs, words):
    with pytest.raises(ValueError, match=words):
        fit_cost_curve(sizes, seconds, **kwargs)


def test_the_tracking_fit_follows_concave_times_far_closer_than_the_cover():
    sides = np.array([16, 24, 32, 48, 64, 96, 128])
    sizes = np.repeat(sides ** 2, 5).astype(float)
    rng = np.random.default_rng(0)
    truth = lambda n: 2e-4 + 3e-5 * np.sqrt(n)  # noqa: E731 - concave in the pixel count
    seconds = truth(sizes) * rng.uniform(0.95, 1.05, len(sizes))
    unique = np.unique(sizes)
    track = evaluate_cost_curve(fit_cost_curve(sizes, seconds, quantile=0.5), unique) / truth(unique)
    cover = evaluate_cost_curve(fit_cost_curve(sizes, seconds, quantile=0.95), unique) / truth(unique)
    assert np.all(np.abs(track - 1) < 0.3) and np.abs(track - 1).max() < np.abs(cover - 1).max() / 2
    assert np.all(cover >= 1.0 - 0.05)  # the cover is at or above the 0.95 quantile everywhere
    coefficients = fit_cost_curve(sizes, seconds, quantile=0.5)
    assert np.all(coefficients >= 0)  # still non-decreasing, so the sweep's curves stay monotone
    with pytest.raises(ValueError, match="mode"):
        fit_cost_curve(sizes, seconds, mode="median")
