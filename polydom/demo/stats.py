"""Held-out accuracies with standard errors, and paired differences between backends.

Every held-out picture is rendered at every size, so the items of one picture are not
independent (a hard digit is hard at every size). Standard errors are therefore taken over
pictures: each picture's share of correct answers is one observation, and the standard error of
their mean is ``std / sqrt(pictures)``. Within one size each picture is one item, and this is
the usual binomial standard error.

Backends answer the same items, so they are compared *paired*: per picture, the difference of
the two shares, then the mean and standard error of those differences. Pairing removes the
variation between pictures that both backends share, which makes small differences measurable
that two separate error bars could not resolve.

A difference is called significant when it exceeds :data:`Z` standard errors (about 95 % each;
among many comparisons some cross by chance). Standard errors cover the choice of held-out
pictures only -- not the training data, the folds or this machine's timings; two runs show how
far the timings move the answers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Z", "Estimate", "mean_se", "picture_shares", "accuracy", "difference", "overall", "overall_difference"]

#: Standard errors a difference must exceed to be called significant.
Z = 2.0


@dataclass(frozen=True)
class Estimate:
    """A mean with its standard error."""

    value: float
    se: float

    def significant(self) -> bool:
        """Whether the value is further than :data:`Z` standard errors from zero."""
        return abs(self.value) > Z * self.se

    def text(self, digits: int = 3, signed: bool = False) -> str:
        """``0.912 ± 0.008`` (``+0.012 ± 0.004`` with ``signed``)."""
        sign = "+" if signed else ""
        return f"{self.value:{sign}.{digits}f} ± {self.se:.{digits}f}"


def mean_se(values: np.ndarray) -> Estimate:
    """The mean of ``values`` with its standard error (NaN with fewer than two)."""
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return Estimate(float(values.mean()) if len(values) else math.nan, math.nan)
    return Estimate(float(values.mean()), float(values.std(ddof=1) / math.sqrt(len(values))))


def picture_shares(correct: np.ndarray, pictures: np.ndarray) -> np.ndarray:
    """Per row of ``correct`` (a budget), each picture's share of correct answers.

    Parameters
    ----------
    correct : ndarray of bool, shape (n_rows, n_items)
    pictures : ndarray of int, shape (n_items,)
        The picture each item was rendered from.

    Returns
    -------
    ndarray of float, shape (n_rows, n_pictures)
    """
    correct = np.atleast_2d(np.asarray(correct, dtype=float))
    _, ids = np.unique(np.asarray(pictures), return_inverse=True)
    counts = np.bincount(ids)
    return np.stack([np.bincount(ids, weights=row, minlength=len(counts)) / counts for row in correct])


def accuracy(correct: np.ndarray, pictures: np.ndarray) -> list[Estimate]:
    """Accuracy of each row (budget) with its standard error over pictures."""
    return [mean_se(row) for row in picture_shares(correct, pictures)]


def difference(correct_a: np.ndarray, correct_b: np.ndarray, pictures: np.ndarray) -> list[Estimate]:
    """Paired accuracy difference ``a - b`` of each row, with its standard error over pictures."""
    return [mean_se(row) for row in picture_shares(correct_a, pictures) - picture_shares(correct_b, pictures)]


def overall(correct: np.ndarray, pictures: np.ndarray) -> Estimate:
    """Accuracy over every row and item (each budget weighs the same), standard error over pictures."""
    return mean_se(picture_shares(correct, pictures).mean(axis=0))


def overall_difference(correct_a: np.ndarray, correct_b: np.ndarray, pictures: np.ndarray) -> Estimate:
    """Paired difference of :func:`overall` accuracies, ``a - b``."""
    return mean_se((picture_shares(correct_a, pictures) - picture_shares(correct_b, pictures)).mean(axis=0))
