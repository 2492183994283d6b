"""Monotone scores: the closest accuracies to the measured ones that never drop from a set to a superset.

Cross-validated accuracies are noisy. Picking the best of many noisy scores favours sets whose
score was lucky (the winner's curse), and on real data the lucky set is often a small one that a
superset beats on held-out items. Information-never-hurts (the paper's Axiom 2.1) says the true
accuracy of a set is at most that of any superset, so the maximum-likelihood estimate of the
true accuracies under Gaussian noise is the weighted least-squares projection of the measured
scores onto that order -- isotonic regression on the subset lattice. It pools a set whose
score is too high with its supersets whose scores are too low, which removes the luck that
selection would otherwise reward.

Where the fit pools sets to one value, nothing in the scores tells them apart; the order then
says the larger set is at least as accurate, so every feature adds ``tie_step`` (far below any
measurable difference) and a pooled superset ranks just above its subsets
(why: ``docs/decisions/tie-step.md``).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np

from .featureset import popcount

__all__ = ["DEFAULT_TIE_STEP", "DENSE_LIMIT", "MAX_WEIGHT_RATIO", "cover_pairs", "monotone_scores"]

#: What each feature adds to the scores of sets the fit pools together (see the module docstring).
DEFAULT_TIE_STEP = 1e-6

#: The largest weight of one set over the median set's in the weighted fit (a floor on standard errors).
MAX_WEIGHT_RATIO = 100.0

#: The most matrix entries (covering pairs x sets) one active-set NNLS takes; a problem past it
#: is solved by a sparse iterative solver.
DENSE_LIMIT = 4_000_000

#: Rows of the subset comparison :func:`cover_pairs` makes at once.
_BLOCK = 512


def cover_pairs(masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The covering pairs of the subset order among ``masks``: ``(lower, upper)`` index arrays.

    ``masks[lower[k]] ⊊ masks[upper[k]]`` with no mask of ``masks`` strictly between them. Every
    subset relation among ``masks`` follows from these by transitivity, so they are the only
    constraints a monotone fit needs. ``O(k * s^2)`` for ``k`` masks with at most ``s`` subsets each.
    """
    masks = np.asarray(masks, dtype=np.int64)
    lower, upper = [], []
    for i, m in enumerate(masks):
        below = np.flatnonzero(((masks & m) == masks) & (masks != m))
        if not len(below):
            continue
        sub = masks[below]
        # A subset is covered by m unless it lies strictly inside another subset of m; compared in
        # blocks of rows, so that the top of a large lattice does not need an s x s matrix at once.
        inside = np.zeros(len(sub), dtype=bool)
        for start in range(0, len(sub), _BLOCK):
            rows = sub[start:start + _BLOCK, None]
            inside[start:start + _BLOCK] = (((sub[None, :] & rows) == rows) & (sub[None, :] != rows)).any(axis=1)
        maximal = below[~inside]
        lower.extend(maximal.tolist())
        upper.extend([i] * len(maximal))
    return np.asarray(lower, dtype=np.int64), np.asarray(upper, dtype=np.int64)


def monotone_scores(
    accuracy: Mapping[int, float],
    std_error: Mapping[int, float] | None = None,
    *,
    tie_step: float = DEFAULT_TIE_STEP,
) -> dict[int, float]:
    """The weighted isotonic fit of ``accuracy`` (mask -> score) on the subset order.

    Parameters
    ----------
    accuracy : mapping of int to float
        Measured scores of trained sets, each in ``[0, 1]``.
    std_error : mapping of int to float, optional
        Standard errors of those scores; a set weighs ``1 / se**2`` (a set rescored on more folds
        moves less). Standard errors below the median one over ``sqrt(MAX_WEIGHT_RATIO)`` are
        raised to it, so that no set outweighs the median one more than :data:`MAX_WEIGHT_RATIO`
        times; missing or zero ones take that floor. With none at all every set weighs the same,
        and so it does, with a ``RuntimeWarning``, in the rare lattice whose violations gather in
        one group too large for the exact solvers (see :func:`_project`).
    tie_step : float, default :data:`DEFAULT_TIE_STEP`
        Added per feature to sets the fit pools together, so the larger ranks first.

    Returns
    -------
    dict of int to float
        Same keys; for every pair ``s ⊊ t`` of keys the value of ``t`` is ``>=`` that of ``s`` plus
        ``tie_step`` per extra feature (clipping to ``[0, 1]`` may flatten the step at 1), so
        :func:`~polydom.lattice.audit_monotonicity` finds no violation; every value lies within
        the range of the measured scores.
    """
    masks = np.fromiter(accuracy.keys(), dtype=np.int64, count=len(accuracy))
    if len(masks) == 0:
        return {}
    sizes = np.array([popcount(int(m)) for m in masks], dtype=float)
    y = np.fromiter(accuracy.values(), dtype=float, count=len(masks)) - tie_step * sizes
    se = np.array([(std_error or {}).get(int(m), 0.0) or 0.0 for m in masks], dtype=float)
    se = np.where(np.isfinite(se), se, 0.0)
    positive = se[se > 0]
    # Weights are 1/se**2: a round-off standard error (folds that agreed exactly) would weigh
    # 1e32 and swamp every other set, and the solver's rounding then leaves the measured range.
    # No set weighs more than MAX_WEIGHT_RATIO times the median one.
    floor = float(np.median(positive)) / np.sqrt(MAX_WEIGHT_RATIO) if len(positive) else 1.0
    se = np.maximum(np.where(se > 0, se, floor), floor)
    root_w = 1.0 / se
    lower, upper = cover_pairs(masks)
    fit = y.copy()
    if len(lower):
        fit = _project(y, root_w, lower, upper)
    # The solver's rounding may leave violations of order 1e-12; one pass over the pairs, smaller
    # upper sets first (so every lower set is final when it is read), removes them exactly.
    for pair in np.argsort(sizes[upper], kind="stable"):
        lo, up = lower[pair], upper[pair]
        if fit[up] < fit[lo]:
            fit[up] = fit[lo]
    # A least-squares isotonic fit is a weighted average of measurements and cannot leave their
    # range; the clip removes what rounding adds (the tie steps stay inside it as well).
    measured = np.fromiter(accuracy.values(), dtype=float, count=len(masks))
    out = np.clip(fit + tie_step * sizes, max(measured.min(), 0.0), min(measured.max(), 1.0))
    return dict(zip(masks.tolist(), out.tolist()))


def _project(y: np.ndarray, root_w: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """The projection of ``y`` onto ``{f : f[upper] >= f[lower]}`` in the norm weighted by ``root_w**2``.

    Through its dual: with ``g = W^(1/2) f`` the constraints read ``A g >= 0`` and
    ``g = W^(1/2) y + A^T lam`` for ``lam >= 0`` minimising ``|A^T lam + W^(1/2) y|``. Solved exactly
    under the violated pairs alone, grown until nothing else is violated
    (:func:`_project_violated`): each group of violations is a small active-set NNLS
    (:func:`_project_dense`), far smaller than the whole order. Where a group outgrows
    :data:`DENSE_LIMIT` or its active set does not settle, a whole problem within the limit is
    solved by one NNLS; a larger one iteratively on a sparse ``A`` with every set weighing the
    same -- weights make that problem too ill-conditioned for the iterative solver -- with a
    ``RuntimeWarning`` when weights were given or the solver did not converge; the caller's
    repair pass settles the last digits.
    """
    from scipy.optimize import lsq_linear

    # The violated pairs first, at every size: one NNLS over all covering pairs grows with the
    # pairs times the sets (docs/decisions/score-ranking.md, *solving the fit*).
    fit = _project_violated(y, root_w, lower, upper)
    if fit is None and len(lower) * len(y) <= DENSE_LIMIT:
        fit = _project_dense(y, root_w, lower, upper)
    if fit is not None:
        return fit
    if np.ptp(root_w) > 0:
        warnings.warn(
            f"monotone_scores: {len(y)} sets with {len(lower)} covering pairs are fitted by the iterative solver, "
            "with every set weighing the same (their standard errors are not used)", RuntimeWarning, stacklevel=3,
        )
    ones = np.ones_like(root_w)
    a = _constraints(ones, lower, upper, len(y))
    result = lsq_linear(a.T.tocsr(), -y, bounds=(0.0, np.inf), method="trf", lsq_solver="lsmr", tol=1e-12)
    if result.status < 1:
        warnings.warn(f"monotone_scores: the iterative solver did not converge ({result.message}); the scores are "
                      "made monotone by raising the lower ones", RuntimeWarning, stacklevel=3)
    return y + a.T @ result.x


def _project_dense(y: np.ndarray, root_w: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray | None:
    """:func:`_project`'s dual solved exactly by active-set NNLS on a dense ``A``; None when the
    active set does not settle within its iterations."""
    from scipy.optimize import nnls

    a = _constraints(root_w, lower, upper, len(y))
    try:
        lam, _ = nnls(a.T.toarray(), -root_w * y, maxiter=max(100, 20 * len(lower)))
    except RuntimeError:
        return None
    return (root_w * y + a.T @ lam) / root_w


def _project_violated(y: np.ndarray, root_w: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray | None:
    """:func:`_project` by constraint generation: the exact weighted projection under only the
    pairs violated so far, grown until the fit violates no other pair; None when one working
    problem outgrows :data:`DENSE_LIMIT` or its active set does not settle.

    Exact: the fit minimises the weighted distance to ``y`` over a superset of the feasible
    fits (fewer constraints) and is itself feasible, so it is the projection. Sets outside
    every working pair keep their measured score, and the working pairs fall apart into
    connected groups of sets, each projected on its own (the problem is separable across them).
    A lattice's violations gather in many small groups, so each problem stays far smaller than
    the whole.
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(y)
    fit = y.copy()
    working = np.zeros(len(lower), dtype=bool)
    while True:
        # A violation within rounding is left to the caller's repair pass.
        fresh = (fit[upper] < fit[lower] - 1e-12) & ~working
        if not fresh.any():
            return fit
        working |= fresh
        pairs = np.flatnonzero(working)
        graph = coo_matrix((np.ones(len(pairs)), (lower[pairs], upper[pairs])), shape=(n, n))
        _, group = connected_components(graph, directed=False)
        fit = y.copy()
        pair_group = group[lower[pairs]]
        by_group = np.argsort(pair_group, kind="stable")
        for members in np.split(pairs[by_group], np.flatnonzero(np.diff(pair_group[by_group])) + 1):
            nodes = np.unique(np.concatenate([lower[members], upper[members]]))
            if len(members) * len(nodes) > DENSE_LIMIT:
                return None
            part = _project_dense(y[nodes], root_w[nodes], np.searchsorted(nodes, lower[members]),
                                  np.searchsorted(nodes, upper[members]))
            if part is None:
                return None
            fit[nodes] = part


def _constraints(root_w: np.ndarray, lower: np.ndarray, upper: np.ndarray, n: int):
    """The sparse constraint matrix ``A`` of :func:`_project` (one row per covering pair)."""
    from scipy import sparse

    rows = np.arange(len(lower))
    values = np.concatenate([1.0 / root_w[upper], -1.0 / root_w[lower]])
    return sparse.csr_matrix((values, (np.concatenate([rows, rows]), np.concatenate([upper, lower]))),
                             shape=(len(lower), n))
