"""The candidate set (the paper's Algorithm 1, CANDIDATE-SET-CONSTRUCTION, corrected).

A set ``s`` is dropped when another expanded set ``r`` dominates it: ``r`` costs no more at every
size of the domain and ``candidate_alpha * a(r) >= a(s)`` (Definition 3.1). The default
``candidate_alpha = 1`` is exact dominance, which is transitive, so dropping ``s`` because of a
dropped ``r`` is safe; ``candidate_alpha = alpha`` is the paper-literal variant whose losses
compound (slack on slack is not transitive) and is kept for ablations.

Mutual dominance (identical curves, zero-cost features) keeps exactly one winner, or both would
be dropped and the skyline would lose a set: the set
that comes first in :func:`rank_key` order (higher accuracy, then fewer features, then lower
feature indices).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from polydom.index.costs.poly import RTOL, horner, le_everywhere_batch
from polydom.lattice import canonical_key

__all__ = ["rank_key", "candidate_set"]

_BLOCK_PAIRS = 1 << 21


def rank_key(mask: int, accuracy: float) -> tuple:
    """The fixed tie-break order of feature sets: higher accuracy, fewer features, lower indices."""
    return (-accuracy, *canonical_key(mask))


def candidate_set(
    accuracy: Mapping[int, float],
    coefficients: Mapping[int, np.ndarray],
    domain: tuple[float, float],
    candidate_alpha: float = 1.0,
) -> list[int]:
    """Expanded sets that no other expanded set dominates, in :func:`rank_key` order.

    Parameters
    ----------
    accuracy : mapping of mask to float
        The expanded sets.
    coefficients : mapping of mask to ndarray
        Each set's summed cost polynomial, all padded to one length.
    domain : (lo, hi)
        The sizes over which "costs no more" must hold.
    candidate_alpha : float, default 1.0
        Slack in the accuracy condition; 1.0 is exact dominance.

    Returns
    -------
    list of int
        Candidate masks, best rank first.

    Notes
    -----
    Vectorised over pairs in blocks; the cost test is exact up to a 1e-12 relative tolerance
    (see :func:`index.poly.le_everywhere_batch`).
    """
    masks = sorted(accuracy, key=lambda m: rank_key(m, accuracy[m]))
    E = len(masks)
    acc = np.array([accuracy[m] for m in masks], dtype=float)
    coef = np.array([coefficients[m] for m in masks], dtype=float).reshape(E, -1)
    lo, hi = domain
    # Costs at sample sizes: a necessary condition for "r costs no more everywhere" that rules
    # out most pairs before the exact test.
    top = hi if np.isfinite(hi) else max(lo, 1.0) * 1e6
    samples = np.unique(np.concatenate([[lo, top], lo + (top - lo) * np.geomspace(1e-6, 1.0, 14)]))
    values = horner(coef, np.broadcast_to(samples, (E, len(samples))))
    if candidate_alpha == 1.0:
        keep = _exact_candidates(acc, coef, values, lo, hi)
    else:
        keep = _alpha_candidates(acc, coef, values, lo, hi, candidate_alpha)
    return [m for m, k in zip(masks, keep) if k]


def _exact_candidates(acc, coef, values, lo, hi) -> np.ndarray:
    """Exact dominance is transitive, so testing each set against the sets kept so far suffices,
    provided every possible dominator is tested first: order by accuracy descending, then by
    summed sample cost (a dominator is no costlier anywhere), then by rank."""
    E = len(acc)
    order = np.lexsort((np.arange(E), values.sum(axis=1), -acc))
    keep = np.zeros(E, dtype=bool)
    kept = np.zeros(E, dtype=np.int64)
    n_kept = 0
    absv, absc = np.abs(values), np.abs(coef)
    for s in order.tolist():
        if n_kept:
            k = kept[:n_kept]
            ok = np.all(values[k] - values[s] <= RTOL * (absv[k] + absv[s]), axis=1)
            if ok.any():
                k = k[ok]
                if lo >= 0.0 and np.any(np.all(coef[k] - coef[s] <= RTOL * (absc[k] + absc[s]), axis=1)):
                    continue
                exact = le_everywhere_batch(coef[k], np.broadcast_to(coef[s], coef[k].shape), lo, hi)
                if exact.any():
                    continue
        keep[s] = True
        kept[n_kept] = s
        n_kept += 1
    return keep


def _alpha_candidates(acc, coef, values, lo, hi, candidate_alpha) -> np.ndarray:
    """The paper-literal Algorithm 1: ``s`` goes when any expanded ``r`` alpha-dominates it, even
    a dropped one (alpha-dominance is not transitive). Vectorised over pairs in blocks."""
    E = len(acc)
    keep = np.ones(E, dtype=bool)
    rows_per_block = max(1, _BLOCK_PAIRS // max(E * values.shape[1], 1))
    absv = np.abs(values)
    for start in range(0, E, rows_per_block):
        stop = min(E, start + rows_per_block)
        ids = np.arange(start, stop)
        maybe = candidate_alpha * acc[None, :] >= acc[start:stop, None]
        maybe[ids - start, ids] = False
        maybe &= np.all(values[None, :, :] - values[start:stop, None, :] <= RTOL * (absv[None, :, :] + absv[start:stop, None, :]), axis=2)
        s_idx, r_idx = np.nonzero(maybe)
        s_idx += start
        if len(s_idx) == 0:
            continue
        cheaper = le_everywhere_batch(coef[r_idx], coef[s_idx], lo, hi)
        s_idx, r_idx = s_idx[cheaper], r_idx[cheaper]
        # Mutual dominance: s survives r when s also dominates r and s ranks first.
        may_win = (candidate_alpha * acc[s_idx] >= acc[r_idx]) & (s_idx < r_idx)
        wins = np.zeros(len(s_idx), dtype=bool)
        if may_win.any():
            w = np.nonzero(may_win)[0]
            wins[w] = le_everywhere_batch(coef[s_idx[w]], coef[r_idx[w]], lo, hi)
        keep[np.unique(s_idx[~wins])] = False
    return keep


