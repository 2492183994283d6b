"""The paper's baselines: PolyDomIndexAll (a skyline at every crossing) and NaiveLookup (a scan)."""

from __future__ import annotations

import math

import numpy as np

from polydom.index.costs.poly import horner, horner_scalar

from .build import index_from_expanded
from .queries import BUDGET_SLACK
from .skyline import PolyDomIndex, check_query
from .values import Choice

__all__ = ["PolyDomIndexAll", "NaiveLookup"]


class PolyDomIndexAll(PolyDomIndex):
    """PolyDom with a skyline stored at *every* crossing of candidate curves, not only the
    interesting ones. Same candidates, same answers, far more entries (the paper's Metric 2)."""

    backend = "polydom-index-all"

    @classmethod
    def from_index(cls, index: PolyDomIndex) -> "PolyDomIndexAll":
        """Rebuild ``index``'s skylines at every crossing (no retraining)."""
        return index_from_expanded(
            index.space, index.costs, index.explored, domain=index.domain,
            candidate_alpha=index.params.get("candidate_alpha", 1.0), index_all=True,
            models=index.models, stats={k: v for k, v in index.stats.items() if k in ("trained", "expanded", "pruned")},
            params=index.params, std_error=index.std_error, measured=index.measured, cls=cls,
        )


class NaiveLookup:
    """No index: scan every candidate at query time (the paper's NaiveLookup).

    ``lookup`` is the paper's Python scan; ``lookup_numpy`` the same scan vectorised. Both return
    the most accurate candidate whose cost at ``size`` fits the budget; ties go to the cheaper at
    ``size``, then to the better rank (fewer features, lower indices), as PolyDom's.
    """

    backend = "naive-lookup"

    def __init__(self, index: PolyDomIndex):
        self.space = index.space
        self.domain = index.domain
        self.models = index.models
        self.candidates = list(index.candidates)
        self._se = [index.std_error.get(m) for m in self.candidates]
        self._acc = list(index.candidate_accuracy)
        self._horner = [tuple(reversed(r)) for r in index.candidate_coefficients.tolist()]
        self._names = [self.space.frozenset(m) for m in self.candidates]
        self._coef = index.candidate_coefficients
        self._acc_arr = np.array(self._acc)
        self.stats = {"index_entries": len(self.candidates), "candidates": len(self.candidates)}

    @classmethod
    def from_index(cls, index: PolyDomIndex) -> "NaiveLookup":
        return cls(index)

    def _check(self, size, budget) -> tuple[float, float]:
        return check_query(size, budget, self.domain)

    def lookup(self, size: float, budget: float) -> Choice:
        """Linear scan over the candidates in pure Python."""
        size, budget = self._check(size, budget)
        budget *= BUDGET_SLACK
        best, best_acc, best_cost = -1, -math.inf, math.inf
        for i, h in enumerate(self._horner):
            c = horner_scalar(h, size)
            if c <= budget:
                a = self._acc[i]
                if a > best_acc or (a == best_acc and c < best_cost):
                    best, best_acc, best_cost = i, a, c
        return Choice(self._names[best], best_acc, best_cost, self.candidates[best], self.models, self._se[best])

    def lookup_numpy(self, size: float, budget: float) -> Choice:
        """The same scan, vectorised with numpy."""
        size, budget = self._check(size, budget)
        budget *= BUDGET_SLACK
        coef = self._coef
        cost = horner(coef, np.full(len(coef), size))
        fits = cost <= budget
        acc = np.where(fits, self._acc_arr, -np.inf)
        top = acc.max()
        tied = np.flatnonzero(acc == top)
        i = int(tied[np.argmin(cost[tied])])
        return Choice(self._names[i], self._acc[i], float(cost[i]), self.candidates[i], self.models, self._se[i])
