"""scikit-learn's estimator checks that apply to a classifier of images, and image versions of the rest.

``check_estimator`` itself runs nothing here: the classifier declares ``two_d_array=False`` (its
input is a sequence of images) and scikit-learn then skips every check. So the checks are run one
by one. Those in ``SKIPPED`` fit or predict on a tabular ``(n_samples, n_features)`` matrix of
random floats, which this classifier refuses by design (a 2-D array is one image passed without
its list); the contracts they guard are checked below on real images instead.
"""

import joblib
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.utils import estimator_checks
from sklearn.utils.validation import check_is_fitted

import polydom
from polydom.featurizers.datasets import load_digits_images

#: Checks that need no data, or only call an unfitted estimator: run as scikit-learn wrote them.
APPLICABLE = [
    "check_estimator_cloneable",
    "check_estimator_tags_renamed",
    "check_valid_tag_types",
    "check_estimator_repr",
    "check_no_attributes_set_in_init",
    "check_do_not_raise_errors_in_init_or_set_params",
    "check_mixin_order",
    "check_parameters_default_constructible",
    "check_get_params_invariance",
    "check_set_params",
    "check_estimators_unfitted",
]

#: Checks that feed a tabular matrix, and where their contract is checked instead.
SKIPPED = {
    "check_fit_score_takes_y": "fit(X, y) and score(X, y) signatures: test_score_takes_labels_and_budget",
    "check_estimators_fit_returns_self": "test_fit_returns_self_and_keeps_parameters",
    "check_estimators_overwrite_params": "test_fit_returns_self_and_keeps_parameters",
    "check_dont_overwrite_parameters": "test_fit_adds_only_trailing_underscore_attributes",
    "check_fit_check_is_fitted": "test_check_is_fitted_before_and_after_fit",
    "check_dict_unchanged": "test_predicting_changes_no_attribute",
    "check_fit_idempotent": "test_refitting_gives_the_same_answers",
    "check_readonly_memmap_input": "test_read_only_images_are_served",
    "check_n_features_in_after_fitting": "images have no n_features_in_; each feature's length is checked instead",
    "check_positive_only_tag_during_fit": "pixel ranges are validated per dtype by featurizers.validate_image",
    "check_classifiers_train": "accuracy on real images: test_estimator.py",
    "check_methods_sample_order_invariance": "items are served independently: test_predict_is_per_item",
    "check_methods_subset_invariance": "items are served independently: test_predict_is_per_item",
}


@pytest.mark.parametrize("check", APPLICABLE)
@pytest.mark.parametrize("estimator", [None, LogisticRegression()], ids=["default-learner", "with-predict_proba"])
def test_sklearn_check(check, estimator):
    getattr(estimator_checks, check)("CostSensitiveClassifier", polydom.CostSensitiveClassifier(learners=estimator))


def test_every_skipped_check_exists():
    # A check renamed or removed upstream should be noticed, not silently skipped.
    assert all(hasattr(estimator_checks, name) for name in [*APPLICABLE, *SKIPPED])


@pytest.fixture(scope="module")
def digits():
    images, labels, _ = load_digits_images(sides=(16, 24), n_per_class=3, random_state=0)
    return images, labels


@pytest.fixture(scope="module")
def fitted(digits, fast_params):
    images, labels = digits
    return polydom.CostSensitiveClassifier(features=["intensity_hist", "thumbnail"], **fast_params).fit(images, labels)


def test_fit_returns_self_and_keeps_parameters(digits, fast_params):
    images, labels = digits
    clf = polydom.CostSensitiveClassifier(features=["thumbnail"], **fast_params)
    before = joblib.hash(clf.get_params(deep=True))
    assert clf.fit(images, labels) is clf
    assert joblib.hash(clf.get_params(deep=True)) == before


def test_fit_adds_only_trailing_underscore_attributes(digits, fast_params):
    images, labels = digits
    clf = polydom.CostSensitiveClassifier(features=["thumbnail"], **fast_params)
    before = set(vars(clf))
    clf.fit(images, labels)
    added = set(vars(clf)) - before
    assert added and all(name.endswith("_") or name.startswith("_") for name in added), added


def test_check_is_fitted_before_and_after_fit(fitted):
    with pytest.raises(NotFittedError):
        check_is_fitted(polydom.CostSensitiveClassifier())
    check_is_fitted(fitted)


def test_predicting_changes_no_attribute(fitted, digits):
    images, labels = digits
    before = dict(vars(fitted))
    for method in (fitted.predict, fitted.explain):
        method(images[:4], budget=0.01)
    fitted.score(images[:4], labels[:4])
    assert vars(fitted) == before


def test_refitting_gives_the_same_answers(fitted, digits):
    images, labels = digits
    again = clone(fitted).fit(images, labels)
    # The lattice exploration sees scores only; which sets then get prefix chains and a second
    # opinion follows the measured costs, which a refit measures again.
    assert again.index_.exploration.accuracy == fitted.index_.exploration.accuracy
    np.testing.assert_array_equal(again.predict(images), fitted.predict(images))


def test_predict_is_per_item(fitted, digits):
    images, _ = digits
    whole = fitted.predict(images)
    order = np.random.default_rng(0).permutation(len(images))
    np.testing.assert_array_equal(fitted.predict([images[i] for i in order]), whole[order])
    np.testing.assert_array_equal(fitted.predict(images[3:7]), whole[3:7])


def test_read_only_images_are_served(fitted, digits):
    images, _ = digits
    frozen = [im.copy() for im in images[:3]]
    for im in frozen:
        im.setflags(write=False)
    np.testing.assert_array_equal(fitted.predict(frozen), fitted.predict(images[:3]))


def test_score_takes_labels_and_budget(fitted, digits):
    images, labels = digits
    assert 0.0 <= fitted.score(images, labels) <= 1.0
    prior = fitted.predict(images, budget=0.0)
    assert fitted.score(images, labels, budget=0.0) == pytest.approx(np.mean(prior == labels))
