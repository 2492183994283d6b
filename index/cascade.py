"""Confidence cascades over a prefix chain: stop buying features once the model is sure.

A chain ``P_1 ⊂ P_2 ⊂ ... ⊂ P_k`` has a model per prefix. Serving computes the features of
``P_1``, predicts with its model, and stops when the predicted class's probability reaches that
stage's threshold *for that class*; otherwise it computes the next prefix's new features (the
ones already computed are reused, not paid again) and asks the next model. The last stage always
answers. Thresholds of 1 (never confident enough) serve the whole set, thresholds of 0 serve the
first prefix.

Thresholds are learned from out-of-fold probabilities -- the same folds that score the sets, so
no item scores a model that saw it -- by coordinate ascent on ``accuracy - price * mean cost``,
where an item's cost is the predicted cost of the prefix it stops at, at its own size. A target
accuracy or mean cost is met by bisection on the price.

Invariant (checked by :func:`check_thresholds`): thresholds lie in ``[0, 1]``, one row per
stage and one column per class, and the last row is all zeros (the last stage always answers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["CascadeFit", "check_thresholds", "fit_thresholds", "fit_to_target", "replay"]


@dataclass(frozen=True)
class CascadeFit:
    """Learned thresholds and what they achieve on the data they were learned from.

    Attributes
    ----------
    thresholds : ndarray of shape (stages, classes)
    price : float
        Accuracy given up per unit of mean cost.
    accuracy, mean_cost : float
        Replayed on the out-of-fold data.
    stops : ndarray of int
        The stage each item stopped at.
    """

    thresholds: np.ndarray
    price: float
    accuracy: float
    mean_cost: float
    stops: np.ndarray


def check_thresholds(thresholds: np.ndarray) -> None:
    """Assert the module's invariant."""
    t = np.asarray(thresholds)
    assert t.ndim == 2 and t.shape[0] >= 1, "one row of thresholds per stage"
    assert np.all((t >= 0.0) & (t <= 1.0)), "thresholds lie in [0, 1]"
    assert not t[-1].any(), "the last stage always answers"


def replay(thresholds, proba: Sequence[np.ndarray], costs: np.ndarray, y: np.ndarray):
    """Run the cascade on recorded probabilities.

    Parameters
    ----------
    thresholds : array of shape (stages, classes)
    proba : sequence of arrays of shape (n, classes)
        Per stage, each item's class probabilities from that prefix's model.
    costs : array of shape (n, stages)
        Each item's predicted cost of stopping at each stage (cumulative: the prefix's cost).
    y : array of shape (n,)
        True class positions (columns of ``proba``).

    Returns
    -------
    (accuracy, mean_cost, stops)
    """
    thresholds = np.asarray(thresholds, dtype=float)
    n = len(y)
    stops = np.full(n, len(proba) - 1)
    open_ = np.ones(n, dtype=bool)
    for stage, p in enumerate(proba[:-1]):
        pred = p.argmax(axis=1)
        sure = p[np.arange(n), pred] >= thresholds[stage, pred]
        now = open_ & sure
        stops[now] = stage
        open_ &= ~sure
    final = np.stack([p.argmax(axis=1) for p in proba], axis=1)[np.arange(n), stops]
    return float(np.mean(final == y)), float(np.mean(costs[np.arange(n), stops])), stops


def fit_thresholds(
    proba: Sequence[np.ndarray], costs: np.ndarray, y: np.ndarray, price: float, *, sweeps: int = 3, grid: int = 32,
):
    """Thresholds maximising ``accuracy - price * mean_cost`` on the given out-of-fold data.

    Coordinate ascent: each (stage, class) threshold in turn is set to the best of ``grid + 1``
    quantiles of the observed confidences for that class at that stage (and 1, "never stop
    here"), holding the others;
    ``sweeps`` passes over all of them. Starts from "never stop early" -- the plain set -- so the
    result is never worse on this data than serving the whole set.

    Returns
    -------
    CascadeFit
    """
    k, classes = len(proba), proba[0].shape[1]
    t = np.zeros((k, classes))
    t[:-1] = 1.0
    n = len(y)

    def objective(th):
        acc, cost, _ = replay(th, proba, costs, y)
        return acc - price * cost

    best = objective(t)
    for _ in range(sweeps):
        improved = False
        for stage in range(k - 1):
            p = proba[stage]
            pred = p.argmax(axis=1)
            conf = p[np.arange(n), pred]
            for c in range(classes):
                seen = conf[pred == c]
                quantiles = np.quantile(seen, np.linspace(0.0, 1.0, grid + 1)) if len(seen) else []
                # A threshold strictly between observed confidences behaves like the next one up.
                options = np.unique(np.concatenate([quantiles, [1.0]]))
                for value in options:
                    if value == t[stage, c]:
                        continue
                    trial = t.copy()
                    trial[stage, c] = value
                    score = objective(trial)
                    if score > best + 1e-12:
                        best, t, improved = score, trial, True
        if not improved:
            break
    acc, cost, stops = replay(t, proba, costs, y)
    return CascadeFit(t, float(price), acc, cost, stops)


def fit_to_target(proba, costs, y, *, target_accuracy=None, mean_cost=None, iterations: int = 20) -> CascadeFit:
    """Thresholds for the cheapest cascade meeting ``target_accuracy``, or the most accurate
    within ``mean_cost`` (exactly one of them), by bisection on the price.

    A higher price stops earlier: mean cost falls, and accuracy with it. The bisection keeps the
    best fit that meets the target; if even price 0 (the plain set, as accurate as it gets)
    misses ``target_accuracy``, that fit is returned.
    """
    if (target_accuracy is None) == (mean_cost is None):
        raise ValueError("give exactly one of target_accuracy and mean_cost")
    scale = float(np.max(costs)) or 1.0
    lo, hi = 0.0, 10.0 / scale  # at hi a unit of accuracy is worth a tenth of the largest cost
    best = fit_thresholds(proba, costs, y, 0.0)
    if target_accuracy is not None and best.accuracy < target_accuracy:
        return best
    for _ in range(iterations):
        price = (lo + hi) / 2.0
        fit = fit_thresholds(proba, costs, y, price)
        meets = fit.accuracy >= target_accuracy if target_accuracy is not None else fit.mean_cost <= mean_cost
        if meets:
            better = fit.mean_cost < best.mean_cost if target_accuracy is not None else fit.accuracy > best.accuracy
            if better or (mean_cost is not None and best.mean_cost > mean_cost):
                best = fit
            if target_accuracy is not None:
                lo = price
            else:
                hi = price
        else:
            if target_accuracy is not None:
                hi = price
            else:
                lo = price
    return best
