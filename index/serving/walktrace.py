"""Traced walks: what an anytime walk decided between two features, kept with the span of elapsed
time over which it decides the same, so that later walks replay it in microseconds.

Between two features a walk's decisions (upgrade, start, retarget, stop) depend on its state
(target, computed features, what is served, refused targets) and on one number: the time
``elapsed`` since it started. Every decision is monotone in ``elapsed`` -- a start allowed at
some elapsed time is allowed at any earlier one, and the most accurate set that still has room
can only get less accurate as time passes. So the decisions taken at one elapsed time are the
decisions taken over a whole interval around it, and two evaluations at the interval's ends
prove it (:func:`edge`).

A *trace* is a tree of :class:`Node` (one per walk state) whose branches each hold one
*segment*: the interval ``[low, high]`` of elapsed time, the steps the walk records, the next
feature to compute and the node after it (or the set served at the end). A walk of a traced
``(size, budget)`` follows the branch whose interval holds its elapsed time, computing the
features the branches name, and does none of the walk's own reasoning. Where no branch holds it
the walk reasons as usual from that node's state and, while the trace has room, records the new
segment as a branch. Walks are deterministic given their elapsed times, so a traced walk serves
exactly what the full walk serves (``tests/index/test_walktrace.py`` checks it on random clocks).

Only walks whose decisions depend on nothing but the index, the item size, the budget and
elapsed time are traced: no guards learned while serving, no cascade, no speculation, and a late
price fixed for the trace (it is part of the trace's key).

Invariant (checked by :meth:`Node.check`): every branch's interval is ordered, and a branch
that computes a feature leads to a node whose computed features include it.
"""

from __future__ import annotations

import math

__all__ = ["Node", "edge", "MAX_BRANCHES", "MAX_NODES"]

#: Branches a node keeps: walks whose elapsed time falls outside all of them reason in full.
MAX_BRANCHES = 4

#: Nodes one trace may hold (its walks' distinct states), so that noisy clocks cannot grow it
#: without bound.
MAX_NODES = 64

#: Bisection steps :func:`edge` takes when its first guess does not hold.
_EDGE_STEPS = 24


class Node:
    """A walk's state before a segment: its ``target``, ``computed`` and ``served`` masks, the
    targets it ``refused`` and whether the segment starts after a computed feature (which asks
    for an upgrade first); and the segments recorded from it, as branches
    ``(low, high, steps, feature, name, compute_step, after)``: ``feature`` -1 ends the walk
    serving the mask ``after``, else ``after`` is the node once ``feature`` is computed."""

    __slots__ = ("target", "computed", "served", "refused", "after_compute", "branches", "root", "nodes")

    def __init__(self, target: int, computed: int, served: int, refused: frozenset, after_compute: bool,
                 root: "Node | None" = None):
        self.target = target
        self.computed = computed
        self.served = served
        self.refused = refused
        self.after_compute = after_compute
        self.branches: list[tuple] = []
        # The trace's root counts its nodes (the count on other nodes stays 0).
        self.root = self if root is None else root
        self.nodes = 1 if root is None else 0

    def has_room(self) -> bool:
        """Whether another segment may be recorded here."""
        return len(self.branches) < MAX_BRANCHES and self.root.nodes < MAX_NODES

    def add(self, low: float, high: float, steps: tuple, feature: int, name: str | None, after) -> None:
        """Record a segment; ``after`` is the next node (made by the caller) or the served mask."""
        if feature >= 0:
            self.root.nodes += 1
        self.branches.append((low, high, steps, feature, name, ("compute", name) if feature >= 0 else None, after))

    def check(self) -> None:
        """Assert the invariant, for this node and every node after it."""
        for low, high, _, feature, _, _, after in self.branches:
            assert low <= high, (low, high)
            if feature >= 0:
                assert after.computed >> feature & 1, (feature, after.computed)
                after.check()


def edge(same, elapsed: float, guess: float) -> float:
    """The far end, toward ``guess``, of an interval from ``elapsed`` over which ``same(x)``
    holds: ``guess`` where it holds there, else the last point found to hold by bisecting
    between ``elapsed`` (where it holds) and ``guess``. ``same`` must be monotone along the way
    (once it fails, it fails further on), which the walk's decisions are."""
    if same(guess):
        return guess
    good, bad = elapsed, guess
    if math.isinf(bad):
        bad = elapsed + (1.0 if bad > 0 else -1.0) * max(1.0, abs(elapsed))
        if same(bad):
            return bad
    for _ in range(_EDGE_STEPS):
        mid = 0.5 * (good + bad)
        if mid in (good, bad):
            break
        if same(mid):
            good = mid
        else:
            bad = mid
    return good
