"""Query validation and batch answers, shared by every backend's lookup paths."""

from __future__ import annotations

import math

import numpy as np

from .errors import QueryError, QueryTypeError
from .values import Choice, is_real

__all__ = ["BUDGET_SLACK", "Batch", "bad_query", "check_queries", "check_query", "as_real"]

_PLAIN = (float, int)

#: Every backend's lookups and walks count a cost within this relative distance above the budget
#: as fitting (the protocol's slack). Two curves that cross at the query size can be out of order
#: by an ulp there, and a clock matching the curves may sum a set's costs in another order than its
#: budget was summed in; without the slack a budget equal to a set's cost could refuse it.
BUDGET_SLACK = 1.0 + 1e-12


def as_real(name: str, value) -> float:
    """``value`` as a float, or one clear TypeError (bools, arrays, strings and the like)."""
    if is_real(value):
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    raise QueryTypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}")


def bad_query(size, budget, domain) -> Exception:
    try:
        values = {"size": as_real("size", size), "budget": as_real("budget", budget)}
    except QueryTypeError as exc:
        return exc
    for name, value in values.items():
        if math.isnan(value):
            return QueryError(f"{name} is NaN")
        if math.isinf(value) and (name == "size" or value < 0):
            return QueryError(f"{name} must be finite, got {value!r}")
        if value < 0:
            return QueryError(f"{name} must be >= 0, got {value!r}")
    lo, hi = domain
    return QueryError(f"size {size!r} is outside the index's domain [{lo}, {hi}]")


def check_query(size, budget, domain) -> tuple[float, float]:
    """``(size, budget)`` as floats, or one clear error if they are not a valid query for ``domain``.

    An integer too large for a float reads as infinite (:func:`as_real`): such a budget means no
    limit, as ``math.inf`` does; such a size is refused as infinite.
    """
    lo, hi = domain
    if type(size) in _PLAIN and type(budget) in _PLAIN:
        try:
            # An infinite budget is a valid question: the most accurate set, whatever it costs.
            if lo <= size <= hi and size < math.inf and 0.0 <= budget <= math.inf:
                return float(size), float(budget)
        except OverflowError:  # an int beyond float range: read it as +-inf and check again
            return check_query(as_real("size", size), as_real("budget", budget), domain)
        raise bad_query(size, budget, domain)
    n, c = as_real("size", size), as_real("budget", budget)
    return check_query(n, c, domain)


def check_queries(sizes, budgets, domain) -> tuple[np.ndarray, np.ndarray]:
    """Validate a batch of queries; returns them as float arrays."""
    arrays = []
    for name, values in (("sizes", sizes), ("budgets", budgets)):
        try:
            arr = np.asarray(values)
        except (TypeError, ValueError):
            raise QueryTypeError(f"{name} must be an array of real numbers") from None
        if arr.dtype.kind == "O":  # e.g. integers beyond int64: each read as a real (+-inf beyond float)
            arr = np.array([as_real(name, v) for v in arr.ravel().tolist()], dtype=float).reshape(arr.shape)
        if arr.dtype.kind not in "fiu":
            raise QueryTypeError(f"{name} must hold real numbers, got an array of dtype {arr.dtype}")
        arrays.append(arr.astype(float))
    n, c = arrays
    if n.ndim == 0:
        n = n.reshape(1)
    if c.ndim == 0:
        c = np.full(n.shape, float(c))
    if n.ndim != 1 or c.ndim != 1:
        raise QueryError(f"sizes and budgets must be 1-D, got shapes {n.shape} and {c.shape}")
    if len(n) != len(c):
        raise QueryError(f"sizes and budgets differ in length: {len(n)} != {len(c)}")
    lo, hi = domain
    for name, arr in (("size", n), ("budget", c)):
        if np.isnan(arr).any():
            raise QueryError(f"{name} is NaN at position {int(np.flatnonzero(np.isnan(arr))[0])}")
        bad = np.isinf(arr) if name == "size" else np.isneginf(arr)
        if bad.any():
            raise QueryError(f"{name} must be finite; infinite at position {int(np.flatnonzero(bad)[0])}")
        if (arr < 0).any():
            i = int(np.flatnonzero(arr < 0)[0])
            raise QueryError(f"{name} must be >= 0, got {arr[i]!r} at position {i}")
    outside = (n < lo) | (n > hi)
    if outside.any():
        i = int(np.flatnonzero(outside)[0])
        raise QueryError(f"size {n[i]!r} at position {i} is outside the index's domain [{lo}, {hi}]")
    return n, c


class Batch:
    """Answers to many queries as columns; ``batch[i]`` is the :class:`Choice` of query ``i``.

    Attributes
    ----------
    keys : ndarray of int64
        Feature-set bitmasks (over the index's feature order).
    accuracy, cost : ndarray of float64
    std_error : ndarray of float64 or None
        :attr:`Choice.std_error` of each answer, NaN where the index keeps none for the set; None
        when the batch was made without the index's standard errors. Gathered on first read.
    """

    __slots__ = ("keys", "accuracy", "cost", "_std_errors", "_std_error_column", "_space", "_models")

    def __init__(self, keys, accuracy, cost, space, models, std_errors=None):
        # The feature space, models and standard errors are the snapshot the answers were computed
        # from, so a refresh of the index afterwards cannot make this batch decode keys with another
        # space.
        self.keys, self.accuracy, self.cost = keys, accuracy, cost
        self._space, self._models, self._std_errors = space, models, std_errors
        self._std_error_column = None

    @classmethod
    def of(cls, backend, keys, accuracy, cost) -> "Batch":
        """Answers chosen from ``backend``'s options (a planner's): decoded with its feature
        space and models, carrying its standard errors when it keeps any."""
        return cls(keys, accuracy, cost, backend.space, backend.models, backend.std_error)

    @property
    def std_error(self) -> np.ndarray | None:
        if self._std_errors is None:
            return None
        if self._std_error_column is None:
            unique, position = np.unique(np.asarray(self.keys, dtype=np.int64), return_inverse=True)
            table = np.array([self._std_errors.get(int(k), np.nan) for k in unique.tolist()], dtype=float)
            self._std_error_column = table[position.reshape(-1)]
        return self._std_error_column

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: int) -> Choice:
        key = int(self.keys[i])
        se = None if self._std_errors is None else self._std_errors.get(key)
        return Choice(self._space.frozenset(key), float(self.accuracy[i]), float(self.cost[i]), key, self._models, se)

    def features(self, i: int) -> frozenset[str]:
        """Feature names of answer ``i``."""
        return self._space.frozenset(int(self.keys[i]))

    #: Answers a repr spells out; a batch may hold millions, so the rest are only counted.
    _REPR_SHOWN = 3

    def __repr__(self) -> str:
        """The number of answers and the first few, each as its features, accuracy and cost.

        >>> import polydom
        >>> index = polydom.build({"a": [1.0]}, lambda fs: 0.9 if fs else 0.5)
        >>> index.lookup_many([1.0, 1.0], [0.0, 2.0])
        <Batch of 2 answers: {} accuracy 0.5 cost 0; {a} accuracy 0.9 cost 1>
        """
        shown = [
            f"{{{', '.join(sorted(self.features(i)))}}} accuracy {self.accuracy[i]:.4g} cost {self.cost[i]:.4g}"
            for i in range(min(len(self), self._REPR_SHOWN))
        ]
        more = len(self) - len(shown)
        tail = f"; ... {more} more" if more > 0 else ""
        body = f": {'; '.join(shown)}{tail}" if shown else ""
        return f"<Batch of {len(self)} answer{'' if len(self) == 1 else 's'}{body}>"


