"""Anytime retrieval: walk a λ's sequence while the next feature still fits the budget.

Both walks stop at the first feature that does not fit and never skip ahead: models exist only
for prefixes of a sequence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["SequenceWalk", "best_computed", "best_reachable", "walk_predicted", "walk_measured"]


def walk_predicted(horners: Sequence[Sequence[float]], size: float, budget: float) -> tuple[int, float]:
    """Length of the longest prefix whose predicted cost at ``size`` fits ``budget``.

    Parameters
    ----------
    horners : sequence of sequence of float
        Per feature of the sequence, in walk order: its cost coefficients highest degree first.
    size, budget : float

    Returns
    -------
    (length, spent) : (int, float)
        ``spent`` is the prefix's cost at ``size``, summed in walk order; ``spent <= budget``.

    Notes
    -----
    ``O(len(horners) * degree)``.

    Examples
    --------
    >>> walk_predicted([(1.0,), (10.0, 0.0), (0.5,)], size=2.0, budget=12.0)
    (1, 1.0)
    """
    spent = 0.0
    length = 0
    for h in horners:
        c = 0.0  # polydom.index.costs.poly.horner_scalar, inlined on the lookup path
        for a in h:
            c = c * size + a
        if spent + c > budget:
            break
        spent += c
        length += 1
    return length, spent


def walk_measured(
    names: Sequence[str],
    horners: Sequence[Sequence[float]],
    size: float,
    budget: float,
    compute: Callable[[str], object],
    clock: Callable[[], float],
    guards: Sequence[float] | None = None,
    observe: Callable[[int, float, float], None] | None = None,
) -> tuple[int, float]:
    """Compute features in walk order, each only if the time used so far plus its predicted cost
    at ``size`` still fits ``budget``.

    Parameters
    ----------
    names, horners : sequences of the same length
        The sequence's feature names and their cost coefficients (highest degree first).
    size, budget : float
    compute : callable
        ``compute(name)``, called once per feature started; its return value is ignored (the
        caller keeps the feature values).
    clock : callable
        ``clock() -> seconds``; read once before the first feature and once after each.
    guards : sequence of float, optional
        Per feature of ``names``, the factor applied to its predicted cost before starting it
        (see ``CostSensitiveIndex.cost_guards``); default 1 each.
    observe : callable, optional
        ``observe(k, predicted, seconds)`` after the ``k``-th feature of ``names`` was computed:
        its predicted cost at ``size`` and the time it took on ``clock``.

    Returns
    -------
    (length, elapsed) : (int, float)
        The number of features computed -- the last complete prefix -- and the measured time.
        ``elapsed <= budget`` whenever every feature took at most its predicted cost; a feature
        that overruns its prediction still counts once computed (its time is spent either way),
        so ``elapsed`` may then exceed ``budget``, but no further feature is started.

    Examples
    --------
    >>> ticks = iter([0.0, 1.0, 4.0])
    >>> walk_measured(["a", "b", "c"], [(1.0,), (2.0,), (2.0,)], 1.0, 5.0, lambda f: None, lambda: next(ticks))
    (2, 4.0)
    """
    start = clock()
    elapsed = 0.0
    length = 0
    for k, (name, h) in enumerate(zip(names, horners)):
        c = 0.0  # polydom.index.costs.poly.horner_scalar, inlined as in walk_predicted
        for a in h:
            c = c * size + a
        if elapsed + (c * guards[k] if guards is not None else c) > budget:
            break
        compute(name)
        before, elapsed = elapsed, clock() - start
        if observe is not None:
            observe(k, c, elapsed - before)
        length += 1
    return length, elapsed


class SequenceWalk:
    """One sequence as a measured walk at one size: its names, feature indices, predicted costs
    and guards in walk order, and its prefixes (``prefixes[k]``: the first ``k`` features as
    ``(features, accuracy, key, std_error)``)."""

    __slots__ = ("names", "features", "cost", "guards", "prefixes")

    def __init__(self, names, horners, prefixes, size: float, features, guards):
        self.names = names
        self.features = features
        self.prefixes = prefixes
        self.cost = []
        for h in horners:
            c = 0.0  # polydom.index.costs.poly.horner_scalar, as in walk_predicted
            for a in h:
                c = c * size + a
            self.cost.append(c)
        self.guards = [guards[i] for i in features]

    def reach(self, computed, elapsed: float, budget: float) -> int:
        """The longest prefix a walk from ``elapsed`` reaches on the predicted costs: every
        uncomputed step must fit ``elapsed + cost * guard <= budget`` (``computed``: free)."""
        length = 0
        for name, c, g in zip(self.names, self.cost, self.guards):
            if name not in computed:
                if elapsed + c * g > budget:
                    break
                elapsed += c
            length += 1
        return length


def best_reachable(walks, first: int, computed, elapsed: float, budget: float, floor: float):
    """``(sequence, length)`` of the most accurate prefix more accurate than ``floor`` that a walk
    reaches from ``elapsed`` (:meth:`SequenceWalk.reach`); sequence ``first`` wins ties, then the
    lower sequence, then the shorter prefix. None if none beats ``floor``."""
    best, best_acc = None, floor
    for s in [first] + [s for s in range(len(walks)) if s != first]:
        walk = walks[s]
        length = walk.reach(computed, elapsed, budget)
        # A shorter prefix of the same sequence may be more accurate (accuracies need not grow),
        # and of equally accurate ones the shortest costs least (a prefix ending on a step the
        # walk cannot follow with its feature scores as the prefix before it).
        for k in range(length + 1):
            acc = walk.prefixes[k][1]
            if acc > best_acc:
                best, best_acc = (s, k), acc
    return best


def best_computed(walks, first: int, computed) -> tuple[int, int]:
    """``(sequence, length)`` of the most accurate prefix whose features are all in ``computed``
    (the empty prefix of sequence ``first`` when none is)."""
    best, best_acc = (first, 0), walks[first].prefixes[0][1]
    for s, walk in enumerate(walks):
        for k, name in enumerate(walk.names):
            if name not in computed:
                break
            if walk.prefixes[k + 1][1] > best_acc:
                best, best_acc = (s, k + 1), walk.prefixes[k + 1][1]
    return best
