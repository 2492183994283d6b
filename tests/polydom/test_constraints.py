"""The declarative parameter constraints: what each kind accepts, and the one message it raises."""

import math
from pathlib import Path

import numpy as np
import pytest

from polydom.classifier.constraints import (
    Boolean, Integer, NoneValue, Options, PathLike, Real, Satisfies, SequenceOf, check_param, validate_params,
)


@pytest.mark.parametrize("constraint, good, bad", [
    (Real(low=1.0), [1.0, 2, np.float64(3.5)], [0.5, math.nan, math.inf, True, "2"]),
    (Real(0.0, 1.0), [0.0, 0.5, 1], [-0.1, 1.01]),
    (Integer(low=2), [2, 10, np.int64(3)], [1, 2.0, True, None]),
    (Integer(exclude=(0,)), [-1, 4], [0, False]),
    (Options(("max",)), ["max"], ["min", None, 1]),
    (Boolean(), [True, False], [0, 1, None]),
    (NoneValue(), [None], [0, ""]),
    (PathLike(), ["a", Path("b")], [1, None]),
    (SequenceOf("ints >= 8", Integer(low=8)), [(8, 9), [16]], [(7,), "abc", 8, (8.0,)]),
    (Satisfies(callable, "a callable"), [len], [1]),
])
def test_each_constraint_accepts_what_it_says(constraint, good, bad):
    assert all(constraint.accepts(v) for v in good)
    assert not any(constraint.accepts(v) for v in bad)


def test_the_message_names_the_parameter_every_choice_and_the_value():
    with pytest.raises(ValueError, match=r"^budget must be a finite number >= 0.0 or None, got nan$"):
        check_param("budget", math.nan, [Real(low=0.0), NoneValue()])
    with pytest.raises(ValueError, match=r"^backend must be one of \('a', 'b'\), got 'c'$"):
        check_param("backend", "c", [Options(("a", "b"))])
    with pytest.raises(ValueError, match=r"^n_jobs must be None or a non-zero integer, got 0$"):
        check_param("n_jobs", 0, [NoneValue(), Integer(exclude=(0,))])


def test_validate_params_checks_listed_parameters_in_table_order():
    table = {"a": [Integer(low=0)], "b": [Boolean()]}
    validate_params({"a": 1, "b": True, "unlisted": object()}, table)
    with pytest.raises(ValueError, match="^a must"):
        validate_params({"a": -1, "b": "no"}, table)
