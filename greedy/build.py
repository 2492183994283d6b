"""``build_greedy``: from validated costs and the black box to a :class:`GreedyIndex`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence

from polydom.index import CostCurve
from polydom.index.build import stored_params
from polydom.index.ranking import step_needs
from polydom.lattice import FeatureSpace

from .expansion import greedy_sequences
from .index import GreedyIndex
from .options import check_n0, resolve_lambdas
from .skyline import prefix_masks

__all__ = ["build_greedy"]


def build_greedy(
    space: FeatureSpace,
    curves: Sequence[CostCurve],
    recorder: Callable[[int], float],
    *,
    domain: tuple[float, float],
    backend: str,
    n0: float | None = None,
    lambdas: Iterable[float] | None = None,
    measured_range: tuple[float, float] | None = None,
    extrapolate: str = "warn",
    requires=None,
    serving=None,
) -> GreedyIndex:
    """Run Greedy's expansion and index the result; called by :func:`polydom.build`.

    Parameters
    ----------
    space : FeatureSpace
    curves : sequence of CostCurve
        Per feature in ``space`` order, already checked ``>= 0`` on ``domain``.
    recorder : callable
        ``recorder(mask) -> accuracy``, the validated black box; it keeps the models it is given
        in ``recorder.models`` (mask -> model).
    domain : (lo, hi)
        Already validated.
    backend : {"greedy", "greedy-acc", "greedy-cost"}
        ``"greedy-acc"`` is Greedy with ``lambdas=[0]`` (most accuracy first), ``"greedy-cost"``
        with ``lambdas=[inf]`` (least cost first), named by behaviour.
    n0 : float
        Required. The item size at which feature costs are compared while building the
        sequences and the skyline (e.g. the median item size); must lie in ``domain``.
    lambdas : iterable of float, optional
        The λ grid for ``"greedy"``; default the paper's
        ``[0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1, 5, 10]``.
    measured_range, extrapolate
        As for ``polydom.build``: the sizes the costs were measured on, and the lookup policy
        outside them.
    requires : mapping of str to tuple of str, optional
        As for ``polydom.build``: a feature joins a sequence with the steps it still lacks.
    serving : ServingParams, optional
        What the index's walks read (:class:`polydom.index.serving.params.ServingParams`), kept
        in its params.

    Returns
    -------
    GreedyIndex
        ``stats``: ``trained`` (black-box calls, ``{}`` included), ``expanded`` (distinct
        non-empty sets trained: the paper's Metric 1, repeats counted once), ``sequences`` (distinct),
        ``prefixes`` (distinct recorded prefix sets, ``{}`` included), ``index_entries``
        (skyline length), ``lambdas`` (grid size), ``build_seconds``.
        ``models`` holds the models of the recorded prefixes only -- the sets a lookup can return.
    """
    t0 = time.perf_counter()
    grid = resolve_lambdas(backend, lambdas)
    n0 = check_n0(n0, domain)
    expansion = greedy_sequences([c(n0) for c in curves], recorder, grid, step_needs(space, requires))
    prefixes = {m for s in expansion.sequences for m in prefix_masks(s)}
    recorded = getattr(recorder, "models", {})
    models = {m: recorded[m] for m in expansion.accuracy if m in prefixes and m in recorded}
    # The lookup's walk reads which items are steps, and the serving record.
    params = stored_params(dict(
        n0=n0, lambdas=list(grid), domain=list(domain),
        measured_range=None if measured_range is None else list(measured_range), extrapolate=extrapolate,
    ), requires, serving)
    stats = dict(
        trained=expansion.trained,
        expanded=expansion.expanded,
        sequences=len(set(expansion.sequences)),
        prefixes=len(prefixes),
        lambdas=len(grid),
    )
    std_error = {m: se for m, se in getattr(recorder, "std_errors", {}).items() if m in expansion.accuracy}
    index = GreedyIndex(
        space, curves, domain, n0=n0, lambdas=grid, sequences=expansion.sequences,
        accuracy=expansion.accuracy, models=models, stats=stats, params=params, backend=backend, std_error=std_error,
    )
    index.stats["index_entries"] = len(index.skyline)
    index.stats["build_seconds"] = time.perf_counter() - t0
    return index
