"""Bad input to CostSensitiveClassifier: one clear error that names the item, feature or parameter."""

import numpy as np
import pytest

import polydom
from polydom.featurizers import REGISTRY, Feature, FeatureError
from polydom.featurizers.datasets import load_digits_images


@pytest.fixture(scope="module")
def digits():
    images, labels, _ = load_digits_images(sides=(16,), n_per_class=4, random_state=0)
    return images, labels


@pytest.fixture(scope="module")
def fitted(digits, fast_params):
    images, labels = digits
    return polydom.CostSensitiveClassifier(features=["thumbnail"], **fast_params).fit(images, labels)


BAD_IMAGES = [
    (np.zeros((16, 16), dtype=np.int32), TypeError, "dtype int32"),
    (np.zeros((16, 16), dtype=object), TypeError, "dtype object"),
    (np.zeros(256, dtype=np.uint8), ValueError, "1 dimensions"),
    (np.zeros((2, 16, 16, 3), dtype=np.uint8), ValueError, "4 dimensions"),
    (np.zeros((16, 16, 2), dtype=np.uint8), ValueError, "3 \\(RGB\\) or 4"),
    (np.zeros((0, 0), dtype=np.uint8), ValueError, "is empty"),
    (np.full((16, 16), np.nan), ValueError, "NaN pixels"),
    (np.full((16, 16), 2.0), ValueError, r"float pixels in \[2, 2\]"),
]


@pytest.mark.parametrize("image, error, message", BAD_IMAGES)
def test_bad_image_in_fit_names_the_item(digits, image, error, message, fast_params):
    images, labels = digits
    images = list(images)
    images[3] = image
    with pytest.raises(error, match=f"item 3.*{message}|{message}.*item 3") as info:
        polydom.CostSensitiveClassifier(features=["thumbnail"], **fast_params).fit(images, labels)
    assert "item 3" in str(info.value)


@pytest.mark.parametrize("image, error, message", BAD_IMAGES)
def test_bad_image_in_predict_names_the_item(fitted, digits, image, error, message):
    images, _ = digits
    with pytest.raises(error, match="item 1"):
        fitted.predict([images[0], image, images[2]], budget=1.0)


def test_a_bare_array_is_not_taken_for_a_list_of_rows(fitted, digits):
    images, labels = digits
    with pytest.raises(ValueError, match="wrap a single image in a list"):
        fitted.predict(images[0])
    with pytest.raises(ValueError, match="got one file path; wrap a single image in a list"):
        fitted.predict("cat.png")
    rgb = np.zeros((135, 90, 3), dtype=np.uint8)  # not a stack of 135 images 3 pixels wide
    with pytest.raises(ValueError, match=r"one image array of shape \(135, 90, 3\); wrap"):
        fitted.predict(rgb)
    with pytest.raises(TypeError, match="sequence of images"):
        fitted.predict(42)


@pytest.mark.parametrize("budget, message", [
    (float("nan"), "budget is NaN"), (-0.001, "budget is negative"), ([0.1, float("nan")], "NaN for item 1"),
    ([0.1, 0.2, 0.3], "one per image"), ("fast", "number of seconds"),
])
def test_bad_budget(fitted, digits, budget, message):
    images, _ = digits
    with pytest.raises((ValueError, TypeError), match=message):
        fitted.predict(images[:2], budget=budget)


@pytest.mark.parametrize("param, value, message", [
    ("budget", float("nan"), "budget must be a finite number"), ("budget", -1.0, "budget must be"),
    ("selection", polydom.Selection(alpha=0.5), "Selection: alpha must be"),
    ("selection", polydom.Selection(e=-0.1), "Selection: e must be"),
    ("selection", polydom.Selection(backend="fast"), "Selection: backend must be"),
    ("timing", polydom.Timing(quantile=1.5), "Timing: quantile"), ("cv", 1, "cv must be"),
    ("timing", polydom.Timing(sides=(8, 8, 8)), "distinct sides"), ("timing", polydom.Timing(repeats=0), "repeats"),
    ("selection", polydom.Selection(lambdas=[0.0, 1.0]), "backend='greedy' only"),
    ("selection", polydom.Selection(scores="isotonic"), "scores must be"), ("selection", {"alpha": 2}, "polydom.Selection"),
    ("serving", polydom.Serving(guard=0.2), "Serving: guard"), ("cascade", True, "polydom.Cascade"),
    ("features", [], "features is empty"), ("features", ["no_such_feature"], "unknown feature 'no_such_feature'"),
])
def test_bad_parameter_raises_at_fit(digits, param, value, message, fast_params):
    images, labels = digits
    clf = polydom.CostSensitiveClassifier(**{**fast_params, param: value})
    with pytest.raises((ValueError, TypeError), match=message):
        clf.fit(images, labels)


def test_labels_of_the_wrong_length(digits, fast_params):
    images, labels = digits
    with pytest.raises(ValueError, match=f"y has {len(labels) - 1} labels but there are {len(images)} images"):
        polydom.CostSensitiveClassifier(features=["thumbnail"], **fast_params).fit(images, labels[:-1])
    with pytest.raises(ValueError, match="1-D"):
        polydom.CostSensitiveClassifier(features=["thumbnail"], **fast_params).fit(images, labels.reshape(-1, 1))


def test_score_with_labels_of_the_wrong_length(fitted, digits):
    images, labels = digits
    with pytest.raises(ValueError, match="one label per image"):
        fitted.score(images[:4], labels[:3])


class Fragile:
    """A feature that fails on bright images, or on everything once ``broken`` is set."""

    broken = False

    def __call__(self, image):
        if Fragile.broken or image.mean() > 200:
            raise RuntimeError("the sensor overheated")
        return REGISTRY["thumbnail"].function(image)


FRAGILE = Feature("fragile", Fragile(), dimension=64)


def test_a_failing_feature_in_fit_names_feature_and_item(digits, fast_params):
    images, labels = digits
    images = list(images)
    images[5] = np.full((16, 16), 255, dtype=np.uint8)
    with pytest.raises(FeatureError, match="feature 'fragile' failed on item 5: RuntimeError: the sensor overheated"):
        polydom.CostSensitiveClassifier(features=["thumbnail", FRAGILE], **fast_params).fit(images, labels)


def test_a_failing_feature_in_predict_names_feature_and_item(digits, fast_params):
    images, labels = digits
    clf = polydom.CostSensitiveClassifier(features=[FRAGILE], **fast_params).fit(images, labels)
    assert clf.predict(images[:2]).shape == (2,)
    Fragile.broken = True
    try:
        with pytest.raises(FeatureError, match="feature 'fragile' failed on item 0") as info:
            clf.predict(images[:2])
        assert info.value.feature == "fragile" and info.value.index == 0
        assert clf.predict(images[:2], budget=0.0).shape == (2,)  # {} needs no feature
    finally:
        Fragile.broken = False


def test_a_feature_failing_while_timed_is_named(digits, fast_params):
    images, labels = digits

    def fails_on_large(image):
        if image.shape[0] > 24:
            raise MemoryError("too large")
        return REGISTRY["intensity_hist"].function(image)

    feature = Feature("shy", fails_on_large, dimension=16)
    with pytest.raises(FeatureError, match=r"feature 'shy' failed on a 32 x 32 copy of training image \d+ .timing the features.: MemoryError: too large"):
        polydom.CostSensitiveClassifier(features=[feature], **fast_params).fit(images, labels)


def test_scoring_outside_the_unit_interval_is_refused(digits, fast_params):
    images, labels = digits
    from sklearn.linear_model import LogisticRegression

    clf = polydom.CostSensitiveClassifier(features=["thumbnail"], learners=LogisticRegression(max_iter=300),
                                          selection=polydom.Selection(scoring="neg_log_loss"), **fast_params)
    with pytest.raises(ValueError, match="scoring='neg_log_loss'.*in \\[0, 1\\]"):
        clf.fit(images, labels)


def test_feature_error_survives_pickling_for_parallel_workers():
    import pickle

    err = pickle.loads(pickle.dumps(FeatureError("feature 'x' failed on item 4: boom", feature="x", index=4)))
    assert isinstance(err, FeatureError) and err.feature == "x" and err.index == 4 and "item 4" in str(err)
