"""Several labels per image: one indicator column per label, one model per feature set that
answers every label, and the score that ranks feature sets across labels.

A moderation service asks several questions of one image (graphic content, text, faces, ...).
A multilabel classifier trains, for each feature set the index explores, one binary model per
label on the same columns (scikit-learn's :class:`~sklearn.multiclass.OneVsRestClassifier`), so
that the set's features, computed once, answer every label. The index ranks a set by one number,
the *label-weighted accuracy*: each label's accuracy, weighted by the user's label weights (equal
by default). That is the share of the weighted label decisions the set gets right, so a set that
serves one label well and the others at their prior is worth less than one that helps all.

:func:`label_matrix` reads the labels (an indicator matrix or a list of label sets);
:func:`per_label_learners` wraps the learners; :class:`LabelWeightedAccuracy` is the scorer;
:func:`fold_strata` gives the folds one stratum per label combination.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence, Set

import numpy as np

from polydom.errors import InputError

__all__ = ["LabelWeightedAccuracy", "label_matrix", "label_weight_vector", "per_label_learners", "empty_set_model",
           "fold_strata", "is_multilabel_target"]


def _is_label_set(value) -> bool:
    return isinstance(value, (Set, list, tuple)) and not isinstance(value, (str, bytes))


def is_multilabel_target(y) -> bool:
    """Whether ``y`` asks for several labels per image: a 2-D indicator matrix or a sequence of
    label sets (sets, lists or tuples of labels)."""
    if isinstance(y, np.ndarray):
        return y.ndim == 2 or (y.dtype == object and len(y) > 0 and all(_is_label_set(v) for v in y))
    if isinstance(y, (str, bytes)) or not isinstance(y, Sequence) or not len(y):
        return False
    return all(_is_label_set(v) for v in y)


def label_matrix(y, n_images: int, labels: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(Y, labels)``: an ``(n_images, n_labels)`` 0/1 matrix of int8 and the label names.

    ``y`` is either an indicator matrix (scikit-learn's multilabel convention; its labels are
    ``0 .. n_labels - 1``) or a list of label sets (the labels are their sorted union, as
    :class:`~sklearn.preprocessing.MultiLabelBinarizer` gives them). With ``labels`` (a fitted
    classifier's), an indicator matrix must have one column per label and label sets are
    read over ``labels``.

    Raises
    ------
    InputError
        Wrong length, values other than 0/1, fewer than one label, or mixed label types.
    """
    rows = list(y) if not isinstance(y, np.ndarray) else y
    if len(rows) != n_images:
        raise InputError(f"y has {len(rows)} rows but there are {n_images} images")
    as_array = None
    if isinstance(y, np.ndarray) and y.ndim == 2:
        as_array = y
    elif all(_is_label_set(v) and not isinstance(v, Set) for v in rows):
        lengths = {len(v) for v in rows}
        if len(lengths) == 1 and all(not isinstance(e, bool) and isinstance(e, numbers.Integral) and e in (0, 1)
                                     for v in rows for e in v):
            as_array = np.asarray(rows)
    if as_array is not None:
        if as_array.shape[1] < 1:
            raise InputError("y has no label columns: give at least one label per row")
        if as_array.dtype == bool:
            as_array = as_array.astype(np.int8)
        if not np.isin(as_array, (0, 1)).all():
            raise InputError(f"y has shape {as_array.shape} and values other than 0 and 1: a 2-D y is a multilabel "
                             "indicator matrix (0 and 1 only, one column per label); give class labels as a 1-D "
                             "array, one label per image")
        if labels is not None and as_array.shape[1] != len(labels):
            raise InputError(f"y has {as_array.shape[1]} label columns; the classifier answers {len(labels)} labels")
        return as_array.astype(np.int8), np.arange(as_array.shape[1]) if labels is None else np.asarray(labels)
    from sklearn.preprocessing import MultiLabelBinarizer

    sets = []
    for i, v in enumerate(rows):
        if not _is_label_set(v):
            raise InputError(f"y[{i}] is {v!r:.60}; a list of label sets holds a set, list or tuple per image")
        sets.append(tuple(v))
    if labels is not None:
        known = set(np.asarray(labels).tolist())
        unknown = {v for row in sets for v in row} - known
        if unknown:
            raise InputError(f"y holds labels {sorted(map(str, unknown))!r:.80} the classifier was not fitted with")
    try:
        binarizer = (MultiLabelBinarizer() if labels is None else MultiLabelBinarizer(classes=list(labels))).fit(sets)
    except TypeError:
        raise InputError("the labels in y's sets are of mixed types; use all strings or all integers") from None
    labels = binarizer.classes_
    if not len(labels):
        raise InputError("y's label sets are all empty: at least one image needs a label")
    return binarizer.transform(sets).astype(np.int8), np.asarray(labels)


def label_weight_vector(weights, labels: np.ndarray) -> np.ndarray:
    """The label weights as a vector summing to 1, in the order of ``labels``.

    ``weights`` is None (equal), a sequence with one weight per label, or a mapping from label to
    weight (labels left out weigh 0). Every weight is finite and >= 0 and at least one is > 0.
    """
    n = len(labels)
    if weights is None:
        return np.full(n, 1.0 / n)
    if isinstance(weights, Mapping):
        unknown = [k for k in weights if k not in set(labels.tolist())]
        if unknown:
            raise InputError(f"label_weights names labels {unknown!r:.80} that y does not hold ({labels.tolist()!r:.80})")
        vector = np.array([float(weights.get(label, 0.0)) for label in labels.tolist()])
    else:
        vector = np.asarray(weights, dtype=float)
        if vector.shape != (n,):
            raise InputError(f"label_weights must hold one weight per label ({n}), got shape {vector.shape}")
    if not np.isfinite(vector).all() or (vector < 0).any() or not vector.sum() > 0:
        raise InputError("label_weights must be finite, >= 0 and not all 0")
    return vector / vector.sum()


class LabelWeightedAccuracy:
    """Scorer: the weighted mean of each label's accuracy, ``sum_l w_l * mean(pred_l == y_l)``.

    Called as a scikit-learn scorer, ``scorer(estimator, X, Y)``; the value lies in ``[0, 1]``.
    With equal weights it is one minus the Hamming loss.

    Parameters
    ----------
    weights : array_like of shape (n_labels,)
        Summing to 1 (:func:`label_weight_vector`).
    """

    def __init__(self, weights):
        self.weights = np.asarray(weights, dtype=float)

    def score(self, Y, predicted) -> float:
        """The weighted per-label accuracy of ``predicted`` against ``Y``."""
        correct = np.asarray(predicted) == np.asarray(Y)
        return float(correct.mean(axis=0) @ self.weights)

    def __call__(self, estimator, X, Y) -> float:
        return self.score(Y, estimator.predict(X))

    def __repr__(self) -> str:
        # Part of the expansion cache's key: equal weights give equal reprs.
        return f"LabelWeightedAccuracy({np.round(self.weights, 12).tolist()})"


def per_label_learners(learners: Sequence[tuple[str, object]]) -> list[tuple[str, object]]:
    """Each learner as one binary model per label on the same columns (``OneVsRestClassifier``);
    a label constant in a fold's training rows gets a constant model there."""
    from sklearn.multiclass import OneVsRestClassifier

    return [(name, OneVsRestClassifier(est)) for name, est in learners]


def empty_set_model():
    """The model of the empty feature set: each label's training prior, answered by its majority."""
    from sklearn.dummy import DummyClassifier
    from sklearn.multiclass import OneVsRestClassifier

    return OneVsRestClassifier(DummyClassifier(strategy="prior"))


def fold_strata(Y: np.ndarray, folds: int) -> np.ndarray:
    """One stratum per image for stratified folds: its label combination, with combinations
    fewer than ``folds`` images hold pooled into one stratum (joined to the largest when the pool
    is still too small), so that every stratum can be spread over the folds."""
    _, codes, counts = np.unique(np.asarray(Y), axis=0, return_inverse=True, return_counts=True)
    codes = np.asarray(codes).ravel()
    rare = counts[codes] < folds
    if rare.any():
        pooled = int(counts.argmax()) if rare.sum() < folds else len(counts)
        codes = np.where(rare, pooled, codes)
    return codes
