"""The timing harness, on real images and real features."""

import itertools
import os
import warnings

import numpy as np
import pytest
from skimage import data

from polydom.costs.measure import warn_if_contended
from polydom.featurizers import Feature, MIN_SIDE, get_feature, measure_costs, resize_square
from polydom.featurizers.timing import CostMeasurements, CostMeasurementWarning, CostSamples, check_timing
from polydom.index.costs.fitting import evaluate_cost_curve, fit_cost_curve, quantile_per_size


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
    assert counter.calls == len(images) * 2 * (1 + 2 * 2)  # a warm-up round, two primed ones
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
        fit95 = fit_cost_curve(samples.sizes, samples.seconds, degree=1, quantile=0.95)
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
    out = resize_square(astronaut, 20)  # colour stays colour: features are timed on what they convert
    assert out.dtype == np.uint8 and out.shape == (20, 20, 3)
    out = resize_square(coins, 300)
    assert out.dtype == np.float64 and out.shape == (300, 300)
    assert out.min() >= 0 and out.max() <= 1
    assert resize_square(np.ones((9, 9), bool), 8).dtype == np.float64


class Spy:
    """A feature function recording which image it was called on, in order."""

    def __init__(self, name, log):
        self.name, self.log = name, log

    def __call__(self, image):
        self.log.append((self.name, image.shape[0], int(np.asarray(image).flat[0])))
        return np.zeros(1)


def test_rounds_interleave_features_images_and_sizes():
    log = []
    images = [np.full((40, 40), k, dtype=np.uint8) for k in range(3)]  # told apart by their pixels
    features = [Feature(name, Spy(name, log), "", 1) for name in ("a", "b", "c")]
    m = measure_costs(features, images, (8, 16), repeats=4, warmup=1, prime=False, warn=False)
    per_round = 3 * 3 * 2
    assert len(log) == 5 * per_round
    rounds = [log[k : k + per_round] for k in range(0, len(log), per_round)]
    for calls in rounds:  # every round calls every feature once on every image and size
        assert sorted(calls) == sorted((f, s, k) for f in "abc" for s in (8, 16) for k in range(3))
        for start in range(0, per_round, 3):  # all features on one resized image, then the next
            assert len({call[1:] for call in calls[start : start + 3]}) == 1
    assert all(x[0] != y[0] for x, y in zip(log, log[1:]))  # never the same feature twice in a row
    pair_orders = {tuple(call[1:] for call in calls[::3]) for calls in rounds}
    feature_orders = {tuple(call[0] for call in calls[:3]) for calls in rounds}
    assert len(pair_orders) > 1 and len(feature_orders) > 1  # shuffled, not one fixed order
    again = []
    measure_costs([Feature(n, Spy(n, again), "", 1) for n in "abc"], images, (8, 16), repeats=4, prime=False,
                  warn=False)
    assert again == log  # the shuffles are seeded
    assert len(m["a"]) == 3 * 2 * 4


def test_each_timed_call_is_primed_by_an_untimed_one_whose_time_is_kept():
    # A fake CPU clock that the feature advances: 5 s on its first call after another feature
    # ran (cold caches), 1 s when it runs twice in a row.
    now = [0.0]
    last = [None]

    def charging(name):
        def function(image):
            now[0] += 1.0 if last[0] == name else 5.0
            last[0] = name
            return np.zeros(1)
        return Feature(name, function, "", 1)

    m = measure_costs([charging("a"), charging("b")], [np.zeros((9, 9))] * 2, (8, 9), repeats=3, warmup=0,
                      clock=lambda: now[0], warn=False)
    for name in "ab":
        np.testing.assert_array_equal(m[name].seconds, np.ones(12))
        np.testing.assert_array_equal(m[name].cold_seconds, np.full(12, 5.0))
        assert m[name].cold_ratio() == 5.0
    assert m.check().feature_cold_ratio == {"a": 5.0, "b": 5.0}
    unprimed = measure_costs([charging("a"), charging("b")], [np.zeros((9, 9))] * 2, (8, 9), repeats=3,
                             warmup=0, clock=lambda: now[0], prime=False, warn=False)
    assert unprimed["a"].cold_seconds is None and np.isnan(unprimed["a"].cold_ratio())
    assert np.all(unprimed["a"].seconds >= 1) and np.any(unprimed["a"].seconds == 5)


def test_wall_time_is_recorded_beside_the_cpu_clock():
    cpu_ticks = itertools.count()
    wall_ticks = itertools.count(0, 4)
    m = measure_costs(["size_meta"], [np.zeros((9, 9))], (8, 9), repeats=2, warmup=0, pin=False, warn=False,
                      clock=lambda: float(next(cpu_ticks)), wall_clock=lambda: float(next(wall_ticks)))
    samples = m["size_meta"]
    np.testing.assert_array_equal(samples.seconds, np.ones(4))
    np.testing.assert_array_equal(samples.wall_seconds, np.full(4, 4.0))
    assert samples.cpu_wall_ratio() == pytest.approx(0.25)
    assert m.check().cpu_wall_ratio == pytest.approx(0.25)
    assert measure_costs(["size_meta"], [np.zeros((9, 9))], (8,), wall_clock=None, warn=False)[
        "size_meta"].wall_seconds is None


def test_a_busy_wall_clock_warns_with_the_numbers():
    # Each call takes one CPU tick and three wall ticks: the thread was on a core a third of the time.
    cpu_ticks = itertools.count()
    wall_ticks = itertools.count(0, 3)
    with pytest.warns(CostMeasurementWarning, match=r"CPU/wall 0\.33 over all calls \(below 0\.8\); "
                                                     r"size_meta: CPU/wall 0\.33"):
        measure_costs(["size_meta"], [np.zeros((9, 9))], (8, 9), repeats=2, pin=False,
                      clock=lambda: float(next(cpu_ticks)), wall_clock=lambda: float(next(wall_ticks)))


def test_other_threads_of_the_process_are_reported():
    # Over the timed round the thread's clock is read 14 times (1 s apart; four reads per primed
    # call) and the process's twice (30 s apart): 17 s ran on other threads, over 14 s of wall
    # time (two reads per timed call).
    cpu_ticks = itertools.count()
    process_ticks = itertools.count(0, 30)
    wall_ticks = itertools.count(0, 2)
    with pytest.warns(CostMeasurementWarning, match=r"other threads of this process used 1\.21 cores"):
        m = measure_costs(["size_meta"], [np.zeros((9, 9))], (8,), repeats=3, warmup=0, pin=False,
                          clock=lambda: float(next(cpu_ticks)), wall_clock=lambda: float(next(wall_ticks)),
                          process_clock=lambda: float(next(process_ticks)))
    assert m.other_threads_seconds == 17 and m.elapsed == 14


def _samples(cpu, wall=None, items=None):
    cpu = np.asarray(cpu, dtype=float)
    sizes = np.repeat([64, 256], len(cpu) // 2)
    items = np.zeros(len(cpu), dtype=np.int64) if items is None else np.asarray(items)
    return CostSamples(sizes, cpu, items, None if wall is None else np.asarray(wall, dtype=float))


def test_check_timing_names_each_problem_with_its_number():
    cpu = np.full(8, 1e-3)
    quiet = _samples(cpu, cpu * 1.02)
    busy = _samples(cpu, cpu * 2.5)
    shaky = _samples(cpu * [1, 1.5, 1, 1.5, 1, 1.5, 1, 1.5], cpu * [1, 1.5, 1, 1.5, 1, 1.5, 1, 1.5])
    ok = check_timing(CostMeasurements({"a": quiet}, (8, 16), 4, 1, elapsed=1.0))
    assert ok.ok and ok.message() == "" and ok.cpu_wall_ratio == pytest.approx(1 / 1.02)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ok.warn()
    bad = check_timing(CostMeasurements({"a": quiet, "b": busy, "c": shaky}, (8, 16), 4, 1,
                                        elapsed=2.0, other_threads_seconds=0.5))
    assert not bad.ok
    assert bad.feature_cpu_wall["b"] == pytest.approx(0.4)
    assert bad.feature_spread["c"] == pytest.approx(0.4)  # quartiles 1 and 1.5 around a median of 1.25
    assert bad.feature_spread["a"] == 0
    assert bad.other_threads == pytest.approx(0.25)
    assert bad.cpu_wall_ratio == pytest.approx((8 + 8 + 10) / (8.16 + 20 + 10))  # sums, in ms
    assert bad.problems == (
        "CPU/wall 0.68 over all calls (below 0.8)",
        "b: CPU/wall 0.40",
        "c: repeats spread 40% (interquartile range over median; above 25%)",
        "other threads of this process used 0.25 cores while timing (above 0.1): our own workers or a "
        "thread pool competed",
    )
    with pytest.warns(CostMeasurementWarning, match=r"b: CPU/wall 0\.40; c: repeats spread 40%"):
        bad.warn()
    # Thresholds are parameters: a stricter one flags the quiet feature too.
    assert check_timing(CostMeasurements({"a": quiet}, (8, 16), 4, 1), min_cpu_wall_ratio=0.99).problems


def test_repeat_spread_ignores_real_differences_between_items():
    # Item 1 costs twice item 0 every time: no noise, so no spread; repeats that disagree are.
    steady = _samples([1, 1, 2, 2, 1, 1, 2, 2], items=[0, 0, 1, 1] * 2)
    assert steady.repeat_spread() == 0
    noisy = _samples([1, 2, 2, 4, 1, 2, 2, 4], items=[0, 0, 1, 1] * 2)
    assert noisy.repeat_spread() == pytest.approx((1.75 - 1.25) / 1.5)
    single = _samples([1, 2, 3, 4], items=[0, 1, 2, 3])
    assert np.isnan(single.repeat_spread())  # nothing was repeated
    assert np.isnan(single.cpu_wall_ratio())  # no wall times recorded


def test_warn_if_contended_is_the_check_as_a_warning():
    cpu = np.full(8, 1e-3)
    m = CostMeasurements({"hog": _samples(cpu, cpu * 3)}, (8, 16), 4, 1)
    with pytest.warns(CostMeasurementWarning, match=r"hog: CPU/wall 0\.33") as caught:
        warn_if_contended(m)
    assert caught[0].filename == __file__  # the warning points at the caller's line


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no thread affinity on this OS")
def test_the_timing_thread_is_pinned_then_released():
    before = os.sched_getaffinity(0)
    seen = []
    spy = Feature("spy", lambda image: seen.append(os.sched_getaffinity(0)) or np.zeros(1), "", 1)
    m = measure_costs([spy], [np.zeros((9, 9))], (8,), repeats=2, warn=False)
    assert m.pinned_cpu in before and all(s == {m.pinned_cpu} for s in seen)
    assert os.sched_getaffinity(0) == before
    seen.clear()
    assert measure_costs([spy], [np.zeros((9, 9))], (8,), pin=False, warn=False).pinned_cpu is None
    assert all(s == before for s in seen)
