"""Every answer carries the standard error of its set's measured score, on every backend and path."""

import math

import numpy as np
import pytest

import polydom
from polydom.serving.stream import StreamBudget

COSTS = {"a": [1.0], "b": [2.0, 0.01], "c": [3.0]}
SIZES = (1.0, 50.0, 100.0)
BUDGETS = (0.0, 1.0, 2.5, 3.5, 5.0, 7.0, 100.0)


def _measure(s):
    """A black box whose score and standard error depend on the set; {a} reports no error."""
    accuracy = 0.5 + 0.1 * len(s) + (0.05 if "c" in s else 0.0)
    std_error = None if s == frozenset({"a"}) else 0.001 * (1 + sum(ord(f) - ord("a") + 1 for f in s))
    return polydom.Expansion(accuracy, None, std_error=std_error)


def _expected(index, features):
    """What the black box reported for the set (not what the index stored)."""
    return _measure(frozenset(features)).std_error


class ScriptedClock:
    """Time moves only when a feature is computed, by its predicted cost at ``size``."""

    def __init__(self, index, size):
        self.now, self.index, self.size = 0.0, index, size

    def __call__(self):
        return self.now

    def compute(self, name):
        self.now += self.index.cost_of([name], self.size)


@pytest.mark.parametrize("backend", ["polydom", "greedy", "greedy-cost"])
def test_lookups_batches_and_walks_answer_with_the_sets_std_error_before_and_after_storage(backend, tmp_path):
    options = {} if backend == "polydom" else {"n0": 50.0}
    index = polydom.build(COSTS, _measure, backend=backend, domain=(1.0, 100.0), **options)
    assert index.std_error and index.space.mask({"a"}) not in index.std_error
    assert index.std_error == {m: _expected(index, index.space.frozenset(m)) for m in index.trained
                               if m != index.space.mask({"a"})}
    index.save(tmp_path / "ix")
    loaded = polydom.load(tmp_path / "ix")
    assert loaded.std_error == pytest.approx(index.std_error)
    for ix in (index, loaded):
        queries = [(size, budget) for size in SIZES for budget in BUDGETS]
        batch = ix.lookup_many([q[0] for q in queries], [q[1] for q in queries])
        seen = set()
        for i, (size, budget) in enumerate(queries):
            choice = ix.lookup(size, budget)
            expected = _expected(ix, choice.features)
            assert choice.std_error == expected and batch[i].std_error == expected
            column = batch.std_error[i]
            assert math.isnan(column) if expected is None else column == expected
            clock = ScriptedClock(ix, size)
            walked = ix.select(size, budget, clock.compute, clock)
            assert walked.std_error == _expected(ix, walked.features)
            seen.add(choice.features)
        for batch in (ix.plan_batch(list(SIZES), 10.0).choices,  # a planner's answers too
                      StreamBudget(ix, 3.0, sizes=list(SIZES)).choose_many(list(SIZES) * 3),
                      StreamBudget(ix, 3.0, sizes=list(SIZES), adapt=0.1).choose_many(list(SIZES) * 3)):
            for i in range(len(batch)):
                expected = _expected(ix, batch.features(i))
                assert batch[i].std_error == expected
                assert math.isnan(batch.std_error[i]) if expected is None else batch.std_error[i] == expected
        # Answers with and without an error, and sets of several sizes, were served.
        assert frozenset({"a"}) in seen and any(_expected(ix, s) is not None for s in seen if s)


def test_an_index_without_std_errors_answers_none():
    index = polydom.build(COSTS, lambda s: 0.5 + 0.1 * len(s))
    assert index.lookup(1.0, 100.0).std_error is None
    batch = index.lookup_many([1.0, 50.0], [100.0, 0.0])
    assert batch[0].std_error is None and np.isnan(batch.std_error).all()


def test_a_choice_keeps_its_std_error_through_with_cost_and_pickling():
    import pickle

    choice = polydom.build(COSTS, _measure).lookup(1.0, 100.0)
    assert choice.std_error is not None
    assert choice.with_cost(0.5).std_error == choice.std_error
    assert f"std_error={choice.std_error!r}" in repr(choice)
    again = pickle.loads(pickle.dumps(choice))
    assert again == choice and again.std_error == choice.std_error


def test_a_greedy_index_with_a_crafted_std_error_array_is_refused(tmp_path):
    from polydom.index import IndexState
    from polydom.greedy import GreedyIndex

    index = polydom.build(COSTS, _measure, backend="greedy", n0=50.0, domain=(1.0, 100.0))
    state = index.to_state()
    arrays = dict(state.arrays)
    arrays["trained_std_error"] = np.r_[arrays["trained_std_error"][:-1], -1.0]
    with pytest.raises(ValueError, match="trained_std_error"):
        GreedyIndex.from_state(IndexState(state.meta, arrays, state.models))
    del arrays["trained_std_error"]  # an index stored before the errors were kept
    assert GreedyIndex.from_state(IndexState(state.meta, arrays, state.models)).std_error == {}
