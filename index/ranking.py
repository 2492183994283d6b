"""What an index ranks its trained sets by: the measured scores, their monotone fit, or that fit
held within one standard error of each measurement."""

from __future__ import annotations

import math
from collections.abc import Mapping

from polydom.lattice import monotone_scores

__all__ = ["SCORE_MODES", "bounded_scores", "check_scores", "rank_scores", "step_needs", "tight_set"]

#: How the index ranks trained sets: by the black box's scores as measured, by their monotone
#: fit (:func:`polydom.lattice.monotone_scores`), or by that fit held within one standard error
#: of each set's measured score (:func:`bounded_scores`).
SCORE_MODES = ("measured", "monotone", "bounded")


def check_scores(scores) -> None:
    """``ValueError`` unless ``scores`` is one of :data:`SCORE_MODES`."""
    if scores not in SCORE_MODES:
        raise ValueError(f"scores must be one of {SCORE_MODES}, got {scores!r}")


def step_needs(space, requires) -> dict[int, int]:
    """``requires`` (feature name -> step names, as ``index.params["requires"]``) as feature bit
    -> mask of its steps, over ``space``; empty for None."""
    return {space.mask([f]).bit_length() - 1: space.mask(steps) for f, steps in (requires or {}).items()}


def tight_set(mask: int, needs: Mapping[int, int]) -> int:
    """The part of ``mask`` that serves: its features whose steps it holds, with those steps.

    A set's black box scores its usable features only (:class:`polydom.steps.UsableSets`), so
    ``mask`` and its tight set score alike and ``mask`` costs at least as much."""
    if not needs:
        return mask
    steps = 0
    for need in needs.values():
        steps |= need
    usable, used = 0, 0
    rest = mask & ~steps
    while rest:
        bit = rest & -rest
        need = needs.get(bit.bit_length() - 1, 0)
        if need & ~mask == 0:
            usable |= bit
            used |= need
        rest ^= bit
    return usable | used


def rank_scores(measured: Mapping[int, float], std_error: Mapping[int, float], scores: str,
                needs: Mapping[int, int] | None = None) -> tuple[dict, dict, dict]:
    """What an index ranks the trained sets ``measured`` (mask -> score) by, for ``scores`` in
    :data:`SCORE_MODES`.

    With ``needs`` (feature bit -> mask of the steps it requires, :func:`step_needs`), a set
    ranks no higher than its :func:`tight_set` where that is trained: the monotone fit's tie step
    would otherwise lift a set holding a feature without its step (which adds nothing) above
    the set without that feature, and serve a feature for nothing.

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
        return _no_credit_for_unusable(dict(measured), needs), {}, {}
    ranked = monotone_scores(measured, std_error)
    if scores == "bounded":
        ranked = bounded_scores(ranked, measured, std_error)
    ranked = _no_credit_for_unusable(ranked, needs)
    moves = [ranked[m] - measured[m] for m in measured]
    stats = dict(score_largest_rise=max(moves, default=0.0), score_largest_fall=-min(moves, default=0.0),
                 scores_moved=sum(abs(d) > 1e-4 for d in moves))
    return ranked, dict(measured), stats


def _no_credit_for_unusable(ranked: dict, needs) -> dict:
    if needs:
        for mask in list(ranked):
            tight = tight_set(mask, needs)
            if tight != mask and tight in ranked:
                ranked[mask] = min(ranked[mask], ranked[tight])
    return ranked


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
