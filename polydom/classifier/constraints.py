"""Parameter constraints declared as data, and the one function that checks them.

An estimator lists, per parameter, the kinds of value it accepts (``{"alpha": [Real(low=1.0)]}``);
:func:`validate_params` checks every parameter against its list when ``fit`` starts and raises
one ``ValueError`` naming the parameter, what it accepts and what it got. scikit-learn follows the
same pattern with helpers of its own, but keeps them private, so polydom declares its own few.

>>> validate_params({"alpha": 0.5}, {"alpha": [Real(low=1.0)]})
Traceback (most recent call last):
...
ValueError: alpha must be a finite number >= 1.0, got 0.5
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from polydom.index.values import is_real

__all__ = [
    "Constraint", "Real", "Integer", "Options", "Boolean", "NoneValue", "PathLike", "SequenceOf", "Satisfies",
    "check_param", "validate_params",
]


class Constraint:
    """One kind of value a parameter accepts: ``accepts(value)`` and a phrase for messages."""

    description = "a value"

    def accepts(self, value) -> bool:  # pragma: no cover - every constraint overrides it
        raise NotImplementedError


_is_real = is_real  # polydom's one test for a real number (bools are not numbers)


@dataclass(frozen=True)
class Real(Constraint):
    """A finite real number in ``[low, high]`` (bools are not numbers here)."""

    low: float = -math.inf
    high: float = math.inf

    def accepts(self, value) -> bool:
        return _is_real(value) and math.isfinite(value) and self.low <= value <= self.high

    @property
    def description(self) -> str:
        if math.isfinite(self.low) and math.isfinite(self.high):
            return f"a number in [{self.low}, {self.high}]"
        return f"a finite number >= {self.low}" if math.isfinite(self.low) else "a finite number"


@dataclass(frozen=True)
class Integer(Constraint):
    """An integer ``>= low``, optionally excluding some values (``n_jobs`` may not be 0)."""

    low: int | None = None
    exclude: tuple = ()

    def accepts(self, value) -> bool:
        return (isinstance(value, numbers.Integral) and not isinstance(value, bool)
                and (self.low is None or value >= self.low) and value not in self.exclude)

    @property
    def description(self) -> str:
        if self.exclude == (0,) and self.low is None:
            return "a non-zero integer"
        return "an integer" if self.low is None else f"an integer >= {self.low}"


@dataclass(frozen=True)
class Options(Constraint):
    """One of a fixed set of values (compared with ``==``; strings only match strings)."""

    values: tuple

    def accepts(self, value) -> bool:
        return any(type(value) is type(v) and value == v for v in self.values)

    @property
    def description(self) -> str:
        return f"one of {self.values}" if len(self.values) > 1 else repr(self.values[0])


class Boolean(Constraint):
    """``True`` or ``False`` (not 0 or 1)."""

    description = "True or False"

    def accepts(self, value) -> bool:
        return isinstance(value, bool)


class NoneValue(Constraint):
    """``None``."""

    description = "None"

    def accepts(self, value) -> bool:
        return value is None


class PathLike(Constraint):
    """A path: ``str`` or ``os.PathLike``."""

    description = "a path"

    def accepts(self, value) -> bool:
        return isinstance(value, (str, os.PathLike))


@dataclass(frozen=True)
class SequenceOf(Constraint):
    """A sized, iterable collection other than a string, each item accepted by ``item`` if given."""

    what: str
    item: Constraint | None = None

    def accepts(self, value) -> bool:
        if isinstance(value, (str, bytes)) or not (hasattr(value, "__iter__") and hasattr(value, "__len__")):
            return False
        return self.item is None or all(self.item.accepts(v) for v in value)

    @property
    def description(self) -> str:
        return f"a sequence of {self.what}"


@dataclass(frozen=True)
class Satisfies(Constraint):
    """Anything ``predicate`` accepts, described by ``description`` (e.g. a splitter object)."""

    predicate: Callable[[Any], bool]
    description: str

    def accepts(self, value) -> bool:
        return bool(self.predicate(value))


def check_param(name: str, value, accepted: Iterable[Constraint]) -> None:
    """Raise one ``ValueError`` unless one of ``accepted`` takes ``value``.

    ``O(len(accepted))``.
    """
    accepted = list(accepted)
    if not any(c.accepts(value) for c in accepted):
        raise ValueError(f"{name} must be {' or '.join(c.description for c in accepted)}, got {value!r}")


def validate_params(params: Mapping[str, Any], constraints: Mapping[str, Iterable[Constraint]]) -> None:
    """Check every parameter of ``params`` that ``constraints`` lists, in the table's order."""
    for name, accepted in constraints.items():
        if name in params:
            check_param(name, params[name], accepted)
