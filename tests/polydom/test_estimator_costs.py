"""The estimator's building blocks on real images: measured cost curves, the feature matrix and
its cache, the cross-validated black box."""

import functools
import itertools
import json
import math

import numpy as np
import pytest

from polydom.featurizers import REGISTRY, resolve_features
from polydom.featurizers.datasets import load_digits_images
from polydom.classifier.blackbox import FeatureSetLearner, default_estimator, make_splits
from polydom.costs import measure as costs
from polydom.costs.measure import CostFit, CostMeasurementWarning, default_timing_sides, format_expression, measure_feature_costs
from polydom.classifier.extraction import extract_features
from polydom.index import CostCurve


@pytest.fixture(scope="module")
def digits():
    images, labels, _ = load_digits_images(sides=(16, 32), n_per_class=4, random_state=0)
    return images, labels


@pytest.mark.parametrize("quantile", [0.5, 0.95, "max"])
def test_cost_fits_are_nonnegative_monotone_and_follow_the_quantile(digits, quantile):
    images, _ = digits
    features = resolve_features(["intensity_hist", "edge_density", "lbp"])
    fits = measure_feature_costs(features, images[:2], (8, 12, 16, 24, 32), repeats=2, quantile=quantile,
                                 progress=False)
    assert list(fits) == [f.name for f in features]  # grey images: no grey step of its own (a cast)
    for name, fit in fits.items():
        assert len(fit.sizes) == len(fit.seconds) == len(fit.items) == len(fit.wall_seconds) == 5 * 2 * 2
        assert set(fit.sizes.tolist()) == {64, 144, 256, 576, 1024}
        assert fit.measured_range == (64.0, 1024.0)
        assert set(fit.items.tolist()) == {0, 1}
        assert np.all(fit.wall_seconds > 0)
        # A quadratic kept non-decreasing on [0, inf) has non-negative coefficients.
        assert all(c >= 0 for c in fit.curve.coefficients)
        sizes, targets = fit.targets()
        if quantile == 0.5:
            # A central quantile is tracked, not covered: the curve follows the medians.
            assert np.all(np.abs(fit.curve_values(sizes) / targets - 1) < 1.0)
        else:
            assert np.all(fit.curve_values(sizes) >= targets)
            assert np.all([fit.curve(s) >= t for s, t in zip(sizes, targets)])  # Horner, as lookups do
        if quantile == "max":
            assert np.all(fit.curve_values(fit.sizes) >= fit.seconds)
        values = fit.curve_values(np.linspace(0, 4096, 100))
        assert np.all(np.diff(values) >= 0)


def test_cost_fits_keep_the_domain_and_round_trip_through_json(digits):
    images, _ = digits
    features = resolve_features(["intensity_hist", "lbp"])
    fits = measure_feature_costs(features, images[:2], (8, 12, 16, 24, 32), repeats=2, degree=2,
                                 domain=(0, 2048), progress=False)
    for name, fit in fits.items():
        assert fit.domain == (0.0, 2048.0)
        grid = np.linspace(0, 2048, 400)  # non-decreasing on the domain, even where it bends down
        assert np.all(np.diff(fit.curve_values(grid)) >= 0)
        data = json.loads(json.dumps(fit.to_json(), allow_nan=False))
        assert data["measured_range"] == [64.0, 1024.0]
        back = CostFit.from_json(name, data)
        assert back.curve == fit.curve and back.domain == fit.domain and back.quantile == fit.quantile
        assert fit.cold_seconds.shape == fit.seconds.shape and np.all(fit.cold_seconds > 0)
        for field in ("sizes", "seconds", "items", "wall_seconds", "cold_seconds"):
            np.testing.assert_array_equal(getattr(back, field), getattr(fit, field))
        np.testing.assert_array_equal(back.targets()[1], fit.targets()[1])
    unbounded = measure_feature_costs(features[:1], images[:1], (8, 12, 16), repeats=1, progress=False)
    data = unbounded["intensity_hist"].to_json()
    assert data["domain"] == [0.0, None]  # JSON has no infinity
    assert CostFit.from_json("intensity_hist", data).domain == (0.0, math.inf)


def test_fits_saved_before_wall_times_and_items_still_load():
    old = {"coefficients": [1e-4, 2e-8], "sizes": [64, 64, 256, 256], "seconds": [1e-4, 3e-4, 2e-4, 4e-4],
           "quantile": 0.5}
    fit = CostFit.from_json("old", old)
    assert fit.items is None and fit.wall_seconds is None and fit.domain == (0.0, math.inf)
    assert fit.measured_range == (64.0, 256.0)
    np.testing.assert_allclose(fit.targets()[1], [2e-4, 3e-4])
    assert np.isnan(fit.samples().cpu_wall_ratio())


def test_a_contended_timing_warns_with_the_numbers(digits, monkeypatch):
    # Every timed call takes one tick of CPU time and four of wall time.
    images, _ = digits
    cpu, wall = itertools.count(), itertools.count(0, 4)
    monkeypatch.setattr(costs, "measure_costs", functools.partial(
        costs.measure_costs, clock=lambda: float(next(cpu)), wall_clock=lambda: float(next(wall))))
    with pytest.warns(CostMeasurementWarning, match=r"CPU/wall 0\.25 over all calls.*intensity_hist: CPU/wall 0\.25") as seen:
        fits = measure_feature_costs(resolve_features(["intensity_hist"]), images[:1], (8, 12, 16), repeats=1,
                                     progress=False)
    assert seen[0].filename == __file__  # the warning names the line that asked for the fits
    assert fits["intensity_hist"].samples().cpu_wall_ratio() == pytest.approx(0.25)


def test_format_expression():
    assert format_expression(CostCurve([2.5e-4, 0, 1e-9])) == "0.00025 + 1e-09*n^2"
    assert format_expression(CostCurve([0.0, 3e-7])) == "3e-07*n"
    assert format_expression(CostCurve([0.0])) == "0"


def test_default_timing_sides_cover_the_sizes_with_at_least_five():
    sides = default_timing_sides([16 * 16, 64 * 64])
    assert len(sides) >= 5 and sides[0] <= 16 and sides[-1] >= 64
    assert list(sides) == sorted(set(sides))


def test_feature_matrix_columns_times_and_cache(digits, tmp_path):
    images, _ = digits
    features = resolve_features(["intensity_hist", "thumbnail", "hog"])
    m = extract_features(images[:10], features, cache_dir=tmp_path, progress=False)
    assert not m.cached and m.names == ("intensity_hist", "thumbnail", "hog")
    assert m.X.shape == (10, 16 + 64 + 144) and m.seconds.shape == (10, 3) and np.all(m.seconds > 0)
    # On colour images the greyscale step they share is an item: computed and timed once per
    # image, no columns of its own, and the features' vectors are the same.
    colour = [np.repeat(im[..., None], 3, axis=2) for im in images[:10]]
    c = extract_features(colour, features, progress=False)
    assert c.names == ("grey", "intensity_hist", "thumbnail", "hog") and c.columns["grey"] == slice(0, 0)
    assert c.seconds.shape == (10, 4) and np.all(c.seconds > 0)
    np.testing.assert_allclose(c.X, m.X, atol=1e-12)
    for i in (0, 7):
        for f in features:
            np.testing.assert_array_equal(m.X[i, m.columns[f.name]], f(images[i]))
    again = extract_features(images[:10], features, cache_dir=tmp_path, progress=False)
    assert again.cached
    np.testing.assert_array_equal(again.X, m.X)
    np.testing.assert_array_equal(again.seconds, m.seconds)
    changed = list(images[:10])
    changed[4] = changed[4].copy()
    changed[4][0, 0] ^= 1
    assert not extract_features(changed, features, cache_dir=tmp_path, progress=False).cached
    assert not extract_features(images[:10], features[:2], cache_dir=tmp_path, progress=False).cached


def test_black_box_slices_columns_and_models_the_empty_set(digits):
    images, labels = digits
    features = resolve_features(["intensity_hist", "thumbnail"])
    m = extract_features(images, features, progress=False)
    groups = np.arange(len(images)) // 2
    splits = make_splits(2, labels, groups, random_state=0)
    for train, test in splits:  # renderings of one picture never straddle the folds
        assert not set(groups[train]) & set(groups[test])
    learner = FeatureSetLearner(m.X, labels, m.columns, default_estimator(0), splits)
    np.testing.assert_array_equal(learner.columns_of({"thumbnail"}), np.arange(16, 80))
    np.testing.assert_array_equal(learner.columns_of({"thumbnail", "intensity_hist"}), np.arange(80))
    empty = learner(frozenset())
    assert type(empty.model).__name__ == "DummyClassifier" and empty.model.strategy == "most_frequent"
    both = learner({"thumbnail", "intensity_hist"})
    assert both.model.n_features_in_ == 80 and 0 <= both.accuracy <= 1
    assert learner({"intensity_hist", "thumbnail"}) is both and learner.fits == 2
    assert both.accuracy > empty.accuracy
    with pytest.raises(ValueError, match="unknown features"):
        learner({"gabor"})
    assert REGISTRY["thumbnail"].dimension == 64
