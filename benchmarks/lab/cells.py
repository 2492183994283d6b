"""Comparisons cell by cell: one (item size, budget) pair at a time, as users meet them.

A budget's accuracy pooled over sizes can hide a size where a backend loses; a cell cannot.
Within a cell every held-out picture is one item, so paired differences between two backends
are over the same pictures (:func:`polydom.demo.stats.difference`).

* :func:`versus` -- per cell, ``reference`` against the best of ``rivals`` (or against each):
  the paired gap and its standard error, and whether the reference is within ``k`` standard
  errors of the rival or ahead of it;
* :func:`violations` -- per cell, the share of answers whose measured extraction time exceeded
  the budget;
* :func:`cost_saving` -- per budget, the mean measured extraction time of one backend against
  another's, and the paired accuracy difference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from polydom.demo import stats

__all__ = ["Cell", "versus", "violations", "cost_saving"]


@dataclass(frozen=True)
class Cell:
    """The reference against one rival in one (size, budget) cell.

    Attributes
    ----------
    size, budget : float
    rival : str
        The rival compared with (the most accurate one in the cell when several were given).
    reference, best : Estimate
        Accuracies of the reference and of that rival.
    gap : Estimate
        Paired ``rival - reference``.
    """

    size: float
    budget: float
    rival: str
    reference: stats.Estimate
    best: stats.Estimate
    gap: stats.Estimate

    def within(self, k: float = 1.0) -> bool:
        """Whether the rival leads by at most ``k`` standard errors of the paired gap (a gap of
        exactly zero counts, even with a zero standard error)."""
        return self.gap.value <= k * self.gap.se + 1e-12

    def behind(self, k: float = 2.0) -> bool:
        """Whether the rival leads by more than ``k`` standard errors."""
        return self.gap.value > k * self.gap.se + 1e-12

    def ahead(self, k: float = 2.0) -> bool:
        """Whether the reference leads by more than ``k`` standard errors."""
        return -self.gap.value > k * self.gap.se + 1e-12


def versus(grids: dict, reference: str, rivals, sizes: np.ndarray, pictures: np.ndarray) -> list[Cell]:
    """Per (size, budget) cell, ``reference`` against the most accurate of ``rivals`` there.

    Parameters
    ----------
    grids : dict of str to GridResult
    reference : str
    rivals : sequence of str
        Names in ``grids``; give one name to compare with that rival alone.
    sizes, pictures : ndarray of shape (n_items,)
        Each held-out item's size and source picture.

    Returns
    -------
    list of Cell
        Sizes ascending, then budgets ascending.
    """
    ref = grids[reference]
    cells = []
    for size in np.unique(sizes):
        at = sizes == size
        for k, budget in enumerate(ref.budgets):
            row = slice(k, k + 1)
            mine = stats.accuracy(ref.correct[row, at], pictures[at])[0]
            acc = {n: stats.accuracy(grids[n].correct[row, at], pictures[at])[0] for n in rivals}
            best = max(rivals, key=lambda n: acc[n].value)
            gap = stats.difference(grids[best].correct[row, at], ref.correct[row, at], pictures[at])[0]
            cells.append(Cell(float(size), float(budget), best, mine, acc[best], gap))
    return cells


def violations(grid, sizes: np.ndarray) -> dict[tuple[float, float], float]:
    """Per (size, budget) cell, the share of answers whose measured time exceeded the budget."""
    over = grid.measured > grid.budgets[:, None]
    return {(float(s), float(b)): float(over[k, sizes == s].mean())
            for s in np.unique(sizes) for k, b in enumerate(grid.budgets)}


def cost_saving(grids: dict, saver: str, reference: str, pictures: np.ndarray) -> list[dict]:
    """Per budget, ``saver``'s mean measured extraction time against ``reference``'s.

    Returns
    -------
    list of dict
        ``budget``, ``cost`` and ``reference_cost`` (mean measured seconds per item),
        ``saving`` (``1 - cost / reference_cost``; NaN when the reference spends nothing),
        ``gap`` (paired accuracy ``saver - reference``, an Estimate), ``multi`` (the share of
        the reference's answers that used more than one feature) and ``multi_saving`` (the
        saving on those items alone: an answer with one feature has no later feature to skip).
    """
    a, b = grids[saver], grids[reference]
    gaps = stats.difference(a.correct, b.correct, pictures)
    out = []
    for k, budget in enumerate(b.budgets):
        cost, ref_cost = float(a.measured[k].mean()), float(b.measured[k].mean())
        multi = b.n_features[k] > 1
        multi_ref = float(b.measured[k][multi].mean()) if multi.any() else 0.0
        out.append({"budget": float(budget), "cost": cost, "reference_cost": ref_cost,
                    "saving": 1.0 - cost / ref_cost if ref_cost > 0 else float("nan"), "gap": gaps[k],
                    "multi": float(multi.mean()),
                    "multi_saving": 1.0 - float(a.measured[k][multi].mean()) / multi_ref if multi_ref > 0 else float("nan")})
    return out
