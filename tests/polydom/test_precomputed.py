"""Fitting from feature matrices the user already has."""

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.naive_bayes import GaussianNB

import polydom


@pytest.fixture(scope="module")
def data():
    X, y = load_digits(return_X_y=True)
    X, y = X[:400] / 16.0, y[:400]
    matrices = {"top": X[:, :32], "bottom": X[:, 32:], "centre": X[:, 24:40]}
    costs = {"top": [1e-3], "bottom": [1e-3], "centre": [0.0, 1e-6]}
    return matrices, y, costs


def test_the_index_learns_from_the_matrices_and_shows_what_it_learned(data):
    matrices, y, costs = data
    fit = polydom.fit_features(matrices, y, costs, learners=[("nb", GaussianNB())], cv=3, e=0.0)
    choice = fit.index.lookup(size=100.0, budget=1.0)
    assert choice.features and choice.model is not None
    scores = fit.scores()
    assert scores[frozenset(choice.features)][0] == pytest.approx(fit.index.trained[choice.key])
    assert all(se is not None and se >= 0 for s, (a, se) in scores.items() if s)
    assert set(fit.learner.chosen.values()) <= {"nb", "prior"} and len(fit.learner.splits) == 3
    # The chosen model reads the chosen set's matrices side by side, in feature order.
    predicted = choice.model.predict(fit.matrix_of(choice.features, matrices))
    assert np.mean(predicted == y) >= scores[frozenset(choice.features)][0] - 0.05
    assert fit.columns["top"] == slice(0, 32) and fit.columns["centre"] == slice(64, 80)


def test_mismatched_inputs_are_named(data):
    matrices, y, costs = data
    with pytest.raises(ValueError, match="same features"):
        polydom.fit_features(matrices, y, {"top": [1.0]})
    with pytest.raises(ValueError, match="'bottom' has 10 rows but there are 400 labels"):
        polydom.fit_features({**matrices, "bottom": matrices["bottom"][:10]}, y, costs)
