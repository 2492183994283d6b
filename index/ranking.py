"""What an index ranks its trained sets by: the measured scores, their monotone fit, or that fit
held within one standard error of each measurement."""

from __future__ import annotations

import math
from collections.abc import Mapping

from polydom.lattice import monotone_scores

__all__ = ["SCORE_MODES", "bounded_scores", "check_scores", "rank_scores"]

#: How the index ranks trained sets: by the black box's scores as measured, by their monotone
#: fit (:func:`polydom.lattice.monotone_scores`), or by that fit held within one standard error
#: of each set's measured score (:func:`bounded_scores`).
SCORE_MODES = ("measured", "monotone", "bounded")


def check_scores(scores) -> None:
    """``ValueError`` unless ``scores`` is one of :data:`SCORE_MODES`."""
    if scores not in SCORE_MODES:
        raise ValueError(f"scores must be one of {SCORE_MODES}, got {scores!r}")


def rank_scores(measured: Mapping[int, float], std_error: Mapping[int, float], scores: str) -> tuple[dict, dict, dict]:
    """What an index ranks the trained sets ``measured`` (mask -> score) by, for ``scores`` in
    :data:`SCORE_MODES`.

    Returns
    -------
    (ranked, kept, stats)
        ``ranked``: the scores to index; ``kept``: the measured scores an index keeps beside them
        (empty when ``ranked`` is ``measured``); ``stats``: what the monotone fit did -- its
        largest rise and fall and how many sets moved by more than rounding -- empty for
        ``"measured"``.
    """
    check_scores(scores)
    if scores == "measured":
        return dict(measured), {}, {}
    ranked = monotone_scores(measured, std_error)
    if scores == "bounded":
        ranked = bounded_scores(ranked, measured, std_error)
    moves = [ranked[m] - measured[m] for m in measured]
    stats = dict(score_largest_rise=max(moves, default=0.0), score_largest_fall=-min(moves, default=0.0),
                 scores_moved=sum(abs(d) > 1e-4 for d in moves))
    return ranked, dict(measured), stats


def bounded_scores(fitted: Mapping[int, float], measured: Mapping[int, float],
                   std_error: Mapping[int, float]) -> dict[int, float]:
    """``fitted`` (mask -> score) held within one standard error of each set's ``measured`` score.

    The monotone fit pools a lucky score with its supersets', which is what it is for; but it can
    also pull a set far below its measurement (the whole feature set pooled with its many weaker
    subsets' supersets) and rank it under a set its measurement beats by several standard
    errors. Held within ``measured +- std_error``, a served set ``s`` ranks at least as high as an
    affordable ``t`` only if ``measured[s] + se[s] >= measured[t] - se[t]``: no served set is
    measured more than ``se[s] + se[t]`` below an affordable trained one. Sets without a standard
    error keep their measured score. The result need not be monotone on the subset order.
    """
    out = {}
    for m, score in fitted.items():
        se = std_error.get(m)
        base = measured[m]
        if se is None or not math.isfinite(se) or se <= 0:
            out[m] = base
        else:
            out[m] = min(max(score, base - se), base + se)
    return out
