"""A stream under a mean budget: the fitted price, the honoured tie split, the guard."""

import doctest
import math

import numpy as np
import pytest

import polydom
from polydom.serving import stream as stream_module
from polydom.index.queries import Batch
from polydom.index.values import Choice
from polydom.serving.stream import StreamBudget, _hull_table, _positions

BACKENDS = [{}, {"backend": "greedy", "n0": 1.0}]


def _abc(**build_options):
    """The issue's example: skyline A (cost 1, .70), B (2, .75), C (3, .90) and the empty set."""
    costs = {"a": [1.0], "b": [2.0], "c": [3.0]}
    acc = {"a": 0.70, "b": 0.75, "c": 0.90}
    return polydom.build(costs, lambda s: max([acc[f] for f in s], default=0.5), **build_options)


def _synthetic(seed=3, **build_options):
    inst = polydom.make_synthetic(6, k=None, seed=seed)
    return polydom.build(inst.costs, inst.expand, **build_options)


def test_docstring_examples_run_and_the_class_is_exported():
    assert doctest.testmod(stream_module, raise_on_error=False).failed == 0
    assert polydom.StreamBudget is StreamBudget and "StreamBudget" in polydom.__all__


@pytest.mark.parametrize("build_options", BACKENDS, ids=["polydom", "greedy"])
def test_abc_mixing_reaches_the_lp_optimum(build_options):
    index = _abc(**build_options)
    n = 10_000
    budget = StreamBudget(index, 2.0, sizes=[1.0])
    assert budget.price_ == pytest.approx(0.1) and budget.tie_fraction_ == pytest.approx(0.5)
    assert budget.expected_accuracy_ == pytest.approx(0.80) and budget.expected_cost_ == pytest.approx(2.0)
    served = budget.choose_many(np.ones(n))
    assert isinstance(served, Batch) and len(served) == n
    assert served.accuracy.mean() == pytest.approx(0.80, abs=1e-9)
    assert math.fsum(served.cost.tolist()) <= 2.0 * n
    assert budget.spent == math.fsum(served.cost.tolist()) and budget.served == n
    # Deterministic alternation: the cheaper set first, so no prefix spends above its share.
    assert (np.cumsum(served.cost) <= 2.0 * np.arange(1, n + 1)).all()
    # The rules it beats: ties to the cheaper set serve A to everyone, per-item lookup serves B.
    _, hull_cost, hull_acc, _, slope = _hull_table(index, [1.0], None)
    cheap, _ = _positions(slope, budget.price_)
    assert hull_acc[0, cheap[0]] == 0.70
    if not build_options:
        assert index.lookup(1.0, 2.0).accuracy == 0.75


def test_abc_random_ties_reach_it_in_expectation_and_the_seed_reproduces_them():
    index = _abc()
    n = 20_000
    runs = [StreamBudget(index, 2.0, sizes=[1.0], tie_rule="random", seed=s).choose_many(np.ones(n)) for s in (7, 7, 8)]
    assert (runs[0].keys == runs[1].keys).all() and not (runs[0].keys == runs[2].keys).all()
    for run in runs:
        assert run.accuracy.mean() == pytest.approx(0.80, abs=0.005)  # 5 standard errors
        assert run.cost.mean() == pytest.approx(2.0, abs=0.05)
    guarded = StreamBudget(index, 2.0, sizes=[1.0], tie_rule="random", seed=9, horizon=n)
    served = guarded.choose_many(np.ones(n))
    assert math.fsum(served.cost.tolist()) <= 2.0 * n and guarded.remaining >= 0


@pytest.mark.parametrize("build_options", BACKENDS, ids=["polydom", "greedy"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_one_size_with_the_cap_at_the_mean_budget_beats_per_item_lookup(build_options, seed):
    index = _synthetic(seed, **build_options)
    size = 40.0
    costs = index.options_at(size)[1]
    for mean_budget in np.quantile(costs, [0.2, 0.5, 0.8]):
        mean_budget = float(mean_budget)
        per_item = index.lookup(size, mean_budget)
        budget = StreamBudget(index, mean_budget, sizes=[size], max_item_budget=mean_budget)
        assert budget.expected_accuracy_ >= per_item.accuracy - 1e-12
        served = budget.choose_many(np.full(2000, size))
        assert served.cost.max() <= mean_budget
        assert served.cost.mean() <= mean_budget * (1 + 1e-12)
        assert served.accuracy.mean() >= per_item.accuracy - 1e-12
    # Without the cap, a budget between two sets' costs is met by mixing, never below per-item lookup.
    gains = []
    for low, high in zip(costs[1:-1:2], costs[2::2]):
        mean_budget = (low + high) / 2
        per_item = index.lookup(size, mean_budget)
        budget = StreamBudget(index, mean_budget, sizes=[size])
        served = budget.choose_many(np.full(2000, size))
        assert served.cost.mean() <= mean_budget * (1 + 1e-12)
        assert served.accuracy.mean() >= per_item.accuracy - 1e-3
        gains.append(served.accuracy.mean() - per_item.accuracy)
    assert max(gains) > 0


@pytest.mark.parametrize("build_options", BACKENDS, ids=["polydom", "greedy"])
def test_the_price_is_the_batch_plans_dual(build_options):
    index = _synthetic(4, **build_options)
    sample = np.random.default_rng(4).uniform(0, 80, 500)
    for mean_budget in (200.0, 800.0, 2500.0):
        budget = StreamBudget(index, mean_budget, sizes=sample)
        plan = index.plan_batch(sample, mean_budget * len(sample))
        assert budget.expected_cost_ == pytest.approx(mean_budget, rel=1e-9)
        assert budget.expected_accuracy_ == pytest.approx(plan.accuracy_bound, abs=1e-9)
        # Served the sample itself, the spend misses the budget by at most one item's dearest set:
        # with sizes drawn from a continuum, about one item ties at the price.
        served = budget.choose_many(sample)
        dearest = max(index.options_at(float(s))[1][-1] for s in sample)
        assert mean_budget * len(sample) - dearest <= math.fsum(served.cost.tolist()) <= mean_budget * len(sample)
    generous = StreamBudget(index, 1e9, sizes=sample)
    assert generous.price_ == 0.0
    best = generous.choose_many(sample)
    assert list(best.accuracy) == [max(index.options_at(float(s))[2]) for s in sample]


@pytest.mark.parametrize("build_options", BACKENDS, ids=["polydom", "greedy"])
def test_the_guard_holds_under_an_adversarial_order(build_options):
    index = _synthetic(5, **build_options)
    rng = np.random.default_rng(5)
    sample = rng.uniform(0, 80, 400)
    mean_budget = 600.0
    for stream in (np.sort(sample)[::-1], np.full(400, 80.0)):  # dearest first; a shift to large items
        budget = StreamBudget(index, mean_budget, sizes=sample, horizon=len(stream))
        served = budget.choose_many(stream)
        assert math.fsum(served.cost.tolist()) <= mean_budget * len(stream)
        assert budget.remaining == pytest.approx(mean_budget * len(stream) - budget.spent)
        # Past the horizon items draw on what is left, and the total still holds.
        more = budget.choose_many(stream[:50])
        assert budget.spent <= mean_budget * len(stream) and len(more) == 50
    # One item at a time, the same answers as a batch.
    one = StreamBudget(index, mean_budget, sizes=sample, horizon=100)
    many = StreamBudget(index, mean_budget, sizes=sample, horizon=100)
    choices = [one.choose(float(s)) for s in sample[:100]]
    batch = many.choose_many(sample[:100])
    assert all(isinstance(c, Choice) for c in choices)
    assert choices == [batch[i] for i in range(100)]


def test_spend_is_reported_and_reset():
    index = _abc()
    budget = StreamBudget(index, 2.0, sizes=[1.0], horizon=10)
    choice = budget.choose(1.0)
    assert choice.features == frozenset({"a"}) and choice.cost == 1.0
    report = budget.summary()
    assert report == {"mean_budget": 2.0, "price": budget.price_, "tie_fraction": budget.tie_fraction_,
                      "served": 1, "spent": 1.0, "mean_cost": 1.0, "horizon": 10, "burst": None, "remaining": 19.0}
    assert "served=1" in repr(budget)
    budget.reset()
    assert budget.spent == 0.0 and budget.served == 0 and budget.remaining == 20.0
    assert StreamBudget(index, 2.0, sizes=[1.0]).remaining is None


def test_bad_input_is_named():
    index = _abc()
    cases = [
        (dict(mean_budget=-1.0), ValueError, "mean_budget must be finite and >= 0"),
        (dict(mean_budget=math.inf), ValueError, "mean_budget must be finite and >= 0"),
        (dict(mean_budget=math.nan), ValueError, "mean_budget must be finite and >= 0"),
        (dict(mean_budget="2"), TypeError, "mean_budget must be a real number"),
        (dict(sizes=[]), ValueError, "sizes must be a non-empty 1-D sample"),
        (dict(sizes=None), ValueError, "sizes must be a non-empty 1-D sample"),
        (dict(sizes=[[1.0]]), ValueError, "sizes must be a non-empty 1-D sample"),
        (dict(sizes=[1.0, -2.0]), ValueError, "size must be >= 0, got .*-2.0.* at position 1"),
        (dict(horizon=0), ValueError, "horizon must be >= 1"),
        (dict(horizon=2.5), TypeError, "horizon must be a positive integer"),
        (dict(horizon=True), TypeError, "horizon must be a positive integer"),
        (dict(tie_rule="cheapest"), ValueError, "tie_rule must be one of"),
        (dict(seed="x"), TypeError, "seed must be an integer or None"),
        (dict(max_item_budget=-1.0), ValueError, "max_item_budget must be >= 0"),
    ]
    for options, error, message in cases:
        args = {"mean_budget": 2.0, "sizes": [1.0], **options}
        with pytest.raises(error, match=message):
            StreamBudget(index, args.pop("mean_budget"), **args)
    with pytest.raises(TypeError, match="index must be a polydom index"):
        StreamBudget(object(), 2.0, sizes=[1.0])
    budget = StreamBudget(index, 2.0, sizes=[1.0])
    with pytest.raises(ValueError, match="size is NaN at position 0"):
        budget.choose(math.nan)
    assert budget.served == 0


def test_an_unreachable_budget_and_an_exhausted_guard_are_named(costly_backend):
    with pytest.raises(ValueError, match="mean_budget=0.5 is below the mean cost of the cheapest sets"):
        StreamBudget(costly_backend, 0.5, sizes=[0.0, 1.0])
    budget = StreamBudget(costly_backend, 3.0, sizes=[0.0], horizon=1)
    assert budget.choose(0.0).cost == 2.0
    assert budget.choose(0.0).cost == 1.0  # what is left buys only the cheaper set
    with pytest.raises(RuntimeError, match="the stream's budget is spent: 0.0 remains"):
        budget.choose(0.0)
    assert budget.spent == 3.0 and budget.served == 2


def test_the_token_bucket_holds_an_unbounded_stream_under_an_adversarial_order():
    index = _synthetic()
    sample = np.linspace(1.0, 100.0, 200)
    mean_budget = float(np.median([max(index.options_at(s)[1]) for s in sample])) / 4
    burst = max(max(index.options_at(s)[1]) for s in sample)  # room for the dearest set
    bucket = StreamBudget(index, mean_budget, sizes=sample, burst=burst)
    plain = StreamBudget(index, mean_budget, sizes=sample)
    # The dearest items first: a price fitted on the whole sample overspends on them.
    stream = np.sort(np.tile(sample, 5))[::-1]
    for k, size in enumerate(stream, start=1):
        bucket.choose(size)
        plain.choose(size)
        assert bucket.spent <= k * mean_budget + burst + 1e-9 * k
    assert plain.spent > len(stream) // 2 * mean_budget + burst  # without the bucket the head overspends
    assert bucket.summary()["burst"] == burst and bucket.remaining >= 0


def test_the_online_price_follows_a_stream_whose_sizes_drift():
    index = _synthetic()
    small = np.linspace(1.0, 20.0, 100)
    mean_budget = float(np.mean([np.median(index.options_at(s)[1]) for s in small]))
    fixed = StreamBudget(index, mean_budget, sizes=small)
    online = StreamBudget(index, mean_budget, sizes=small, adapt=0.05)
    drifted = np.random.default_rng(0).uniform(60.0, 100.0, 3000)  # the stream brings larger items
    fixed.choose_many(drifted)
    online.choose_many(drifted)
    assert fixed.spent / fixed.served > 1.2 * mean_budget
    assert abs(online.spent / online.served - mean_budget) < 0.1 * mean_budget
    assert online.price_ > online.fitted_price_
    online.reset()
    assert online.price_ == online.fitted_price_ and online.served == 0


@pytest.mark.parametrize("options, message", [
    ({"burst": -1.0}, "burst"), ({"adapt": math.nan}, "adapt"), ({"burst": 1.0, "horizon": 3}, "not both"),
])
def test_bad_bucket_and_adapt_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        StreamBudget(_abc(), 2.0, sizes=[1.0], **options)
