"""Several labels per image: one walk answers every label, sets ranked by the label-weighted
accuracy, and a multilabel classifier saved, loaded in a fresh process, refreshed and served as a
single-label one is."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.multiclass import OneVsRestClassifier

import polydom
from polydom.classifier.blackbox import FeatureSetLearner, make_splits
from polydom.classifier.learners import default_learners
from polydom.classifier.multilabel import (
    LabelWeightedAccuracy,
    fold_strata,
    is_multilabel_target,
    label_matrix,
    label_weight_vector,
)
from polydom.featurizers import REGISTRY, Feature
from polydom.featurizers.datasets import load_digits_images

NAMES = ["intensity_hist", "thumbnail", "edge_density"]


def policies_of(digits_labels):
    """Three labels per digit: even, small (< 5), round (0, 6, 8, 9)."""
    d = np.asarray(digits_labels)
    return np.stack([d % 2 == 0, d < 5, np.isin(d, [0, 6, 8, 9])], axis=1).astype(int)


@pytest.fixture(scope="module")
def data():
    images, digits, _ = load_digits_images(sides=(16, 24), n_per_class=6, random_state=0)
    return images, policies_of(digits)


@pytest.fixture(scope="module")
def fitted(data, fast_params):
    images, Y = data
    return polydom.CostSensitiveClassifier(features=NAMES, **fast_params).fit(images, Y)


# ------------------------------------------------------------------ reading labels


def test_labels_are_read_as_an_indicator_matrix_or_as_label_sets():
    Y, labels = label_matrix(np.array([[1, 0], [0, 1], [1, 1]]), 3)
    assert Y.tolist() == [[1, 0], [0, 1], [1, 1]] and labels.tolist() == [0, 1]
    Y, labels = label_matrix([{"faces"}, {"text", "faces"}, set()], 3)
    assert labels.tolist() == ["faces", "text"] and Y.tolist() == [[1, 0], [1, 1], [0, 0]]
    # Read over a fitted classifier's labels, in its column order.
    Y, _ = label_matrix([("text",), ()], 2, labels=np.array(["faces", "spam", "text"]))
    assert Y.tolist() == [[0, 0, 1], [0, 0, 0]]
    assert is_multilabel_target([[0, 1], [1, 0]]) and is_multilabel_target([{"a"}, set()])
    assert not is_multilabel_target([0, 1, 1]) and not is_multilabel_target(np.array(["a", "b"]))


@pytest.mark.parametrize("y, message", [
    (np.array([[0, 2], [1, 0]]), "0 and 1 only.*1-D array"),
    (np.array([[0, 1]]), "1 rows but there are 2"),
    ([set(), set()], "all empty"),
    ([{"a"}, "b"], "y\\[1\\]"),
])
def test_bad_multilabel_targets_get_one_clear_error(y, message):
    with pytest.raises(polydom.PolydomError, match=message):
        label_matrix(y, 2)


def test_unknown_labels_and_wrong_widths_are_refused_against_a_fitted_label_list():
    labels = np.array(["faces", "text"])
    with pytest.raises(polydom.PolydomError, match="not fitted with"):
        label_matrix([{"spam"}], 1, labels=labels)
    with pytest.raises(polydom.PolydomError, match="3 label columns"):
        label_matrix(np.zeros((1, 3), dtype=int), 1, labels=labels)


def test_label_weights_are_normalised_and_checked():
    labels = np.array(["a", "b", "c"])
    assert label_weight_vector(None, labels).tolist() == pytest.approx([1 / 3] * 3)
    assert label_weight_vector([2, 1, 1], labels).tolist() == pytest.approx([0.5, 0.25, 0.25])
    assert label_weight_vector({"b": 1.0}, labels).tolist() == [0.0, 1.0, 0.0]
    for bad in ([1, 1], [-1, 1, 1], [0, 0, 0], {"z": 1.0}):
        with pytest.raises(polydom.PolydomError):
            label_weight_vector(bad, labels)


def test_fold_strata_pool_rare_label_combinations():
    Y = np.array([[1, 0]] * 6 + [[0, 1]] * 5 + [[1, 1]] * 1)
    strata = fold_strata(Y, 3)
    assert len(np.unique(strata)) == 2  # the lone [1, 1] joins the largest stratum
    assert all(np.sum(strata == s) >= 3 for s in np.unique(strata))


# ------------------------------------------------------------------ the score that ranks sets


def test_a_sets_score_is_the_label_weighted_accuracy_of_per_label_models_on_the_shared_folds(data):
    """Brute force: one binary model per label on each fold, scored label by label by hand."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    Y = np.stack([X[:, 0] > 0, X[:, 1] + 0.5 * rng.normal(size=60) > 0, rng.random(60) < 0.3], axis=1).astype(int)
    columns = {"a": slice(0, 2), "b": slice(2, 4)}
    splits = make_splits(3, fold_strata(Y, 3), random_state=0)
    weights = np.array([0.5, 0.3, 0.2])
    learners = [(name, OneVsRestClassifier(est)) for name, est in default_learners()[:1]]
    learner = FeatureSetLearner(X, Y, columns, learners, splits, scoring=LabelWeightedAccuracy(weights))
    got = learner(["a"]).accuracy
    expected = []
    for train, test in splits:
        per_label = []
        for label in range(3):
            model = clone(default_learners()[0][1]).fit(X[train][:, :2], Y[train, label])
            per_label.append(np.mean(model.predict(X[test][:, :2]) == Y[test, label]))
        expected.append(float(np.dot(weights, per_label)))
    assert got == pytest.approx(np.mean(expected), abs=1e-12)


def test_label_weights_choose_what_the_index_ranks_by(data, fast_params):
    """Weighing one label alone makes the empty set's score that label's majority share, and
    equal weights the mean of the three labels' majority shares."""
    images, Y = data
    majority = np.maximum(Y.mean(axis=0), 1 - Y.mean(axis=0))
    for weights, expected in (([1, 0, 0], majority[0]), (None, majority.mean())):
        clf = polydom.CostSensitiveClassifier(
            features=NAMES[:1], selection=polydom.Selection(label_weights=weights), **fast_params).fit(images, Y)
        assert clf.index_.lookup(256, 0.0).accuracy == pytest.approx(expected, abs=1e-9)


# ------------------------------------------------------------------ one walk, every label


def test_predict_returns_one_row_per_image_and_one_column_per_label(fitted, data):
    images, Y = data
    assert fitted.classes_.tolist() == [0, 1, 2]
    predicted = fitted.predict(images[:7])
    assert predicted.shape == (7, 3) and set(np.unique(predicted)) <= {0, 1}
    proba = fitted.predict_proba(images[:7])
    assert proba.shape == (7, 3) and ((proba >= 0) & (proba <= 1)).all()
    # With every feature computed the answers are the full set's model's.
    full = fitted.explain(images[:7], budget=None)
    assert all(e.label.shape == (3,) for e in full)
    assert 0.0 <= fitted.score(images, Y) <= 1.0
    assert fitted.score(images, Y) > fitted.score(images, Y, budget=0.0)  # features help


def test_no_budget_answers_each_label_by_its_training_majority(fitted, data):
    images, Y = data
    majority = (Y.mean(axis=0) > 0.5).astype(int)
    np.testing.assert_array_equal(fitted.predict(images[:5], budget=0.0), np.tile(majority, (5, 1)))
    np.testing.assert_allclose(fitted.predict_proba(images[:2], budget=0.0), np.tile(Y.mean(axis=0), (2, 1)))


def test_label_sets_fit_and_answer_over_their_names(data, fast_params):
    images, Y = data
    names = np.array(["even", "small", "round"])
    sets = [set(names[row.astype(bool)]) for row in Y]
    clf = polydom.CostSensitiveClassifier(features=NAMES[:2], **fast_params).fit(images, sets)
    assert clf.classes_.tolist() == ["even", "round", "small"]
    assert clf.predict(images[:3]).shape == (3, 3)
    assert 0.0 <= clf.score(images, sets) <= 1.0


def test_one_walk_computes_each_feature_once_for_every_label(data, fast_params):
    images, Y = data

    class Count:
        def __init__(self, function):
            self.function, self.calls = function, 0

        def __call__(self, image):
            self.calls += 1
            return self.function(image)

    counters = {n: Count(REGISTRY[n].function) for n in NAMES}
    features = [Feature(f"counted_{n}", counters[n], dimension=REGISTRY[n].dimension) for n in NAMES]
    clf = polydom.CostSensitiveClassifier(features=features, **fast_params).fit(images, Y)
    for c in counters.values():
        c.calls = 0
    served = clf.explain(images[:10], budget=None)
    assert sum(c.calls for c in counters.values()) == sum(len(e.computed) for e in served)
    assert all(len(set(e.computed)) == len(e.computed) for e in served)  # each feature once per image
    assert all(e.label.shape == (3,) for e in served)


def test_the_batch_planner_and_the_stream_budget_serve_label_rows(fitted, data):
    images, _ = data
    rows = fitted.predict(images[:8], total_budget=0.05)
    assert rows.shape == (8, 3)
    proba = fitted.predict_proba(images[:8], total_budget=0.05)
    assert proba.shape == (8, 3)
    stream = polydom.StreamBudget(fitted.index_, mean_budget=1e-3, sizes=[256, 576])
    choice = stream.choose(256)
    assert np.asarray(choice.model.predict(np.zeros((1, sum(
        fitted.feature_columns_[n].stop - fitted.feature_columns_[n].start for n in choice.features))))).shape == (1, 3)


def test_cascades_are_refused_with_several_labels(data, fast_params):
    images, Y = data
    with pytest.raises(polydom.PolydomError, match="cascade applies to one label"):
        polydom.CostSensitiveClassifier(features=NAMES[:1], cascade=polydom.Cascade(), **fast_params).fit(images, Y)


# ------------------------------------------------------------------ saved, loaded, refreshed, served


def test_a_multilabel_classifier_saved_and_loaded_in_a_fresh_process_serves_as_before(fitted, data, tmp_path,
                                                                                      subprocess_env):
    images, _ = data
    path = tmp_path / "policies"
    fitted.save(path)
    sample = np.stack([im for im in images if im.shape == images[0].shape][:12])
    np.save(tmp_path / "images.npy", sample)
    expected = {str(budget): fitted.server().predict(list(sample), budget=budget).tolist() for budget in (None, 0.0)}
    expected_proba = fitted.predict_proba(list(sample), budget=None).round(10).tolist()
    code = textwrap.dedent(f"""
        import json, numpy as np, polydom
        clf = polydom.CostSensitiveClassifier.load({str(path)!r})
        images = list(np.load({str(tmp_path / 'images.npy')!r}))
        server = clf.server()
        out = {{str(b): server.predict(images, budget=b).tolist() for b in (None, 0.0)}}
        print(json.dumps({{"answers": out, "proba": clf.predict_proba(images, budget=None).round(10).tolist(),
                          "classes": clf.classes_.tolist()}}))
    """)
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120,
                          env=subprocess_env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["answers"] == expected
    assert got["classes"] == [0, 1, 2]
    np.testing.assert_allclose(got["proba"], expected_proba, atol=1e-9)


def test_a_loaded_multilabel_classifier_refreshes_to_a_new_fit(data, fast_params, tmp_path):
    images, Y = data
    path = tmp_path / "clf"
    first = polydom.CostSensitiveClassifier(features=NAMES[:1], **fast_params).fit(images, Y)
    first.save(path)
    live = polydom.CostSensitiveClassifier.load(path)
    second = polydom.CostSensitiveClassifier(features=NAMES[:2], **fast_params).fit(images, 1 - Y)
    second.save(path)
    assert live.refresh()
    np.testing.assert_array_equal(live.predict(images[:6], budget=None), second.predict(images[:6], budget=None))
    assert live.feature_names_ == second.feature_names_
