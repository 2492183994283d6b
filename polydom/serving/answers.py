"""What a classifier answers per image: one class label, or one 0/1 row over its labels.

:class:`Answers` shapes the answers of a request -- :meth:`~Answers.empty` allocates them,
:meth:`~Answers.proba` places one model's probabilities in the classifier's columns -- so that
the per-image server, the batch server and the classifier answer single- and multilabel requests
alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Answers"]


@dataclass(frozen=True)
class Answers:
    """The answer space of a fitted classifier.

    Parameters
    ----------
    classes : ndarray
        ``classes_``: the sorted class labels, or with ``multilabel`` the label names in column order.
    multilabel : bool, default False
        Whether each image is answered with one 0/1 value per label.
    """

    classes: np.ndarray
    multilabel: bool = False

    def empty(self, n: int) -> np.ndarray:
        """Room for ``n`` answers: ``(n,)`` of the classes' dtype, or ``(n, n_labels)`` of int8."""
        if self.multilabel:
            return np.zeros((n, len(self.classes)), dtype=np.int8)
        return np.empty(n, dtype=self.classes.dtype)

    def proba(self, model, x: np.ndarray) -> np.ndarray:
        """``model``'s probabilities for one feature row ``x``, one per column of :attr:`classes`
        (:meth:`probas` of that row)."""
        return self.probas(model, x.reshape(1, -1))[0]

    def probas(self, model, X: np.ndarray) -> np.ndarray:
        """``model``'s probabilities for the rows of ``X``: ``(n_rows, len(classes))``.

        Single-label: a set's model may have seen fewer classes than the whole training set;
        its columns are placed by label (the others are 0). Multilabel: each label's
        probability of being present.
        """
        proba = model.predict_proba(X)
        if self.multilabel:
            if isinstance(proba, list):  # a natively multi-output model: one (n, 2) array per label
                return np.stack([p[:, -1] for p in proba], axis=1).astype(float)
            return np.asarray(proba, dtype=float)
        out = np.zeros((len(X), len(self.classes)))
        out[:, np.searchsorted(self.classes, model.classes_)] = proba
        return out
