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
    (dict(guard_quantile=1.0), "guard_quantile"),
    (dict(guard_rows=((1.0, 1.0),)), "guard_rows"),
    (dict(laws=((2.0, 1.0), None, None)), "law"),
])
def test_a_record_that_breaks_an_invariant_is_refused_naming_it(change, field):
    import dataclasses

    with pytest.raises(ValueError, match=field):
        dataclasses.replace(_record(), **change)
