"""Values passed across the API: what the black box returns and what a lookup answers."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Choice", "Expansion", "check_accuracy", "check_expansion", "check_real", "is_real"]


def is_real(value) -> bool:
    """Whether ``value`` is a real number: Python or numpy ints and floats, never a bool.

    The one test every validator in polydom uses, so that ``True`` is never taken for 1 and
    ``numpy.float32(0.5)`` is always taken for 0.5.
    """
    import numpy as np

    if isinstance(value, (bool, np.bool_)):
        return False
    return isinstance(value, (numbers.Real, np.integer, np.floating))


def check_real(name: str, value, *, low: float | None = None, allow_inf: bool = False) -> float:
    """``value`` as a float, or one clear error naming ``name``: ``TypeError`` for a non-number,
    ``ValueError`` for NaN, an infinity (unless ``allow_inf``) or a value below ``low``."""
    if not is_real(value):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if math.isnan(value) or (math.isinf(value) and not allow_inf):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low}, got {value!r}")
    return value


@dataclass(frozen=True)
class Expansion:
    """What the black box may return for a feature set: its accuracy and the trained model.

    Parameters
    ----------
    accuracy : float
        In ``[0, 1]``; the quantity polydom maximises.
    model : object, optional
        Returned to the caller in :attr:`Choice.model`.
    std_error : float, optional
        The standard error of ``accuracy`` (for cross-validation: the spread of the fold scores
        over the square root of their number). Lets the index treat sets whose accuracies are
        within noise of each other as ties and serve the cheaper.
    info : object, optional
        Anything else the black box wants back in the building process (for example, which
        learner won and its fold scores, when sets are trained in worker processes); handed to
        the black box's ``remember(features, expansion)`` when it has one, never stored.
    """

    accuracy: float
    model: Any = None
    std_error: float | None = None
    info: Any = field(default=None, compare=False, repr=False)


def check_accuracy(value, features) -> tuple[float, Any]:
    """``(accuracy, model)`` from a black-box result, or one clear error naming the set."""
    checked = check_expansion(value, features)
    return checked.accuracy, checked.model


def check_expansion(value, features) -> Expansion:
    """A black-box result as a validated :class:`Expansion`, or one clear error naming the set."""
    if isinstance(value, Expansion):
        acc, model, se, info = value.accuracy, value.model, value.std_error, value.info
    else:
        acc, model, se, info = value, None, None, None
    if se is not None:
        if not is_real(se) or not (math.isfinite(se) and se >= 0):
            raise ValueError(f"expand({sorted(features)}) returned std_error {se!r}; it must be a finite number >= 0")
        se = float(se)
    if not is_real(acc):
        raise TypeError(
            f"expand({sorted(features)}) must return a number in [0, 1] or an Expansion, got {value!r}"
        )
    acc = float(acc)
    if not (math.isfinite(acc) and 0.0 <= acc <= 1.0):
        raise ValueError(f"expand({sorted(features)}) returned accuracy {acc!r}; it must be finite and in [0, 1]")
    return Expansion(acc, model, se, info)


class Choice(tuple):
    """The answer to a lookup: which features to compute and which model to apply.

    An immutable tuple ``(features, accuracy, cost, key)`` plus a handle on the model store and the
    score's standard error, built in a few hundred nanoseconds because it sits on the request path.
    Two choices are equal when their first four fields are.

    Attributes
    ----------
    features : frozenset of str
        The feature set to compute.
    accuracy : float
        The score the index ranks the set by: its accuracy as the black box reported it, or the
        monotone fit of those accuracies (``scores="monotone"``; ``index.measured_scores`` keeps
        the reported one).
    cost : float
        The set's cost at the query size (the sum of its features' cost curves there).
    key : int
        The set's bitmask over the index's feature order.
    model : object or None
        The model trained on exactly ``features`` (loaded on first access for stored indexes).
    std_error : float or None
        The standard error of the set's measured score (``index.measured_scores``: the mean over
        cross-validation folds, or what the black box reported), which ``accuracy`` is ranked
        from; None when the index keeps none for this set.
    """

    __slots__ = ()

    def __new__(cls, features, accuracy, cost, key, models=None, std_error=None):
        return tuple.__new__(cls, (features, accuracy, cost, key, models, std_error))

    def with_cost(self, cost: float) -> "Choice":
        """The same answer with another ``cost`` (a measured time instead of the prediction)."""
        return tuple.__new__(type(self), (self[0], self[1], float(cost), self[3], self[4], self[5]))

    @property
    def features(self) -> frozenset:
        return self[0]

    @property
    def accuracy(self) -> float:
        return self[1]

    @property
    def cost(self) -> float:
        return self[2]

    @property
    def key(self) -> int:
        return self[3]

    @property
    def model(self):
        models = self[4]
        return None if models is None else models.get(self[3])

    @property
    def std_error(self) -> float | None:
        return self[5]

    def __eq__(self, other) -> bool:
        if not isinstance(other, Choice):
            return NotImplemented
        return self[:4] == other[:4]

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(self[:4])

    def __repr__(self) -> str:
        error = "" if self[5] is None else f", std_error={self[5]!r}"
        return f"Choice(features={sorted(self[0])!r}, accuracy={self[1]!r}{error}, cost={self[2]!r})"

    def __reduce__(self):
        return (Choice, (self[0], self[1], self[2], self[3], None, self[5]))
