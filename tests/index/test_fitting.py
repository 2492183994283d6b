"""Cost curves fitted to measured quantiles: tracked or covered, never decreasing where they serve."""

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from polydom.index.costs.fitting import evaluate_cost_curve, fit_cost_curve, quantile_per_size, shape_range


def _power_sum(coefficients, sizes):
    sizes = np.asarray(sizes, dtype=float)
    return sum(c * sizes**j for j, c in enumerate(coefficients))


def _lowest(coefficients, lo, hi):
    """Least value of the polynomial on [lo, hi] (hi may be inf), found independently of the
    module: numpy's roots of the derivative, and the sign of the leading term at infinity."""
    c = np.trim_zeros(np.asarray(coefficients, dtype=float), "b")
    if len(c) <= 1:
        return c[0] if len(c) else 0.0
    if math.isinf(hi) and c[-1] < 0:
        return -math.inf
    points = [lo] + ([hi] if math.isfinite(hi) else [])
    roots = np.roots(np.polyder(c[::-1]))
    points += [r.real for r in roots if abs(r.imag) < 1e-6 * max(1, abs(r.real)) and lo < r.real < hi]
    return min(float(np.polyval(c[::-1], p)) for p in points)


def assert_shape(coefficients, lo, hi):
    """Non-negative and non-decreasing on [lo, hi], up to rounding of the values involved."""
    c = np.asarray(coefficients, dtype=float)
    slope = c[1:] * np.arange(1, len(c))
    scale = np.abs(slope).sum() * max(1.0, min(hi, 1e9)) ** max(len(slope) - 1, 0) + 1e-300
    assert _lowest(slope, lo, hi) >= -1e-9 * scale, (c, lo, hi)
    assert float(evaluate_cost_curve(c, lo)) >= -1e-12 * (np.abs(c).sum() + 1e-300), (c, lo)


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


domains = st.one_of(
    st.just((0.0, math.inf)),
    st.tuples(st.integers(0, 10**6), st.integers(1, 10**7)).filter(lambda d: d[0] < d[1]),
)


@settings(deadline=None, max_examples=60)
@given(timings(), domains, st.sampled_from(["track", "cover"]))
# Found by hypothesis: HiGHS's simplex ends with an unknown status on these badly scaled rows.
@example((np.array([6, 4, 5, 3, 297154, 1, 2]), np.array([1e-3, 1, 1, 10, 1e-2, 1, 1]), 3, 0.0), (1, 2), "track")
def test_every_fit_is_nonnegative_and_nondecreasing_on_its_shape_range(case, domain, mode):
    sizes, seconds, degree, quantile = case
    coefficients = fit_cost_curve(sizes, seconds, degree=degree, quantile=quantile, mode=mode, domain=domain)
    assert coefficients.shape == (degree + 1,) and np.all(np.isfinite(coefficients))
    lo, hi = shape_range(sizes, domain)
    assert lo == min(domain[0], sizes.min()) and hi == max(domain[1], sizes.max())
    assert_shape(coefficients, lo, hi)
    if mode == "cover":
        unique, targets = quantile_per_size(sizes, seconds, quantile)
        assert np.all(evaluate_cost_curve(coefficients, unique) >= targets)


@settings(deadline=None, max_examples=50)
@given(timings())
def test_fit_is_nonnegative_monotone_and_covers_the_quantile(case):
    sizes, seconds, degree, quantile = case
    coefficients = fit_cost_curve(sizes, seconds, degree=degree, quantile=quantile, mode="cover")
    assert coefficients.shape == (degree + 1,)
    assert np.all(np.isfinite(coefficients))
    assert_shape(coefficients, 0.0, math.inf)
    if degree <= 2:  # on [0, inf) a quadratic cannot bend down, so its coefficients are >= 0
        assert np.all(coefficients >= 0)

    unique, targets = quantile_per_size(sizes, seconds, quantile)
    assert np.all(evaluate_cost_curve(coefficients, unique) >= targets)
    assert np.all(_power_sum(coefficients, unique) >= targets)
    if quantile in ("max", 1.0):
        assert np.all(evaluate_cost_curve(coefficients, sizes) >= seconds)

    grid = np.linspace(0, 2 * unique.max(), 200)
    values = evaluate_cost_curve(coefficients, grid)
    assert np.all(np.diff(values) >= -1e-12 * np.abs(values).max())

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
        q95 = fit_cost_curve(sizes, seconds, degree=degree, quantile=0.95)
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
        assert_shape(coefficients, 0.0, math.inf)
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


def _concave_samples(truth, sides=(16, 24, 32, 48, 64, 96, 128), per_size=5, noise=0.05, seed=0):
    sizes = np.repeat(np.asarray(sides) ** 2, per_size).astype(float)
    rng = np.random.default_rng(seed)
    return sizes, truth(sizes) * rng.uniform(1 - noise, 1 + noise, len(sizes))


def _worst_error(coefficients, sizes, truth):
    unique = np.unique(sizes)
    return float(np.max(np.abs(evaluate_cost_curve(coefficients, unique) / truth(unique) - 1)))


@pytest.mark.parametrize("truth, cubic_error, bounded_error", [
    (lambda n: 2e-4 + 3e-5 * np.sqrt(n), 0.12, 0.23),  # concave throughout
    (lambda n: 1e-3 * np.log1p(n / 64.0), 0.32, 0.39),  # steeper still at the small end
    (lambda n: 5e-3 * (1 - np.exp(-n / 2000.0)) + 1e-6 * n, 0.10, 0.25),  # a plateau, then a line
])
def test_concave_times_are_tracked_by_curves_that_may_bend_down(truth, cubic_error, bounded_error):
    sizes, seconds = _concave_samples(truth)  # 64x from the smallest size to the largest
    top = sizes.max()
    cubic = fit_cost_curve(sizes, seconds, degree=3)  # on [0, inf): concave here, convex beyond
    bounded = fit_cost_curve(sizes, seconds, degree=2, domain=(0, top))  # a quadratic bending down
    convex = fit_cost_curve(sizes, seconds, degree=2)  # on [0, inf) a quadratic cannot bend down
    assert np.all(convex >= 0)
    assert _worst_error(cubic, sizes, truth) < cubic_error
    assert _worst_error(bounded, sizes, truth) < bounded_error
    assert _worst_error(cubic, sizes, truth) < _worst_error(convex, sizes, truth)
    assert _worst_error(bounded, sizes, truth) < _worst_error(convex, sizes, truth)
    assert cubic[2] < 0 and bounded[2] < 0  # they do bend down ...
    assert_shape(cubic, 0.0, math.inf)  # ... without ever decreasing where they serve
    assert_shape(bounded, 0.0, top)
    grid = np.linspace(0, top, 2001)
    assert np.all(np.diff(evaluate_cost_curve(bounded, grid)) >= 0)


def test_the_cover_of_concave_times_is_looser_than_the_track():
    truth = lambda n: 2e-4 + 3e-5 * np.sqrt(n)  # noqa: E731
    sizes, seconds = _concave_samples(truth)
    track = fit_cost_curve(sizes, seconds, degree=3)
    cover = fit_cost_curve(sizes, seconds, degree=3, quantile=0.95)
    unique, q95 = quantile_per_size(sizes, seconds, 0.95)
    assert np.all(evaluate_cost_curve(cover, unique) >= q95)
    assert _worst_error(track, sizes, truth) < _worst_error(cover, sizes, truth)


def test_the_default_is_the_tracked_median():
    # The medians lie on a line; the 0.95 quantiles (all 9 ms) do not.
    sizes = np.repeat([100, 200, 300, 400], 3)
    seconds = np.array([1, 2, 9, 2, 4, 9, 3, 6, 9, 4, 8, 9], dtype=float) * 1e-3
    np.testing.assert_array_equal(quantile_per_size(sizes, seconds)[1], [2e-3, 4e-3, 6e-3, 8e-3])
    coefficients = fit_cost_curve(sizes, seconds, degree=1)
    np.testing.assert_allclose(coefficients, [0.0, 2e-5], atol=1e-12)
    np.testing.assert_array_equal(
        fit_cost_curve(sizes, seconds, degree=1),
        fit_cost_curve(sizes, seconds, degree=1, quantile=0.5, mode="track"),
    )


def test_repeats_of_one_item_count_once_by_their_fastest():
    # Two items at each size; item 1's second repeat was interrupted (10x slower).
    sizes = np.repeat([100, 200, 300], 4)
    items = np.tile([0, 0, 1, 1], 3)
    seconds = np.tile([1.0, 1.2, 2.0, 20.0], 3) * np.repeat([1, 2, 3], 4)
    _, per_item = quantile_per_size(sizes, seconds, 0.5, items=items)
    np.testing.assert_allclose(per_item, [1.5, 3.0, 4.5])  # median of the fastest repeats 1 and 2
    _, every = quantile_per_size(sizes, seconds, 0.5)
    np.testing.assert_allclose(every, [1.6, 3.2, 4.8])
    _, worst = quantile_per_size(sizes, seconds, "max", items=items)
    np.testing.assert_allclose(worst, [20.0, 40.0, 60.0])  # the worst case still sees every sample
    fitted = fit_cost_curve(sizes, seconds, degree=1, items=items)
    np.testing.assert_allclose(evaluate_cost_curve(fitted, [100, 200, 300]), per_item, rtol=1e-6)
    with pytest.raises(ValueError, match="items must be integers, one per sample"):
        quantile_per_size(sizes, seconds, items=items[:-1])


@pytest.mark.parametrize("domain", [(5, 5), (-1, 10), (0, float("nan")), (math.inf, math.inf), "ab", 3])
def test_a_bad_domain_is_refused(domain):
    with pytest.raises(ValueError, match="domain"):
        fit_cost_curve([1, 2, 3], [1.0, 2.0, 3.0], domain=domain)


def test_a_bad_mode_is_refused():
    with pytest.raises(ValueError, match="mode must be 'track' or 'cover'"):
        fit_cost_curve([1, 2, 3], [1.0, 2.0, 3.0], mode="median")
