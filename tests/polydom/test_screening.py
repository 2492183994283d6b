"""Screening: sets are scored on a cheap whole draw first and trained fully only while they could
be served (DAUB's stopping rule on the cost-accuracy skyline)."""

import math

import numpy as np
import pytest

import polydom
from polydom.classifier.blackbox import FeatureSetLearner, make_splits
from polydom.classifier.extraction import extract_features
from polydom.featurizers import resolve_features
from polydom.featurizers.datasets import load_digits_images
from polydom.index import CostCurve
from polydom.index.build import RISE_QUANTILE, SCREEN_Z, rise_allowance
from polydom.classifier.pipeline import learner_estimator

FEATURES = ["intensity_hist", "thumbnail", "fft_bands", "edge_density", "lbp", "hog"]
# Per-feature cost curves (seconds, a + b*n): fixed, so the test is about training alone.
COSTS = {"intensity_hist": (1e-5, 1e-8), "thumbnail": (2e-5, 5e-9), "fft_bands": (3e-5, 2e-8),
         "edge_density": (5e-5, 3e-8), "lbp": (1e-4, 6e-8), "hog": (2e-4, 4e-8)}


@pytest.fixture(scope="module")
def data():
    images, labels, _ = load_digits_images(sides=(16, 32), n_per_class=15, random_state=1)
    matrix = extract_features(images, resolve_features(FEATURES), progress=False)
    return matrix, np.asarray(labels)


def learner(data, screening: bool):
    matrix, y = data
    splits = make_splits(3, y, random_state=0)
    return FeatureSetLearner(matrix.X, y, matrix.columns, learner_estimator(None, 0), splits,
                             screen_splits=make_splits(2, y, random_state=1) if screening else None)


def build(black_box):
    costs = {name: CostCurve(list(ab)) for name, ab in COSTS.items()}
    return polydom.build(costs, black_box, alpha=1.0, scores="measured")


@pytest.fixture(scope="module")
def screened(data):
    box = learner(data, screening=True)
    return box, build(box)


@pytest.fixture(scope="module")
def full(data):
    box = learner(data, screening=False)
    return box, build(box)


def test_stats_count_the_whole_lattice_and_screening_saves_full_fits(screened, full):
    _, index = screened
    stats = index.stats
    assert stats["fully_trained"] + stats["partly_trained"] + stats["not_trained"] == 2 ** len(FEATURES)
    assert 0 < stats["fully_trained"] < 2 ** len(FEATURES) and stats["partly_trained"] > 0
    assert full[1].stats["partly_trained"] == 0 and full[1].stats["fully_trained"] == len(full[1].measured_scores)


def test_every_set_the_index_can_serve_was_trained_fully(screened):
    box, index = screened
    served = set(index.candidates)
    for chain in index.chains.values():
        served.update(polydom.index.serving.anytime.chain_prefixes(chain))
    for m in served:
        features = index.space.frozenset(m)
        assert features in box.finished, sorted(features)
        assert box.cache[features].model is not None
        assert index.models[m] is not None


def test_no_set_left_screened_could_have_reached_the_skyline(screened):
    # Brute force over sizes and budgets: a screened set's bound (its screening score, plus the
    # rise nine in ten finished sets stayed within, plus SCREEN_Z standard errors) never beats
    # the best finished set it can afford at any point where it is itself affordable.
    box, index = screened
    space = index.space
    screening = index.exploration.accuracy  # every explored set's screening score
    finished = index.measured_scores
    rises = [finished[m] - screening[m] for m in finished if m in screening]
    gain = max(float(np.quantile(rises, RISE_QUANTILE)), 0.0)
    names = list(space.names)

    def cost(m, n):
        return sum(COSTS[f][0] + COSTS[f][1] * n for f in space.frozenset(m))

    left = [m for m in screening if m not in finished]
    assert left
    for n in np.geomspace(16, 4096, 12):
        for m in left:
            bound = min(1.0, screening[m] + gain + SCREEN_Z * box.cache[space.frozenset(m)].std_error)
            c = cost(m, n)
            best = max(a for t, a in finished.items() if cost(t, n) <= c * (1 + 1e-12))
            assert best >= bound - 1e-12, (sorted(space.frozenset(m)), n, best, bound)
    assert names == FEATURES


def test_screened_index_serves_as_well_as_a_full_build_within_noise(screened, full):
    box, index = screened
    full_box, full_index = full
    for n in (256, 1024):
        for budget in (3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1.0):
            ours, theirs = index.lookup(n, budget), full_index.lookup(n, budget)
            # The screened choice's score on the full folds, against the full build's choice.
            ours_full = full_box(frozenset(ours.features))
            noise = 2 * max(ours_full.std_error or 0.0, theirs.std_error or 0.0)
            assert ours_full.accuracy >= theirs.accuracy - noise, (n, budget, ours.features, theirs.features)
            assert ours.cost <= budget * (1 + 1e-9)


def test_the_learner_race_decides_on_the_whole_screening_draw(screened):
    box, _ = screened
    assert box.race["contested"] > 0
    for features, result in box.cache.items():
        if result.info and result.info.get("stage") == "screened":
            assert len(result.info["folds"]) == 2  # both folds of the draw


def test_a_classifier_fit_screens_by_default_and_reports_it(data):
    images, labels, _ = load_digits_images(sides=(16, 32), n_per_class=8, random_state=2)
    clf = polydom.CostSensitiveClassifier(features=FEATURES[:4], cv=3, random_state=0, progress=False)
    clf.fit(images, labels)
    stats = clf.index_.stats
    assert stats["fully_trained"] + stats["partly_trained"] + stats["not_trained"] == 16
    assert stats["screened"] >= stats["fully_trained"]
    # Greedy backends train every set they walk fully.
    greedy = polydom.CostSensitiveClassifier(features=FEATURES[:4], cv=3, random_state=0, progress=False,
                                             selection=polydom.Selection(backend="greedy")).fit(images, labels)
    assert all(model is not None for model in greedy.index_.models.values())
    assert math.isfinite(clf.score(images, labels))


def test_the_bound_allows_the_rise_nine_in_ten_finished_sets_stayed_within():
    assert rise_allowance([]) == 0.0
    assert rise_allowance([-0.2, -0.1]) == 0.0  # a fall allows no fall
    rises = [0.01] * 18 + [0.02, 0.5]  # one outlier: the largest rise would be 0.5
    allowance = rise_allowance(rises)
    assert allowance == pytest.approx(float(np.quantile(rises, RISE_QUANTILE)))
    assert 0.01 <= allowance < 0.5
    # It does not grow with the number of sets that show the same spread of rises.
    many = rise_allowance(np.tile(rises, 50))
    assert many == pytest.approx(allowance)
