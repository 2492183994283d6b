"""From expanded sets to a PolyDom index: candidate set, then the sweep, then the two-level index."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from polydom.lattice import FeatureSpace

from .candidates import candidate_set
from .costcurve import CostCurve, set_cost_matrix
from .skyline import PolyDomIndex
from .sweep import check_against_brute_force, sweep

__all__ = ["index_from_expanded"]


def index_from_expanded(
    space: FeatureSpace,
    costs: Sequence[CostCurve],
    accuracy: Mapping[int, float],
    *,
    domain: tuple[float, float],
    candidate_alpha: float = 1.0,
    validate: bool = False,
    index_all: bool = False,
    models: Mapping[int, Any] | None = None,
    stats: Mapping[str, Any] | None = None,
    params: Mapping[str, Any] | None = None,
    cls: type[PolyDomIndex] = PolyDomIndex,
) -> PolyDomIndex:
    """Build the index over the expanded sets ``accuracy`` (mask -> accuracy).

    ``{}`` must be among them (it costs 0 everywhere, which guarantees an answer to every
    budget ``>= 0``).
    """
    if 0 not in accuracy:
        raise ValueError("the empty feature set must be expanded (it answers the smallest budgets)")
    t0 = time.perf_counter()
    masks = list(accuracy)
    coef = dict(zip(masks, set_cost_matrix(costs, masks)))
    cands = candidate_set(accuracy, coef, domain, candidate_alpha)
    t1 = time.perf_counter()
    cand_coef = set_cost_matrix(costs, cands)
    cand_acc = [accuracy[m] for m in cands]
    swept = sweep(cand_coef, cand_acc, domain, index_all=index_all, validate=validate)
    if validate:
        check_against_brute_force(
            swept, cand_coef, cand_acc, set_cost_matrix(costs, masks), [accuracy[m] for m in masks], domain,
            alpha=candidate_alpha,
        )
    t2 = time.perf_counter()
    all_stats = dict(stats or {})
    all_stats.update(
        candidates=len(cands),
        crossings=swept.crossings,
        interesting_events=swept.interesting_events,
        interesting_points=len(swept.bounds) - 1,
        ranges=len(swept.bounds),
        index_entries=sum(len(s) for s in swept.skylines),
        candidate_seconds=t1 - t0,
        sweep_seconds=t2 - t1,
    )
    return cls(
        space, costs, domain, cands, cand_acc, swept.bounds, swept.skylines,
        models=models, explored=accuracy, stats=all_stats, params=params,
    )
