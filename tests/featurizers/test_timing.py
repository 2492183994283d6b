"""The timing harness, on real images and real features."""

import itertools

import numpy as np
import pytest
from skimage import data

from polydom.featurizers import Feature, MIN_SIDE, get_feature, measure_costs, resize_square
from polydom.index.fitting import evaluate_cost_curve, fit_cost_curve, quantile_per_size


@pytest.fixture(scope="module")
def images():
    return [data.camera(), data.astronaut(), data.coins() / 255.0]


class Counting:
    def __init__(self, function):
        self.function = function
        self.calls = 0

    def __call__(self, image):
        self.calls += 1
        return self.function(image)


def test_samples_for_every_feature_size_and_repeat(images):
    counter = Counting(get_feature("thumbnail").function)
    counted = Feature("counted", counter, "", 64)
    sides = (16, 32, 16)  # the repeated side is measured once
    result = measure_costs(
        ["size_meta", get_feature("lbp"), counted], images, sides, repeats=2, warmup=1
    )
    assert result.names == ("size_meta", "lbp", "counted")
    assert result.sides == (16, 32)
    np.testing.assert_array_equal(result.item_sizes, [256, 1024])
    assert counter.calls == len(images) * 2 * (1 + 2)
    for name in result.names:
        samples = result[name]
        assert len(samples) == len(images) * 2 * 2
        assert samples.sizes.dtype == np.int64 and samples.seconds.dtype == np.float64
        assert np.all(samples.seconds >= 0) and np.all(np.isfinite(samples.seconds))
        for size in (256, 1024):
            at_size = samples.sizes == size
            assert at_size.sum() == len(images) * 2
            assert sorted(set(samples.items[at_size])) == list(range(len(images)))


def test_cost_grows_with_item_size(images):
    # 64 times the pixels; the minimum is the sample least disturbed by load.
    result = measure_costs(["lbp"], images[:1], (16, 128), repeats=5)
    samples = result["lbp"]
    small = samples.seconds[samples.sizes == 16 * 16].min()
    large = samples.seconds[samples.sizes == 128 * 128].min()
    assert large > 3 * small


def test_measured_costs_fit_a_covering_curve(images):
    result = measure_costs(["intensity_hist", "fft_bands"], images, (16, 24, 32, 48), repeats=3)
    for name in result.names:
        samples = result[name]
        coefficients = fit_cost_curve(samples.sizes, samples.seconds, degree=2, quantile="max")
        assert np.all(coefficients >= 0)
        assert np.all(evaluate_cost_curve(coefficients, samples.sizes) >= samples.seconds)
        sizes, q95 = quantile_per_size(samples.sizes, samples.seconds, 0.95)
        fit95 = fit_cost_curve(samples.sizes, samples.seconds, degree=1)
        assert np.all(evaluate_cost_curve(fit95, sizes) >= q95)


def test_clock_is_used_for_every_timed_call(images):
    ticks = itertools.count()
    result = measure_costs(
        ["size_meta"], images[:2], (8, 12), repeats=3, warmup=2,
        clock=lambda: float(next(ticks)),
    )
    np.testing.assert_array_equal(result["size_meta"].seconds, np.ones(2 * 2 * 3))


def test_a_clock_going_backwards_is_refused(images):
    ticks = itertools.count(0, -1)
    with pytest.raises(ValueError, match="backwards"):
        measure_costs(["size_meta"], images[:1], (8,), clock=lambda: float(next(ticks)))


def test_progress_bar(images, capsys):
    measure_costs(["size_meta"], images[:2], (8, 16), repeats=1, progress=True)
    assert "4/4" in capsys.readouterr().err


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(features=[]), ValueError, "no features"),
        (dict(features=["nope"]), ValueError, "unknown feature"),
        (dict(images=[]), ValueError, "no images"),
        (dict(sides=()), ValueError, "no sides"),
        (dict(sides=(MIN_SIDE - 1,)), ValueError, f">= {MIN_SIDE}"),
        (dict(sides=(8.5,)), TypeError, "side must be an int"),
        (dict(repeats=0), ValueError, "repeats"),
        (dict(warmup=-1), ValueError, "warmup"),
        (dict(images=[np.zeros((9, 9)), np.zeros((9, 9, 2))]), ValueError, "item 1"),
    ],
)
def test_bad_arguments(kwargs, error, words):
    arguments = dict(features=["size_meta"], images=[np.zeros((9, 9))], sides=(8,))
    arguments.update(kwargs)
    features = arguments.pop("features")
    images = arguments.pop("images")
    sides = arguments.pop("sides")
    with pytest.raises(error, match=words):
        measure_costs(features, images, sides, **arguments)


def test_resize_square_keeps_dtype_family(images):
    camera, astronaut, coins = images
    out = resize_square(camera, 20)
    assert out.dtype == np.uint8 and out.shape == (20, 20)
    out = resize_square(astronaut, 20)
    assert out.dtype == np.uint8 and out.shape == (20, 20)
    out = resize_square(coins, 300)
    assert out.dtype == np.float64 and out.shape == (300, 300)
    assert out.min() >= 0 and out.max() <= 1
    assert resize_square(np.ones((9, 9), bool), 8).dtype == np.float64



def test_sizes_are_interleaved_and_wall_time_recorded_beside_cpu_time(images):
    from polydom.featurizers import Feature

    seen = []

    def spy(image):
        seen.append(image.shape[0])
        return np.zeros(1)

    ticks = iter(range(1000))
    m = measure_costs([Feature("spy", spy, "records sides", 1)], images[:2], (8, 16), repeats=1,
                      warmup=0, clock=lambda: float(next(ticks)), wall_clock=lambda: 0.5 * len(seen))
    assert seen == [8, 16, 8, 16]  # within each image, every size in turn
    samples = m["spy"]
    assert samples.wall_seconds is not None and np.all(samples.wall_seconds == 0.5)
    assert samples.cpu_wall_ratio() == pytest.approx(2.0)


def test_contended_timings_warn_with_numbers():
    from polydom.costs import CostMeasurementWarning, warn_if_contended
    from polydom.featurizers.timing import CostMeasurements, CostSamples

    sizes = np.repeat([64, 256], 8)
    cpu = np.full(16, 1e-3)
    quiet = CostSamples(sizes, cpu, np.zeros(16, dtype=np.int64), cpu * 1.05)
    busy = CostSamples(sizes, cpu, np.zeros(16, dtype=np.int64), cpu * 3.0)
    shaky = CostSamples(sizes, cpu * np.tile([1, 1, 1, 1, 3, 3, 3, 3], 2), np.zeros(16, dtype=np.int64), cpu)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_contended(CostMeasurements({"a": quiet}, (8, 16), 1, 0))
    with pytest.warns(CostMeasurementWarning, match=r"b: CPU/wall 0\.33.*c: timings spread 100%"):
        warn_if_contended(CostMeasurements({"a": quiet, "b": busy, "c": shaky}, (8, 16), 1, 0))
