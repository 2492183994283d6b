"""Greedy expansion (the paper's Algorithm 4): one feature sequence per λ, black-box calls shared."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
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
    requires: Mapping[int, int] | None = None,
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
    requires : mapping of int to int, optional
        Feature index -> mask of the preparatory steps it needs (:mod:`polydom.steps`). A step
        is never a candidate on its own (alone it adds nothing): a feature is added with the
        steps it still lacks, at their summed cost, and the steps come first in the sequence.

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
    requires = dict(requires or {})
    steps = 0
    for need in requires.values():
        steps |= need
    features = [f for f in range(len(step_costs)) if not steps >> f & 1]
    sequences = []
    for lam in lambdas:
        current, order = 0, []
        remaining = list(features)
        while remaining:
            a_current = trained(current)
            # What adding each feature adds: itself and the steps it still lacks, at their cost.
            added = {f: 1 << f | requires.get(f, 0) & ~current for f in remaining}
            costs = {f: sum(step_costs[i] for i in _bits(added[f])) for f in remaining}
            if lam == math.inf:
                best = _cheapest(remaining, current, a_current, costs, trained, added)
            else:
                best = _best_gain(remaining, current, a_current, lam, costs, trained, added)
            order.extend(i for i in _bits(added[best]) if i != best)
            order.append(best)
            remaining.remove(best)
            current |= added[best]
        order.extend(i for i in _bits(steps & ~current))  # steps no feature needed
        if steps:  # a prefix that ends on a step is served too (no new training: it adds nothing)
            prefix = 0
            for i in order:
                prefix |= 1 << i
                trained(prefix)
        trained(current | steps)
        sequences.append(tuple(order))
    return GreedyExpansion(tuple(sequences), trained.accuracy)


def _bits(mask: int) -> list[int]:
    """The indices of ``mask``'s set bits, lowest first."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def _best_gain(remaining, current, a_current, lam, costs, trained, added) -> int:
    """The finite-λ choice: largest gain; ties to the cheaper feature, then the lower index (T14)."""
    best, best_key = -1, None
    for f in remaining:
        key = (trained(current | added[f]) - a_current - lam * costs[f], -costs[f], -f)
        if best_key is None or key > best_key:
            best, best_key = f, key
    return best


def _cheapest(remaining, current, a_current, costs, trained, added) -> int:
    """The λ = inf choice: least cost; among equal costs the larger Δa, then the lower index."""
    low = min(costs[f] for f in remaining)
    tied = [f for f in remaining if costs[f] == low]
    if len(tied) == 1:
        return tied[0]
    return max(tied, key=lambda f: (trained(current | added[f]) - a_current, -f))
