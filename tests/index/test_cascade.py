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


def test_a_threshold_of_one_stops_nothing_even_a_probability_that_rounded_to_one():
    proba, costs, y = _data(2)
    proba[0][:40] = np.eye(3)[proba[0][:40].argmax(axis=1)]  # saturated, as a shrunk LDA's often are
    ones = np.ones((3, 3))
    ones[-1] = 0
    assert (replay(ones, proba, costs, y)[2] == 2).all()
    # The fit can still stop the saturated ones, just below 1, when the price asks for it.
    dear = fit_thresholds(proba, costs, y, price=10.0)
    assert dear.thresholds[0, 0] < 1.0 and (dear.stops[:40] == 0).all()


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


def test_a_stop_can_lose_an_item_but_never_win_one():
    """Out of fold, a prefix right where the whole set is wrong must not pay for stops that lose
    other items: with as many wins as losses, plain accuracy is indifferent to stopping and any
    price buys the stop; the assured accuracy the fit maximises is not."""
    n = 200
    y = np.zeros(n, dtype=int)
    wins, losses = np.arange(0, 10), np.arange(10, 20)
    first = np.tile([0.9, 0.1], (n, 1))
    first[losses] = [0.1, 0.9]  # the prefix is wrong here (and sure of it) ...
    last = np.tile([0.8, 0.2], (n, 1))
    last[wins] = [0.2, 0.8]  # ... and the whole set is wrong here
    costs = np.column_stack([np.ones(n), np.full(n, 10.0)])
    assert replay(np.zeros((2, 2)), [first, last], costs, y)[0] == replay(np.array([[1.0, 1.0], [0, 0]]), [first, last], costs, y)[0]
    fit = fit_thresholds([first, last], costs, y, price=1e-4)
    assert (fit.stops == 1).all() and fit.assured_accuracy == fit.accuracy == pytest.approx(0.95)
    # A dear enough price does buy the stops: the loss is then worth the saving.
    dear = fit_thresholds([first, last], costs, y, price=0.01)
    assert (dear.stops == 0).all() and dear.assured_accuracy == pytest.approx(0.9)


def test_one_threshold_per_stage_unless_per_class():
    proba, costs, y = _data(3, classes=4)
    shared = fit_thresholds(proba, costs, y, price=0.05)
    assert (shared.thresholds[:-1] == shared.thresholds[:-1, :1]).all()
    refined = fit_thresholds(proba, costs, y, price=0.05, per_class=True)
    check_thresholds(refined.thresholds)
    assert refined.assured_accuracy - 0.05 * refined.mean_cost >= shared.assured_accuracy - 0.05 * shared.mean_cost
