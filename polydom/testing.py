"""Brute-force oracles for checking an index against every one of the 2**|F| feature sets.

Used by polydom's own tests and available to users who want to check their index on a small
instance. Exponential in the number of features: keep it to about 12.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping

import numpy as np

from polydom.index import as_cost_curve

__all__ = ["BruteForce", "RELATIVE_SLACK"]

#: Acceptance slack: an answer is right when its cost <= budget * (1 + s) and its accuracy is at
#: least the best among sets costing <= budget * (1 - s).
RELATIVE_SLACK = 1e-9


class BruteForce:
    """Every feature set with its accuracy and cost curve, for exhaustive checks.

    Parameters
    ----------
    costs : mapping of str to cost curve
    accuracy : callable
        ``accuracy(frozenset) -> float`` (an :class:`~polydom.Expansion` is accepted too).
    """

    def __init__(self, costs: Mapping, accuracy: Callable):
        self.names = list(costs)
        curves = [as_cost_curve(costs[n]) for n in self.names]
        width = max(len(c.coefficients) for c in curves)
        self._feature_coef = np.array([c.padded(width) for c in curves])
        sets, accs = [], []
        for r in range(len(self.names) + 1):
            for combo in itertools.combinations(range(len(self.names)), r):
                fs = frozenset(self.names[i] for i in combo)
                a = accuracy(fs)
                a = getattr(a, "accuracy", a)
                sets.append(fs)
                accs.append(float(a))
        self.sets = sets
        self.accuracy = np.array(accs)
        member = np.array([[n in s for n in self.names] for s in sets], dtype=float)
        self._member = member

    def costs_at(self, size: float) -> np.ndarray:
        """Cost of every set at ``size``: the sum of its features' costs there (Eq. 1)."""
        per_feature = np.array([sum(c * size**k for k, c in enumerate(row)) for row in self._feature_coef])
        return self._member @ per_feature

    def best_accuracy(self, size: float, budget: float) -> float:
        """The optimum: highest accuracy among sets costing at most ``budget`` at ``size``."""
        costs = self.costs_at(size)
        fits = costs <= budget
        return float(self.accuracy[fits].max()) if fits.any() else -math.inf

    def check(self, choice, size: float, budget: float, *, alpha: float = 1.0) -> None:
        """Assert ``choice`` is a right answer to ``(size, budget)`` within :data:`RELATIVE_SLACK`."""
        s = RELATIVE_SLACK
        costs = self.costs_at(size)
        idx = self.sets.index(frozenset(choice.features))
        true_cost = costs[idx]
        assert math.isclose(choice.cost, true_cost, rel_tol=1e-9, abs_tol=1e-300), (
            f"reported cost {choice.cost} != actual {true_cost} for {sorted(choice.features)} at n={size}"
        )
        assert choice.accuracy == self.accuracy[idx]
        assert true_cost <= budget * (1 + s), f"{sorted(choice.features)} costs {true_cost} > budget {budget} at n={size}"
        fits = costs <= budget * (1 - s)
        best = float(self.accuracy[fits].max()) if fits.any() else -math.inf
        assert alpha * choice.accuracy >= best - 1e-15, (
            f"at n={size}, c={budget}: returned accuracy {choice.accuracy} ({sorted(choice.features)}), "
            f"optimum {best}, alpha {alpha}"
        )
