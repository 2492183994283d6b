"""The typed record of what walks read: stored as indexes always stored it, invariants checked."""

import pytest

from polydom.costs.calibration import guard_table, law_table
from polydom.index.serving.params import ServingParams

NAMES = ["grey", "hist", "hog"]
BY_SIZE = {"grey": ((100.0, 1.2), (400.0, 1.4)), "hist": ((100.0, 1.1),), "hog": None}
LAWS = {"grey": ((0.5, 1.0, 2.0), ((100.0, (0.4, 1.0, 1.5)),)), "hist": (None, None), "hog": ((0.8, 1.0, 1.3), None)}


def _record(**changes):
    options = dict(learn_guards=True, guard_table=guard_table(BY_SIZE, NAMES), law_table=law_table(LAWS, NAMES),
                   start_cap=False)
    options.update(changes)
    return ServingParams.from_tables([1.4, 1.1, 1.0], 0.9, **options)


def test_the_record_stores_what_the_fit_always_stored():
    stored = _record().to_params()
    expected = {"cost_guard": [1.4, 1.1, 1.0], "cost_guard_quantile": 0.9,
                **guard_table(BY_SIZE, NAMES), **law_table(LAWS, NAMES), "start_cap": False}
    assert stored == expected and list(stored) == list(expected)
    assert _record(learn_guards=False).to_params()["cost_guard_quantile"] is None
    assert _record(start_cap=True).to_params()["start_cap"] is True


@pytest.mark.parametrize("change, field", [
    (dict(guard_ratios=(0.9, 1.0, 1.0)), "guard_ratios"),
    (dict(guard_quantile=0.4), "guard_quantile"),
    (dict(guard_rows=((1.0, 1.0),)), "guard_rows"),
    (dict(laws=((2.0, 1.0), None, None)), "law"),
])
def test_a_record_that_breaks_an_invariant_is_refused_naming_it(change, field):
    import dataclasses

    with pytest.raises(ValueError, match=field):
        dataclasses.replace(_record(), **change)


def test_stored_params_read_back_as_the_same_record():
    record = _record()
    back = ServingParams.from_params(record.to_params(), len(NAMES))
    assert back == record
    assert back.guards_at(100.0) == record.guard_rows[0] and back.guards_at(250.0) == (1.4, 1.1, 1.0)
    assert back.guards_at() == (1.4, 1.1, 1.0) and back.guards_at(1e6) == record.guard_rows[-1]
    assert back.laws_at(50.0) == record.law_rows[0] and back.laws_at() == record.laws


def test_an_index_saved_without_serving_entries_reads_as_it_was_served():
    old = ServingParams.from_params({}, 3)
    assert old.guard_ratios == (1.0, 1.0, 1.0) and old.start_cap is True and old.learn_guards is False
    assert old.guard_quantile == 0.9 and old.laws_at(10.0) is None
    # Guards without a stated quantile were learned at the default; a null quantile learns nothing.
    assert ServingParams.from_params({"cost_guard": [1.2, 1.0, 1.0]}, 3).learn_guards is True
    assert ServingParams.from_params({"cost_guard": [1.2, 1.0, 1.0], "cost_guard_quantile": None}, 3).learn_guards is False
    # Guards off: per-size guards are off too.
    off = {"cost_guard": None, "cost_guard_sizes": [1.0], "cost_guard_by_size": [[2.0, 2.0, 2.0]]}
    assert ServingParams.from_params(off, 3).guards_at(1.0) == (1.0, 1.0, 1.0)


@pytest.mark.parametrize("stored, key", [
    ({"cost_guard": [1.0, 0.5, 1.0]}, "cost_guard"),
    ({"cost_guard": [1.0, 1.0]}, "cost_guard"),
    ({"cost_guard": [1.0] * 3, "cost_guard_quantile": 0.2}, "cost_guard_quantile"),
    ({"cost_guard": [1.0] * 3, "cost_guard_sizes": ["a"], "cost_guard_by_size": [[1.0] * 3]}, "cost_guard_sizes"),
    ({"cost_guard": [1.0] * 3, "cost_guard_sizes": [1.0, 2.0], "cost_guard_by_size": [[1.0] * 3]}, "cost_guard_by_size"),
    ({"cost_law": [[1.0, 0.5], None, None]}, "cost_law"),
    ({"cost_law": [None] * 3, "cost_law_sizes": [1.0], "cost_law_by_size": []}, "cost_law_by_size"),
])
def test_a_malformed_stored_entry_is_refused_naming_its_key(stored, key):
    with pytest.raises(ValueError, match=f"params\\['{key}'\\]"):
        ServingParams.from_params(stored, 3)


def test_a_cap_at_the_largest_call_is_a_valid_record():
    # Serving(guard=1.0) asks for guards at the largest measured call: the fit must store them.
    capped = ServingParams.from_tables([2.0, 1.0, 1.0], 1.0, learn_guards=True, guard_table={}, law_table={},
                                       start_cap=True)
    assert ServingParams.from_params(capped.to_params(), 3) == capped


def test_the_build_refuses_a_serving_record_that_does_not_fit_its_items():
    import polydom

    costs = {"a": [1.0], "b": [2.0]}
    accuracy = {frozenset(): 0.5, frozenset("a"): 0.6, frozenset("b"): 0.7, frozenset("ab"): 0.8}
    record = ServingParams.from_tables([1.5, 1.2], 0.9, learn_guards=True, guard_table={}, law_table={},
                                       start_cap=False)
    index = polydom.build(costs, accuracy.__getitem__, serving=record)
    assert index.serving_params == record and index.cost_guards() == (1.5, 1.2)
    with pytest.raises(polydom.PolydomError, match="3 guard ratios for 2 items"):
        polydom.build(costs, accuracy.__getitem__, serving=_record())
    with pytest.raises(polydom.PolydomError, match="must be a ServingParams"):
        polydom.build(costs, accuracy.__getitem__, serving=record.to_params())



@pytest.mark.parametrize("backend", ["polydom", "greedy", "greedy-acc", "greedy-cost"])
def test_each_builder_stores_the_record_and_the_steps_as_it_builds(backend):
    """The index leaves its builder with the record and the steps in its params: the build's
    caller writes nothing into it afterwards."""
    from polydom.backends import backend_spec
    from polydom.expansion import ModelRecorder
    from polydom.index.costs.curve import as_cost_curve
    from polydom.lattice import FeatureSpace

    space = FeatureSpace(["grey", "a", "b"])
    curves = [as_cost_curve(c) for c in ([0.5], [1.0], [2.0])]
    scores = {0: 0.5, 1: 0.5, 2: 0.5, 3: 0.6, 4: 0.5, 5: 0.7, 6: 0.5, 7: 0.8}
    record = ServingParams.from_tables([1.3, 1.2, 1.1], 0.9, learn_guards=True, guard_table={}, law_table={},
                                       start_cap=False)
    spec = backend_spec(backend)
    recorder = ModelRecorder(space, lambda names: scores[space.mask(names)])
    try:
        options = {"requires": {"a": ("grey",), "b": ("grey",)}, **({"n0": 1.0} if "n0" in spec.options else {})}
        index = spec.build(space, curves, recorder, domain=(0.0, 10.0), serving=record, **options)
    finally:
        recorder.close()
    assert index.serving_params == record and index.cost_guards() == (1.3, 1.2, 1.1)
    assert index.params["requires"] == {"a": ["grey"], "b": ["grey"]}
