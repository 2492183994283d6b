"""Lean single-row prediction: fitted linear scikit-learn classifiers replayed in a few numpy ops.

A scikit-learn ``predict`` on one row spends hundreds of microseconds validating its input and
dispatching through the pipeline; the arithmetic itself is a subtraction, a division and one
small matrix product. :func:`lean_model` extracts that arithmetic from a fitted model once, so
serving a row costs a few microseconds.

Supported (anything else falls back to the model's own ``predict``):

* ``DummyClassifier`` with ``strategy="most_frequent"`` or ``"prior"`` (a constant), single
  output;
* a linear classifier -- ``SGDClassifier``, ``LogisticRegression``, ``LogisticRegressionCV``,
  ``LinearSVC``, ``RidgeClassifier``, ``RidgeClassifierCV``, ``Perceptron``,
  ``PassiveAggressiveClassifier`` -- on dense input, single label;
* a ``Pipeline`` of ``StandardScaler`` steps (or ``"passthrough"``) ending in one of those;
* a multilabel ``OneVsRestClassifier`` whose per-label models are any of the above (or
  constant): one 0/1 value per label.

Predictions are **identical** to scikit-learn's, not merely close: the lean path performs the very
operations scikit-learn performs, in the same order and on arrays of the same shape (centre, then
scale, then ``X @ coef_.T + intercept_``, then ``scores > 0`` or ``argmax``), so even near-ties
round the same way. Folding the scaler into the coefficients would be faster by one operation but
would round differently, so it is not done.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from polydom.index.cascade import linear_probabilities

__all__ = ["LeanConstant", "LeanLinear", "LeanLabels", "SklearnPredictor", "lean_model", "linear_proba_arrays"]

_LINEAR_CLASSIFIERS = (
    "SGDClassifier", "LogisticRegression", "LogisticRegressionCV", "LinearSVC", "RidgeClassifier",
    "RidgeClassifierCV", "Perceptron", "PassiveAggressiveClassifier", "LinearDiscriminantAnalysis",
)


class LeanConstant:
    """Predicts one label for every row (a fitted majority-class or constant model).

    Parameters
    ----------
    label : object
        The label, as the model's ``classes_`` holds it.
    """

    __slots__ = ("label",)
    lean = True

    def __init__(self, label):
        self.label = label

    def predict_one(self, x: np.ndarray):
        """The label of one row (``x`` is ignored). ``O(1)``."""
        return self.label

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Labels of the rows of ``X``."""
        return np.full(len(X), self.label, dtype=np.asarray([self.label]).dtype)

    def __repr__(self) -> str:
        return f"LeanConstant({self.label!r})"


class LeanLinear:
    """A fitted linear classifier, optionally behind standard scalers, as plain arrays.

    Parameters
    ----------
    scalers : list of (mean or None, scale or None)
        Each ``StandardScaler`` in pipeline order: ``mean_`` if it centres, ``scale_`` if it scales.
    coef_t : ndarray of shape (n_features, n_scores)
        ``coef_.T`` exactly as scikit-learn multiplies it.
    intercept : ndarray or float
    classes : ndarray
    """

    __slots__ = ("scalers", "coef_t", "intercept", "classes", "binary", "n_features")
    lean = True

    def __init__(self, scalers, coef_t, intercept, classes):
        self.scalers = [(m, s) for m, s in scalers]
        self.coef_t = coef_t
        self.intercept = intercept
        self.classes = classes
        self.binary = coef_t.ndim == 1 or coef_t.shape[1] == 1
        self.n_features = coef_t.shape[0]

    def _scores(self, X: np.ndarray) -> np.ndarray:
        for mean, scale in self.scalers:
            X = X - mean if mean is not None else X.copy()
            if scale is not None:
                X /= scale
        return X @ self.coef_t + self.intercept

    def predict_one(self, x: np.ndarray):
        """The label of one row ``x`` (1-D ``float64``, ``n_features`` long).

        ``O(n_features * n_classes)``: the row is shaped ``(1, n_features)`` so that the matrix
        product is the one scikit-learn runs for a one-row ``predict``.
        """
        s = self._scores(x.reshape(1, -1))
        if self.binary:
            return self.classes[int(s.reshape(-1)[0] > 0)]
        return self.classes[int(s[0].argmax())]

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Labels of the rows of ``X`` (2-D ``float64``)."""
        s = self._scores(np.asarray(X, dtype=np.float64))
        if self.binary:
            return self.classes.take((s.reshape(-1) > 0).astype(np.intp))
        return self.classes.take(s.argmax(axis=1))

    def __repr__(self) -> str:
        return f"<LeanLinear features={self.n_features} classes={len(self.classes)} scalers={len(self.scalers)}>"


class LeanLabels:
    """A fitted multilabel ``OneVsRestClassifier`` as one score per label and a threshold.

    Parameters
    ----------
    parts : list of float or LeanLinear
        Per label: a constant score (a constant or prior-only model), or a binary linear model
        whose decision score is compared.
    threshold : float
        A label is present when its score exceeds it: 0 for decision scores, 0.5 for
        probabilities -- chosen from the first label's model, as scikit-learn chooses it.
    """

    __slots__ = ("parts", "threshold")
    lean = True

    def __init__(self, parts, threshold: float):
        self.parts = list(parts)
        self.threshold = float(threshold)

    def _score(self, part, X: np.ndarray) -> np.ndarray:
        if isinstance(part, LeanLinear):
            return part._scores(X).reshape(len(X), -1)[:, 0]
        return np.full(len(X), part)

    def predict_one(self, x: np.ndarray) -> np.ndarray:
        """The 0/1 row of one feature row ``x``."""
        return self.predict(x.reshape(1, -1))[0]

    def predict(self, X: np.ndarray) -> np.ndarray:
        """0/1 rows, one column per label."""
        X = np.asarray(X, dtype=np.float64)
        return np.stack([self._score(part, X) > self.threshold for part in self.parts], axis=1).astype(int)

    def __repr__(self) -> str:
        return f"<LeanLabels labels={len(self.parts)} threshold={self.threshold:g}>"


class SklearnPredictor:
    """Fallback: the model's own ``predict``, behind the same two methods."""

    __slots__ = ("model",)
    lean = False

    def __init__(self, model):
        self.model = model

    def predict_one(self, x: np.ndarray):
        return self.model.predict(x.reshape(1, -1))[0]

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(self.model.predict(X))

    def __repr__(self) -> str:
        return f"SklearnPredictor({type(self.model).__name__})"


def _class_name(obj) -> str:
    return type(obj).__name__ if type(obj).__module__.startswith("sklearn.") else ""


def _lean_linear(model, scalers) -> LeanLinear | None:
    if _class_name(model) not in _LINEAR_CLASSIFIERS:
        return None
    coef = getattr(model, "coef_", None)
    intercept = getattr(model, "intercept_", None)
    classes = getattr(model, "classes_", None)
    if not isinstance(coef, np.ndarray) or coef.dtype != np.float64 or coef.ndim not in (1, 2):
        return None
    if not isinstance(classes, np.ndarray) or classes.ndim != 1:
        return None
    binarizer = getattr(model, "_label_binarizer", None)
    if binarizer is not None and str(getattr(binarizer, "y_type_", "")).startswith("multilabel"):
        return None
    if intercept is None:
        return None
    coef_t = coef.T if coef.ndim == 2 else coef
    if coef.ndim == 2 and coef.shape[0] not in (1, len(classes)):
        return None
    return LeanLinear(scalers, coef_t, intercept, classes)


def _lean_labels(model) -> LeanLabels | None:
    """A multilabel one-vs-rest model as :class:`LeanLabels`, replaying scikit-learn's
    ``OneVsRestClassifier.predict``: each label's decision score (or, for a model without one,
    its probability) against one threshold taken from the first label's model."""
    if _class_name(model) != "OneVsRestClassifier":
        return None
    binarizer = getattr(model, "label_binarizer_", None)
    estimators = getattr(model, "estimators_", None)
    if not str(getattr(binarizer, "y_type_", "")).startswith("multilabel") or not estimators:
        return None
    from sklearn.base import is_classifier

    first = estimators[0]
    threshold = 0.0 if hasattr(first, "decision_function") and is_classifier(first) else 0.5
    parts = []
    for estimator in estimators:
        name = _class_name(estimator)
        if name == "_ConstantPredictor":  # a label constant in training: its one value is its score
            parts.append(float(np.ravel(estimator.y_)[0]))
        elif name == "DummyClassifier" and getattr(estimator, "_strategy", estimator.strategy) in ("prior", "most_frequent"):
            if hasattr(estimator, "decision_function") or len(estimator.classes_) != 2:
                return None
            parts.append(float(estimator.predict_proba(np.zeros((1, 1)))[0, 1]))
        else:
            pieces = _scalers_and_final(estimator)
            lean = None if pieces is None else _lean_linear(pieces[1], pieces[0])
            # A binary linear model scored by its decision function, as sklearn scores it.
            if lean is None or not lean.binary or threshold != 0.0 or list(lean.classes) != [0, 1]:
                return None
            parts.append(lean)
    return LeanLabels(parts, threshold)


def _lean_scaler(step) -> tuple[Any, Any] | None:
    if _class_name(step) != "StandardScaler":
        return None
    mean = getattr(step, "mean_", None) if step.with_mean else None
    scale = getattr(step, "scale_", None) if step.with_std else None
    for arr in (mean, scale):
        if arr is not None and (not isinstance(arr, np.ndarray) or arr.dtype != np.float64):
            return None
    return mean, scale


def _lean_dummy(model) -> LeanConstant | None:
    if _class_name(model) != "DummyClassifier" or getattr(model, "n_outputs_", 1) != 1:
        return None
    if getattr(model, "sparse_output_", False):
        return None
    strategy = getattr(model, "_strategy", model.strategy)
    if strategy in ("most_frequent", "prior"):
        return LeanConstant(model.classes_[model.class_prior_.argmax()])
    return None


def lean_model(model) -> LeanConstant | LeanLinear | SklearnPredictor:
    """The fastest exact predictor for a fitted ``model``.

    Parameters
    ----------
    model : fitted scikit-learn classifier

    Returns
    -------
    LeanConstant, LeanLinear or SklearnPredictor
        All three offer ``predict_one(x)`` (one 1-D row -> label) and ``predict(X)``, and
        ``lean`` (False for the fallback). Their predictions equal ``model.predict``'s.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [0.9, 0.2], [0.1, 0.8]])
    >>> clf = LogisticRegression().fit(X, [0, 1, 1, 0])
    >>> lean = lean_model(clf)
    >>> lean.lean, bool(lean.predict_one(np.array([1.0, 0.0])) == clf.predict([[1.0, 0.0]])[0])
    (True, True)
    """
    dummy = _lean_dummy(model)
    if dummy is not None:
        return dummy
    labels = _lean_labels(model)
    if labels is not None:
        return labels
    parts = _scalers_and_final(model)
    lean = None if parts is None else _lean_linear(parts[1], parts[0])
    return lean if lean is not None else SklearnPredictor(model)


def _scalers_and_final(model):
    """``(scalers, final)``: a model alone, or a pipeline's ``StandardScaler`` steps (as
    :func:`_lean_scaler` pairs, ``"passthrough"`` skipped) and its last step; None when a
    pipeline has another kind of step or ends without an estimator."""
    if _class_name(model) != "Pipeline":
        return [], model
    steps = [s for _, s in model.steps]
    scalers = []
    for step in steps[:-1]:
        if step is None or step == "passthrough":
            continue
        scaler = _lean_scaler(step)
        if scaler is None:
            return None
        scalers.append(scaler)
    final = steps[-1] if steps else None
    return None if final is None or final == "passthrough" else (scalers, final)


#: Classifiers whose ``predict_proba`` is the softmax of their linear scores (the logistic of the
#: one score when there are two classes) -- checked on data before it is relied on.
_SOFTMAX_CLASSIFIERS = ("LinearDiscriminantAnalysis", "LogisticRegression", "LogisticRegressionCV")


def linear_proba_arrays(model, X_check: np.ndarray, atol: float = 1e-9):
    """A fitted model's class probabilities as arrays: ``(mean, scale, coef_t, intercept)``.

    For a softmax-linear classifier (``LinearDiscriminantAnalysis``, multinomial
    ``LogisticRegression``), optionally behind ``StandardScaler`` steps, the probabilities of a
    row ``x`` are ``softmax(((x - mean) / scale) @ coef_t + intercept)`` -- or, with one score
    column (two classes), ``[1 - expit(s), expit(s)]``. The scalers are folded into one ``mean``
    and ``scale``, which rounds differently from scikit-learn's step-by-step path, so the
    arrays are accepted only if they reproduce ``model.predict_proba(X_check)`` within ``atol``.

    Returns None for any other model, or when the check fails (a one-vs-rest logistic
    regression, for example, normalises its class scores differently).
    """
    parts = _scalers_and_final(model)
    if parts is None or _class_name(parts[1]) not in _SOFTMAX_CLASSIFIERS:
        return None
    scalers, final = parts
    coef, intercept = getattr(final, "coef_", None), getattr(final, "intercept_", None)
    if not isinstance(coef, np.ndarray) or coef.ndim != 2 or intercept is None:
        return None
    mean, scale = np.zeros(coef.shape[1]), np.ones(coef.shape[1])
    for centre, spread in scalers:
        # ((x - m) / s - m2) / s2 == (x - (m + m2 * s)) / (s * s2)
        if centre is not None:
            mean = mean + centre * scale
        if spread is not None:
            scale = scale * spread
    arrays = mean, scale, np.ascontiguousarray(coef.T, dtype=np.float64), np.atleast_1d(np.asarray(intercept, dtype=np.float64))
    X_check = np.asarray(X_check, dtype=np.float64)
    if X_check.ndim != 2 or X_check.shape[1] != len(mean) or not len(X_check):
        return None
    try:
        expected = model.predict_proba(X_check)
    except Exception:  # noqa: BLE001 - a model that cannot say its probabilities has no arrays
        return None
    if expected.shape[1] != max(2, arrays[2].shape[1]) or not np.allclose(
            softmax_linear_proba(X_check, *arrays), expected, rtol=0.0, atol=atol):
        return None
    return arrays


def softmax_linear_proba(X: np.ndarray, mean, scale, coef_t, intercept) -> np.ndarray:
    """Class probabilities of the rows of ``X`` from :func:`linear_proba_arrays`'s arrays."""
    return linear_probabilities(((X - mean) / scale) @ coef_t + intercept)
