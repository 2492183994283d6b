"""Greedy expansion (the paper's Algorithm 4): one feature sequence per λ, black-box calls shared."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from polydom.lattice import ExpansionCache

__all__ = ["GreedyExpansion", "greedy_sequences"]


@dataclass(frozen=True)
class GreedyExpansion:
    """What the expansion produced.

    Attributes
    ----------
    sequences : tuple of tuple of int
        One per λ, in grid order: feature indices in the order they were added. Each is a
        permutation of all features; prefix ``j`` is the set of its first ``j`` features.
    accuracy : dict of int to float
        Every set trained (bitmask -> accuracy), in training order; ``{}`` (mask 0) first.

    Invariants
    ----------
    Every prefix of every sequence is in ``accuracy``; each set was trained exactly once.
    """

    sequences: tuple[tuple[int, ...], ...]
    accuracy: dict[int, float]

    @property
    def trained(self) -> int:
        """Black-box calls: distinct sets trained, ``{}`` included."""
        return len(self.accuracy)

    @property
    def expanded(self) -> int:
        """Distinct non-empty sets trained: the paper's Metric 1 for Greedy (repeats across λ count once)."""
        return len(self.accuracy) - (0 in self.accuracy)


def greedy_sequences(
    step_costs: Sequence[float],
    expand: Callable[[int], float],
    lambdas: Sequence[float],
) -> GreedyExpansion:
    """Grow one sequence per λ by repeatedly adding the feature of best gain.

    The gain of adding ``f`` to the current set ``S`` is ``a(S + f) - a(S) - λ c(f, n0)``.
    Ties -- ubiquitous under cf₁, where every Δa after the first step is 0 -- go to
    the cheaper feature at ``n0``, then to the lower feature index. ``λ = inf`` adds the cheapest
    feature first, ties going to the larger Δa, then the lower index.

    Parameters
    ----------
    step_costs : sequence of float
        ``c(f, n0)`` per feature (all >= 0), in feature order; by Eq. (1) this is the cost
        increase of adding ``f`` to any set.
    expand : callable
        ``expand(mask) -> accuracy``: the black box. Called once per distinct set across all λ,
        ``{}`` first.
    lambdas : sequence of float
        Each ``>= 0`` or ``inf`` (validated by the caller).

    Returns
    -------
    GreedyExpansion

    Notes
    -----
    ``O(|L| |F|^2)`` gain evaluations, at most ``|L| |F| (|F| + 1) / 2 + 1`` black-box calls.
    Under ``λ = inf`` the order is decided by cost alone, so a candidate set is trained only
    when it ties on cost with another (and its Δa breaks the tie); the chosen prefixes are
    always trained, since their models are what lookups return.

    Examples
    --------
    >>> acc = {0b00: .5, 0b01: .7, 0b10: .8, 0b11: .9}
    >>> greedy_sequences([1.0, 5.0], acc.__getitem__, [0.0, math.inf]).sequences
    ((1, 0), (0, 1))
    """
    trained = ExpansionCache(expand)
    trained(0)
    features = range(len(step_costs))
    sequences = []
    for lam in lambdas:
        current, order = 0, []
        remaining = list(features)
        while remaining:
            a_current = trained(current)
            if lam == math.inf:
                best = _cheapest(remaining, current, a_current, step_costs, trained)
            else:
                best = _best_gain(remaining, current, a_current, lam, step_costs, trained)
            order.append(best)
            remaining.remove(best)
            current |= 1 << best
        trained(current)
        sequences.append(tuple(order))
    return GreedyExpansion(tuple(sequences), trained.accuracy)


def _best_gain(remaining, current, a_current, lam, step_costs, trained) -> int:
    """The finite-λ choice: largest gain; ties to the cheaper feature, then the lower index (T14)."""
    best, best_key = -1, None
    for f in remaining:
        key = (trained(current | 1 << f) - a_current - lam * step_costs[f], -step_costs[f], -f)
        if best_key is None or key > best_key:
            best, best_key = f, key
    return best


def _cheapest(remaining, current, a_current, step_costs, trained) -> int:
    """The λ = inf choice: least cost; among equal costs the larger Δa, then the lower index."""
    low = min(step_costs[f] for f in remaining)
    tied = [f for f in remaining if step_costs[f] == low]
    if len(tied) == 1:
        return tied[0]
    return max(tied, key=lambda f: (trained(current | 1 << f) - a_current, -f))
