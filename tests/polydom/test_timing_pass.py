"""The fit's timing pass: cost samples from the training extraction, sizes timed only where the
images lack them, within a cap; and the plain progress lines of a fit."""

import doctest
import io
import math

import numpy as np
import pytest

import polydom
from polydom.costs import measure as costs
from polydom.costs.measure import bin_sizes, costs_from_extraction, missing_sides, plan_timing
from polydom.classifier.extraction import extract_features
from polydom.featurizers import item_size, resolve_features
from polydom.featurizers.datasets import load_digits_images
from polydom.classifier.progress import ProgressLog


@pytest.fixture(scope="module")
def digits():
    images, labels, _ = load_digits_images(sides=(16, 24, 32), n_per_class=6, random_state=0)
    return images, np.asarray(labels)


def test_doctests():
    assert doctest.testmod(costs, raise_on_error=False).failed == 0


def test_bins_keep_few_sizes_and_group_many_by_a_size_each_bin_has():
    few = [64, 64, 256, 1024]
    assert bin_sizes(few).tolist() == [64.0, 64.0, 256.0, 1024.0]
    rng = np.random.default_rng(0)
    many = rng.integers(30_000, 4_000_000, size=500)
    binned = bin_sizes(many, bins=12)
    assert len(np.unique(binned)) <= 12
    # Every representative is the median of its members: a size of the data, inside their range.
    for value in np.unique(binned):
        members = many[binned == value]
        assert value == np.median(members) and members.min() <= value <= members.max()


@pytest.mark.parametrize("sizes", [[28 ** 2, 56 ** 2, 112 ** 2], [16 ** 2, 2400 ** 2], [100 ** 2] * 3 + [101 ** 2]])
def test_missing_sides_lie_inside_the_items_range_and_fill_its_gaps(sizes):
    sides = missing_sides(sizes, degree=2)
    lo, hi = math.sqrt(min(sizes)), math.sqrt(max(sizes))
    assert all(lo <= s <= hi for s in sides)  # never beyond the largest image
    every = sorted(set(np.sqrt(bin_sizes(sizes)).tolist()) | set(sides))
    if hi > lo * 1.05:
        assert len(every) >= 3
        assert all(b / a <= 2.0 + 0.05 for a, b in zip(every, every[1:]))


def test_a_plan_keeps_within_its_budget_but_never_below_what_the_degree_needs():
    sizes = np.array([28 ** 2] * 10 + [112 ** 2] * 10, dtype=float)
    per_image = sizes * 1e-6  # one microsecond per pixel
    roomy = plan_timing(sizes, per_image, degree=2, images=8, repeats=2, budget=math.inf)
    assert roomy.calls_per_side == 16 and roomy.sides
    tight = plan_timing(sizes, per_image, degree=2, images=8, repeats=2, budget=0.02)
    assert tight.estimate <= 0.02 + 1e-12 or tight.calls_per_side == 1
    assert tight.calls_per_side < roomy.calls_per_side
    starved = plan_timing(sizes, per_image, degree=2, images=8, repeats=2, budget=0.0)
    # Two distinct sizes cannot carry a quadratic: one side more is timed, once, whatever the cap.
    assert len(starved.sides) == 1 and starved.calls_per_side == 1
    asked = plan_timing(sizes, per_image, sides=(40, 60), budget=0.0)
    assert asked.sides == (40, 60)  # sides the caller named are timed


def test_curves_rest_on_the_extractions_own_calls(digits):
    images, _ = digits
    features = resolve_features(["intensity_hist", "edge_density"])
    matrix = extract_features(images, features, progress=False)
    sizes = np.array([item_size(im) for im in images])
    plan = plan_timing(sizes, matrix.cpu_seconds.sum(axis=1), degree=2, images=2, repeats=1)
    fits = costs_from_extraction(features, images, matrix, sizes, plan=plan, random_state=0)
    for j, (name, fit) in enumerate(fits.items()):
        # The extraction's calls first, one per image at its own size, then the added sides.
        assert np.array_equal(fit.seconds[: len(images)], np.maximum(matrix.cpu_seconds[:, j], 0))
        assert np.array_equal(fit.sizes[: len(images)], sizes)
        added = fit.sizes[len(images):]
        assert len(added) == len(plan.sides) * plan.calls_per_side
        assert set(np.sqrt(added).astype(int).tolist()) == set(plan.sides)
        assert fit.measured_range == (float(sizes.min()), float(sizes.max()))
        values = fit.curve_values(np.linspace(sizes.min(), sizes.max(), 50))
        assert np.all(values >= 0) and np.all(np.diff(values) >= -1e-15)


def test_a_fit_times_little_beyond_its_extraction_and_never_past_the_largest_image(digits):
    images, labels = digits
    clf = polydom.CostSensitiveClassifier(features=["intensity_hist", "thumbnail", "edge_density"], cv=2,
                                          random_state=0, progress=False).fit(images, labels)
    largest = max(item_size(im) for im in images)
    assert max(clf.timing_sides_) ** 2 <= largest
    for fit in clf.cost_fits_.values():
        assert fit.measured_range[1] <= largest
        assert len(fit.sizes) >= len(images)  # every training call is a sample


def test_progress_lines_come_at_an_interval_that_grows_with_the_fit():
    now = [0.0]
    out = io.StringIO()
    log = ProgressLog(stream=out, clock=lambda: now[0])
    report = log.counter("computing features", 100, "images")
    lines = []
    for done in range(1, 101):
        now[0] += 0.5
        report(done)
        lines.append(out.getvalue().count("\n"))
    text = out.getvalue().splitlines()
    assert text and all(line.startswith("polydom: computing features: ") for line in text)
    assert "about" in text[0] and "s left" in text[0]
    # 50 s in all: a line at least every max(2 s, a tenth of the time so far), so 10 to 25 lines.
    assert 5 <= len(text) <= 25
    quiet = ProgressLog(enabled=False, stream=out, clock=lambda: now[0])
    assert not quiet.due()


def test_a_fit_logs_every_step_when_progress_goes_to_a_log(digits, capsys):
    images, labels = digits
    polydom.CostSensitiveClassifier(features=["intensity_hist", "thumbnail", "edge_density", "lbp"], cv=2,
                                    random_state=0, progress=True).fit(images, labels)
    err = capsys.readouterr().err
    assert "polydom: computing 4 features of" in err
    assert "polydom: timing 4 features: the training images' own calls" in err
    assert "polydom: screened " in err and "fully in" in err


def test_training_lines_give_a_total_and_the_time_left_in_every_phase():
    from polydom.classifier.progress import TrainingProgress

    now = [0.0]
    out = io.StringIO()
    bar = TrainingProgress(True, 2**17, stream=out, every=1.0, clock=lambda: now[0])
    # A skyline search: the total is what its rounds asked for so far.
    bar.search_round(0, 36, 0)
    for done in range(1, 37):
        now[0] += 0.1
        bar(done)
    bar.search_round(1, 120, 36)
    for done in range(37, 100):
        now[0] += 0.1
        bar(done)
    lines = out.getvalue().splitlines()
    assert any("searching the skyline, round 1:" in line and "of 156 asked so far" in line
               and "s left in this round" in line for line in lines)
    # Finishing: each batch's size is the total, the time left is at the batch's own rate.
    bar.finish_batch(40)
    for done in range(10, 41, 10):
        now[0] += 2.0
        bar.finished(done)
    finishing = [line for line in out.getvalue().splitlines() if "could be served fully" in line]
    assert finishing and all("of 40 asked so far" in line for line in finishing)
    assert "about 6 s left in this batch" in finishing[0]  # 10 sets in 2 s, 30 to go


def test_rescoring_the_finalists_has_a_line_with_a_total_and_the_time_left():
    from polydom.classifier.progress import TrainingProgress

    now = [0.0]
    out = io.StringIO()
    bar = TrainingProgress(True, 64, stream=out, every=1.0, clock=lambda: now[0])
    bar.rescored(0, 40)
    for done in range(8, 41, 8):
        now[0] += 2.0
        bar.rescored(done, 40)
    lines = [line for line in out.getvalue().splitlines() if "again on further folds" in line]
    assert lines and "8 of 40" in lines[0] and "about 8 s left" in lines[0]  # 8 sets in 2 s, 32 to go


def test_a_cached_matrix_remembers_how_many_workers_computed_it(digits, tmp_path):
    images, _ = digits
    features = resolve_features(["intensity_hist", "thumbnail"])
    serial = extract_features(images, features, cache_dir=tmp_path / "a", progress=False)
    parallel = extract_features(images, features, n_jobs=2, cache_dir=tmp_path / "b", progress=False)
    assert (serial.workers, parallel.workers) == (1, 2) and not serial.cached
    again = [extract_features(images, features, cache_dir=tmp_path / d, progress=False, n_jobs=n)
             for d, n in (("a", 2), ("b", None))]
    assert [(m.cached, m.workers) for m in again] == [(True, 1), (True, 2)]  # as computed, not as asked now
    # A cache written before the count was kept reads as unknown.
    (path,) = (tmp_path / "a").glob("features-*.npz")
    with np.load(path) as data:
        kept = {key: data[key] for key in data.files if key != "workers"}
    np.savez(path, **kept)
    old = extract_features(images, features, cache_dir=tmp_path / "a", progress=False)
    assert old.cached and old.workers is None
    np.testing.assert_array_equal(old.X, serial.X)


@pytest.mark.parametrize("first, then, sampled", [(2, None, True), (None, 2, False)])
def test_the_timing_pass_samples_again_when_the_matrix_was_computed_in_parallel(digits, tmp_path, capsys,
                                                                                 first, then, sampled):
    """Whether the training calls shared the machine is the matrix's record, not this fit's
    ``n_jobs``: a refit on a cached matrix (another timing setting, so the costs are measured
    again) times a sample one by one only where the matrix came from parallel workers."""
    images, labels = digits
    names = ["intensity_hist", "thumbnail", "edge_density", "lbp"]
    polydom.CostSensitiveClassifier(features=names, cv=2, random_state=0, cache_dir=tmp_path, n_jobs=first,
                                    progress=True).fit(images, labels)
    capsys.readouterr()
    polydom.CostSensitiveClassifier(features=names, cv=2, random_state=0, cache_dir=tmp_path, n_jobs=then,
                                    timing=polydom.Timing(repeats=4), progress=True).fit(images, labels)
    err = capsys.readouterr().err
    assert "polydom: computing 4 features of" in err and "timing 4 features" in err
    assert ("one after another (the workers shared the machine)" in err) is sampled
