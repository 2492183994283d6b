"""The lean numpy serving path predicts exactly what scikit-learn predicts, row by row and in batches."""

import warnings

import numpy as np
import pytest
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.dummy import DummyClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import (
    LogisticRegression,
    PassiveAggressiveClassifier,
    Perceptron,
    RidgeClassifier,
    SGDClassifier,
)
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import MinMaxScaler, StandardScaler
from sklearn.svm import LinearSVC
from sklearn.tree import DecisionTreeClassifier

from polydom.classifier.lean import LeanConstant, LeanLabels, LeanLinear, SklearnPredictor, lean_model, linear_proba_arrays, softmax_linear_proba

LEAN = [
    lambda: make_pipeline(StandardScaler(), SGDClassifier(loss="hinge", penalty="l1", random_state=0)),
    lambda: SGDClassifier(random_state=0),
    lambda: LogisticRegression(max_iter=2000),
    lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)),
    lambda: make_pipeline(StandardScaler(with_mean=False), LinearSVC(max_iter=5000)),
    lambda: make_pipeline(StandardScaler(with_std=False), RidgeClassifier()),
    lambda: Pipeline([("skip", "passthrough"), ("scale", StandardScaler()), ("clf", Perceptron(random_state=0))]),
    lambda: PassiveAggressiveClassifier(random_state=0),
    lambda: make_pipeline(StandardScaler(), LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto")),
    lambda: LinearDiscriminantAnalysis(),
]


def _data(n_classes, labels_as="int", seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(240, 12)) * rng.uniform(0.1, 50, size=12) + rng.normal(size=12) * 10
    y = rng.integers(0, n_classes, 240)
    if labels_as == "str":
        y = np.array(["cat", "dog", "emu", "fox"])[y]
    return X, y


def _fit(make, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (ConvergenceWarning, FutureWarning, DeprecationWarning))
        return make().fit(X, y)


def _check_identical(model, lean, X_test, one_row_checks=100):
    """Batch predictions on every row, one-row predictions (each its own sklearn call, ~1 ms) on
    a spread of them: the shapes match scikit-learn's calls, so the arithmetic does too."""
    np.testing.assert_array_equal(lean.predict(X_test), model.predict(X_test))
    for row in X_test[:: max(1, len(X_test) // one_row_checks)]:
        assert lean.predict_one(row) == model.predict(row.reshape(1, -1))[0]


@pytest.mark.parametrize("make", LEAN)
@pytest.mark.parametrize("n_classes, labels_as", [(2, "int"), (4, "int"), (4, "str")])
def test_lean_linear_equals_sklearn(make, n_classes, labels_as):
    X, y = _data(n_classes, labels_as)
    model = _fit(make, X, y)
    lean = lean_model(model)
    assert isinstance(lean, LeanLinear) and lean.lean
    rng = np.random.default_rng(1)
    # Far outside the training range, near it, and near-ties around the decision boundaries.
    X_test = np.vstack([
        rng.normal(size=(300, 12)) * 100,
        X[:100] + rng.normal(size=(100, 12)) * 1e-3,
        rng.normal(size=(100, 12)) * 1e-9,
    ])
    _check_identical(model, lean, X_test)


def _labels(seed=0, constant_column=None):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(240, 12)) * rng.uniform(0.1, 50, size=12)
    Y = (X[:, :4] + rng.normal(size=(240, 4)) * 20 > 0).astype(int)
    if constant_column is not None:
        Y[:, constant_column] = 1
    return X, Y


@pytest.mark.parametrize("make", [LEAN[3], LEAN[-2]])
@pytest.mark.parametrize("constant_column", [None, 0, 2])
def test_a_multilabel_one_vs_rest_model_is_lean_and_exact(make, constant_column):
    """Per-label linear models (a label constant in training gets a constant model) give the very
    0/1 rows scikit-learn's OneVsRestClassifier gives -- the first label constant included, where
    scikit-learn thresholds every label's decision score at 0.5."""
    from sklearn.multiclass import OneVsRestClassifier

    X, Y = _labels(constant_column=constant_column)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = OneVsRestClassifier(make()).fit(X, Y)
    lean = lean_model(model)
    rng = np.random.default_rng(3)
    X_test = np.vstack([rng.normal(size=(200, 12)) * 30, X[:50] + rng.normal(size=(50, 12)) * 1e-3])
    if constant_column == 0:  # the threshold is 0.5 on decision scores: scikit-learn's own path serves
        assert isinstance(lean, SklearnPredictor)
    else:
        assert isinstance(lean, LeanLabels) and lean.lean
    np.testing.assert_array_equal(lean.predict(X_test), model.predict(X_test))
    for row in X_test[::10]:
        np.testing.assert_array_equal(lean.predict_one(row), model.predict(row.reshape(1, -1))[0])


def test_the_multilabel_empty_set_model_is_a_constant_row():
    from polydom.classifier.multilabel import empty_set_model

    _, Y = _labels(seed=4)
    model = empty_set_model().fit(np.zeros((len(Y), 0)), Y)
    lean = lean_model(model)
    assert isinstance(lean, LeanLabels)
    np.testing.assert_array_equal(lean.predict(np.zeros((5, 0))), model.predict(np.zeros((5, 0))))
    np.testing.assert_array_equal(lean.predict_one(np.zeros(0)), (Y.mean(axis=0) > 0.5).astype(int))


@pytest.mark.parametrize("strategy", ["most_frequent", "prior"])
def test_majority_model_is_a_constant(strategy):
    X, y = _data(4, "str")
    model = DummyClassifier(strategy=strategy).fit(np.zeros((len(y), 0)), y)
    lean = lean_model(model)
    assert isinstance(lean, LeanConstant)
    _check_identical(model, lean, np.zeros((20, 0)))


@pytest.mark.parametrize("make", [
    lambda: DecisionTreeClassifier(random_state=0),
    lambda: KNeighborsClassifier(3),
    lambda: make_pipeline(MinMaxScaler(), LogisticRegression(max_iter=500)),
    lambda: DummyClassifier(strategy="stratified", random_state=0),
    lambda: DummyClassifier(strategy="constant", constant=1),
])
def test_anything_else_falls_back_to_sklearn(make):
    X, y = _data(3)
    model = _fit(make, X, y)
    lean = lean_model(model)
    assert isinstance(lean, SklearnPredictor) and not lean.lean
    X_test = np.random.default_rng(2).normal(size=(30, 12)) * 10
    if "Dummy" in type(model).__name__ and model.strategy == "stratified":
        return  # random by design: nothing to compare
    _check_identical(model, lean, X_test)


def test_lean_is_much_cheaper_than_sklearn_per_row():
    import time

    X, y = _data(4)
    model = _fit(LEAN[0], X, y)
    lean = lean_model(model)
    row = X[0]
    start = time.perf_counter()
    for _ in range(200):
        lean.predict_one(row)
    lean_t = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(200):
        model.predict(row.reshape(1, -1))
    sk_t = time.perf_counter() - start
    assert lean_t * 5 < sk_t


SOFTMAX_LINEAR = [
    lambda: LinearDiscriminantAnalysis(),
    lambda: make_pipeline(StandardScaler(), LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto")),
    lambda: make_pipeline(StandardScaler(), LogisticRegression(C=0.1, max_iter=2000)),
    lambda: Pipeline([("a", StandardScaler(with_std=False)), ("b", StandardScaler()), ("c", LogisticRegression(max_iter=2000))]),
]


@pytest.mark.parametrize("make", SOFTMAX_LINEAR)
@pytest.mark.parametrize("n_classes", [2, 4])
def test_softmax_linear_probabilities_as_arrays_equal_sklearn(make, n_classes):
    X, y = _data(n_classes)
    model = _fit(make, X[:160], y[:160])
    arrays = linear_proba_arrays(model, X[:160])
    assert arrays is not None
    np.testing.assert_allclose(softmax_linear_proba(X[160:], *arrays), model.predict_proba(X[160:]), rtol=0, atol=1e-9)


@pytest.mark.parametrize("make", [lambda: GaussianNB(), lambda: KNeighborsClassifier(3), lambda: make_pipeline(MinMaxScaler(), LogisticRegression(max_iter=2000)),
                                  lambda: make_pipeline(StandardScaler(), SGDClassifier(loss="log_loss", random_state=0))])
def test_models_whose_probabilities_are_not_a_scaled_softmax_have_no_arrays(make):
    X, y = _data(4)
    assert linear_proba_arrays(_fit(make, X, y), X) is None
