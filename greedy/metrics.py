"""Measurements over a built index for the paper's figures (pure functions, no timing)."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["accuracy_vs_budget"]


def accuracy_vs_budget(index, size: float, budgets: Iterable[float]) -> list[float]:
    """Accuracy of the answer at ``size`` for each budget: one line of the paper's Fig. 9.

    Parameters
    ----------
    index : object with ``lookup(size, budget) -> Choice``
        A :class:`GreedyIndex`, a :class:`~polydom.PolyDomIndex` or a baseline -- so every
        backend's line is drawn by the same code.
    size : float
        The item size (50 in the paper's synthetic Fig. 9).
    budgets : iterable of float

    Returns
    -------
    list of float
        ``[index.lookup(size, b).accuracy for b in budgets]``, in the order of ``budgets``.

    Examples
    --------
    >>> import polydom
    >>> costs = {"a": [1.0], "b": [0.0, 2.0]}
    >>> acc = {frozenset(): .5, frozenset("a"): .7, frozenset("b"): .8, frozenset("ab"): .9}
    >>> index = polydom.build(costs, acc.__getitem__, backend="greedy", n0=1.0)
    >>> accuracy_vs_budget(index, 3.0, [0.0, 1.0, 6.0, 7.0])
    [0.5, 0.7, 0.8, 0.9]
    """
    return [index.lookup(size, b).accuracy for b in budgets]
