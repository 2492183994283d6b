"""Confidence cascades on recorded out-of-fold probabilities."""

import numpy as np
import pytest

from polydom.index.cascade import check_thresholds, fit_thresholds, fit_to_target, replay


def _data(seed=0, n=400, classes=3, stages=3):
    """Stage s predicts right with probability .55 + .15 s, and is more confident when right."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    proba = []
    for s in range(stages):
        right = rng.random(n) < 0.55 + 0.15 * s
        pred = np.where(right, y, (y + rng.integers(1, classes, n)) % classes)
        conf = np.where(right, rng.uniform(0.5, 1.0, n), rng.uniform(0.34, 0.8, n))
        p = np.full((n, classes), 0.0)
        p[np.arange(n), pred] = conf
        rest = (1 - conf) / (classes - 1)
        for c in range(classes):
            p[:, c] = np.where(pred == c, conf, rest)
        proba.append(p)
    sizes = rng.uniform(1, 3, n)
    costs = np.stack([sizes * (s + 1) for s in range(stages)], axis=1)  # cumulative prefix costs
    return proba, costs, y


def test_thresholds_of_one_compute_everything_and_of_zero_only_the_first_prefix():
    proba, costs, y = _data()
    ones = np.ones((3, 3))
    ones[-1] = 0
    acc, cost, stops = replay(ones, proba, costs, y)
    assert (stops == 2).all() and cost == pytest.approx(costs[:, 2].mean())
    assert acc == pytest.approx(np.mean(proba[2].argmax(axis=1) == y))
    acc, cost, stops = replay(np.zeros((3, 3)), proba, costs, y)
    assert (stops == 0).all() and cost == pytest.approx(costs[:, 0].mean())
    assert acc == pytest.approx(np.mean(proba[0].argmax(axis=1) == y))


def test_the_fit_reports_what_a_replay_gives_and_trades_cost_for_accuracy():
    proba, costs, y = _data(1)
    plain_acc = np.mean(proba[-1].argmax(axis=1) == y)
    free = fit_thresholds(proba, costs, y, price=0.0)
    check_thresholds(free.thresholds)
    assert (free.accuracy, free.mean_cost) == pytest.approx(replay(free.thresholds, proba, costs, y)[:2])
    assert free.accuracy >= plain_acc  # never worse than the plain set on its own data
    dear = fit_thresholds(proba, costs, y, price=0.2)
    assert dear.mean_cost < free.mean_cost
    assert dear.accuracy - 0.2 * dear.mean_cost >= plain_acc - 0.2 * costs[:, -1].mean()


def test_targets_are_met_by_bisection_on_the_price():
    proba, costs, y = _data(2)
    plain_acc = np.mean(proba[-1].argmax(axis=1) == y)
    fit = fit_to_target(proba, costs, y, target_accuracy=plain_acc - 0.02)
    assert fit.accuracy >= plain_acc - 0.02 and fit.mean_cost < costs[:, -1].mean()
    budget = costs[:, -1].mean() * 0.6
    fit = fit_to_target(proba, costs, y, mean_cost=budget)
    assert fit.mean_cost <= budget
    with pytest.raises(ValueError, match="exactly one"):
        fit_to_target(proba, costs, y)
