"""Greedy's second index: the skyline of every recorded prefix by its cost at ``n0``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

__all__ = ["SkylineEntry", "prefix_masks", "prefix_skyline"]


class SkylineEntry(NamedTuple):
    """One skyline entry: the prefix of length ``position`` of the sequence of ``lambdas[lam]``.

    Attributes
    ----------
    mask : int
        The prefix set.
    lam : int
        Index of its λ in the grid (the first λ, in grid order, whose sequence has this prefix).
    position : int
        Number of features in the prefix (0 for ``{}``).
    cost : float
        ``c(set, n0)``: the sum of its features' costs at ``n0``, in feature order.
    accuracy : float
    """

    mask: int
    lam: int
    position: int
    cost: float
    accuracy: float


def prefix_masks(sequence: Sequence[int]) -> list[int]:
    """Masks of the prefixes of ``sequence``, lengths ``0 .. len(sequence)``.

    >>> prefix_masks([2, 0])
    [0, 4, 5]
    """
    masks, mask = [0], 0
    for f in sequence:
        mask |= 1 << f
        masks.append(mask)
    return masks


def prefix_skyline(
    sequences: Sequence[Sequence[int]],
    accuracy: Mapping[int, float],
    step_costs: Sequence[float],
) -> list[SkylineEntry]:
    """The skyline (cost ascending, accuracy strictly ascending) over all prefixes of ``sequences``.

    Parameters
    ----------
    sequences : sequence of sequence of int
        One per λ, in grid order.
    accuracy : mapping of int to float
        Accuracy of every prefix set.
    step_costs : sequence of float
        ``c(f, n0)`` per feature.

    Returns
    -------
    list of SkylineEntry

    Invariants
    ----------
    Costs strictly ascend and accuracies strictly ascend; the first entry costs 0 (``{}``, or a
    set of zero-cost features that is more accurate). A set shared by several sequences is
    recorded under its first ``(λ, position)`` in grid order; among sets of equal cost and
    accuracy the first recorded is kept.

    Examples
    --------
    >>> acc = {0: .5, 1: .7, 3: .9, 2: .6}
    >>> [e.mask for e in prefix_skyline([(0, 1), (1, 0)], acc, [1.0, 2.0])]
    [0, 1, 3]
    """
    entries, seen = [], set()
    for lam, sequence in enumerate(sequences):
        for position, mask in enumerate(prefix_masks(sequence)):
            if mask in seen:
                continue
            seen.add(mask)
            cost = 0.0
            for f, c in enumerate(step_costs):
                if mask >> f & 1:
                    cost += c
            entries.append(SkylineEntry(mask, lam, position, cost, accuracy[mask]))
    # Stable sort: equal (cost, accuracy) keep first-recorded order.
    entries.sort(key=lambda e: (e.cost, -e.accuracy))
    skyline = []
    for entry in entries:
        if not skyline or entry.accuracy > skyline[-1].accuracy:
            skyline.append(entry)
    return skyline
