"""Monotonicity audit over expanded sets (the paper's Appendix B).

For every expanded ancestor-descendant pair ``F_i ⊊ F_j`` with ``a(F_i) > a(F_j)`` the violation is
``a(F_i) - a(F_j)``: how far the data breaks Information-Never-Hurts (Axiom 2.1). The audit reports
the violations' empirical CDF and their median by distance ``|F_j| - |F_i|``; the largest violation
is the smallest ``e`` for which Axiom 3.10 holds on the expanded sets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

__all__ = ["MonotonicityAudit", "audit_monotonicity"]


@dataclass(frozen=True)
class MonotonicityAudit:
    """Result of :func:`audit_monotonicity`.

    Attributes
    ----------
    pairs : int
        Ancestor-descendant pairs examined.
    violations : numpy.ndarray
        Sorted positive violations ``a(F_i) - a(F_j)``.
    distances : numpy.ndarray
        ``|F_j| - |F_i|`` for each entry of ``violations`` (same order).
    """

    pairs: int
    violations: np.ndarray
    distances: np.ndarray

    @property
    def max_violation(self) -> float:
        """The smallest ``e`` under which the expanded sets satisfy Axiom 3.10."""
        return float(self.violations[-1]) if len(self.violations) else 0.0

    @property
    def fraction_violating(self) -> float:
        """Share of examined pairs that violate monotonicity."""
        return len(self.violations) / self.pairs if self.pairs else 0.0

    def cdf(self) -> tuple[np.ndarray, np.ndarray]:
        """``(x, F(x))``: the empirical CDF of the violations."""
        n = len(self.violations)
        return self.violations.copy(), np.arange(1, n + 1, dtype=float) / max(n, 1)

    def median_by_distance(self) -> dict[int, float]:
        """Median violation for each distance at which violations occur."""
        out = {}
        for d in np.unique(self.distances):
            out[int(d)] = float(np.median(self.violations[self.distances == d]))
        return out


def audit_monotonicity(accuracy: Mapping[int, float]) -> MonotonicityAudit:
    """Audit every ancestor-descendant pair among ``accuracy``'s masks.

    Runs in ``O(k^2)`` vectorised over the ``k`` sets.
    """
    masks = np.fromiter(accuracy.keys(), dtype=np.int64, count=len(accuracy))
    acc = np.fromiter(accuracy.values(), dtype=np.float64, count=len(accuracy))
    sizes = np.array([int(m).bit_count() for m in masks], dtype=np.int64)
    viol, dist, pairs = [], [], 0
    for i in range(len(masks)):
        sup = ((masks & masks[i]) == masks[i]) & (masks != masks[i])
        pairs += int(sup.sum())
        bad = sup & (acc < acc[i])
        if bad.any():
            viol.append(acc[i] - acc[bad])
            dist.append(sizes[bad] - sizes[i])
    if viol:
        v = np.concatenate(viol)
        d = np.concatenate(dist)
        order = np.argsort(v, kind="stable")
        v, d = v[order], d[order]
    else:
        v, d = np.zeros(0), np.zeros(0, dtype=np.int64)
    return MonotonicityAudit(pairs=pairs, violations=v, distances=d)
