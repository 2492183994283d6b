"""Progressive alpha: the best index a precompute time budget affords.

Start from a large approximation factor (few sets to train) and lower it while time remains,
sharing one expansion cache so that no set is ever trained twice. The nodes expanded for a
smaller alpha are **not** a superset of those for a larger one (the paper's Property 3.9 fails
for the traversal), so each step re-explores the lattice -- the shared cache makes the
re-visited sets free -- rather than extending the previous exploration.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence

from polydom.index import PolyDomIndex
from polydom.index.build import build_polydom
from polydom.lattice import ExpansionCache

from polydom.index.values import check_real

from .api import _open_store, validate_problem
from .expansion import DeadlineReached, ModelRecorder

__all__ = ["build_progressive", "DEFAULT_ALPHAS"]

DEFAULT_ALPHAS = (2.0, 1.5, 1.3, 1.2, 1.1, 1.05, 1.0)


def build_progressive(
    costs: Mapping,
    expand: Callable,
    *,
    time_budget: float,
    alphas: Sequence[float] = DEFAULT_ALPHAS,
    clock: Callable[[], float] = time.monotonic,
    e: float | str = 0.0,
    domain: tuple[float, float] = (0.0, math.inf),
    sandwich: str = "all",
    n_jobs: int | None = None,
    cache=None,
    cache_key: str | None = None,
    max_expansions: int | None = None,
    progress=None,
) -> PolyDomIndex:
    """Build with decreasing alpha until ``time_budget`` (seconds of ``clock``) is spent.

    Parameters
    ----------
    costs, expand, domain, sandwich, n_jobs, cache, cache_key, max_expansions, progress
        As for :func:`polydom.build`.
    e : float or "auto", default 0.0
        As for :func:`polydom.build`, whose default is ``"auto"``; here each step explores with
        the tolerance given, 0 unless asked.
    time_budget : float
        Seconds of precompute. The first (largest) alpha always completes; after that no new
        batch of training starts once the budget is spent, and the step in progress is dropped.
    alphas : sequence of float, default (2, 1.5, 1.3, 1.2, 1.1, 1.05, 1)
        Strictly decreasing, each >= 1.
    clock : callable, default time.monotonic
        Injected by tests.

    Returns
    -------
    PolyDomIndex
        The index of the smallest alpha that completed. ``stats["alpha_reached"]`` is that alpha,
        ``stats["alphas_completed"]`` the list, ``stats["trained"]`` the sets trained in all steps.
    """
    budget = check_real("time_budget", time_budget, low=0.0)
    alphas = [check_real("alphas entry", a, low=1.0) for a in alphas]
    if not alphas or any(b >= a for a, b in zip(alphas, alphas[1:])):
        raise ValueError(f"alphas must be a non-empty, strictly decreasing sequence, got {alphas!r}")
    space, curves, domain, e = validate_problem(costs, domain, e, sandwich)
    started = clock()
    recorder = ModelRecorder(
        space, expand, n_jobs=n_jobs, store=_open_store(cache, cache_key), max_expansions=max_expansions,
        clock=clock, on_trained=progress,
    )
    shared = ExpansionCache(recorder, recorder.many)
    best, completed = None, []
    for step, alpha in enumerate(alphas):
        if step and clock() - started >= budget:
            break
        recorder.deadline = None if step == 0 else started + budget
        try:
            best = build_polydom(
                space, curves, recorder, domain=domain, alpha=alpha, e=e, sandwich=sandwich, lattice_cache=shared,
            )
        except DeadlineReached:
            break
        completed.append(alpha)
    best.stats.update(
        alpha_reached=completed[-1], alphas_completed=completed, trained=recorder.calls,
        reused=recorder.reused, progressive_seconds=clock() - started,
    )
    return best
