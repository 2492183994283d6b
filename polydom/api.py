"""``polydom.build``: validate the inputs once, explore the lattice, build the chosen backend."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from polydom.index import CostCurve, as_cost_curve
from polydom.index.protocol import EXTRAPOLATE_POLICIES, CostSensitiveIndex
from polydom.index.serving.params import ServingParams
from polydom.index.values import check_real
from polydom.lattice import SANDWICH_MODES, Exploration, FeatureSpace
from polydom.lattice import naive_expand_all as _naive_expand_all

from .backends import BACKENDS, backend_spec
from .errors import InputError, InputTypeError
from .expansion import ModelRecorder
from .steps import UsableSets, check_requires

__all__ = ["build", "naive_expand_all", "validate_costs", "validate_domain", "validate_problem"]



def validate_domain(domain) -> tuple[float, float]:
    """``(lo, hi)`` with ``0 <= lo < hi <= inf``, or one clear error."""
    try:
        lo, hi = domain
    except (TypeError, ValueError):
        raise TypeError(f"domain must be a pair (lo, hi), got {domain!r}") from None
    lo = check_real("domain lower end", lo, low=0.0)
    hi = check_real("domain upper end", hi, low=0.0, allow_inf=True)
    if not lo < hi:
        raise ValueError(f"domain must satisfy lo < hi, got ({lo}, {hi})")
    return lo, hi


def validate_costs(costs, domain) -> tuple[FeatureSpace, tuple[CostCurve, ...]]:
    """Feature space and cost curves from ``costs``; each curve must be >= 0 on ``domain`` (a negative
    cost would let a set fit any budget)."""
    if not isinstance(costs, Mapping):
        raise TypeError(f"costs must be a mapping of feature name to cost curve, got {type(costs).__name__}")
    if not costs:
        raise ValueError("costs is empty: at least one feature is required")
    space = FeatureSpace(costs.keys())
    curves = []
    for name, value in costs.items():
        try:
            curve = as_cost_curve(value)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"cost curve of feature {name!r}: {exc}") from None
        if not curve.is_nonnegative(domain):
            raise ValueError(
                f"cost curve of feature {name!r} ({list(curve.coefficients)}) is negative somewhere on the "
                f"domain {domain}; costs must be >= 0 for every size (fit with non-negative coefficients)"
            )
        curves.append(curve)
    return space, tuple(curves)


def validate_problem(costs, domain, e, sandwich):
    """The checks every PolyDom build shares: ``(space, curves, domain, e)`` or one clear error."""
    domain = validate_domain(domain)
    space, curves = validate_costs(costs, domain)
    if not (isinstance(e, str) and e == "auto"):
        e = check_real("e", e, low=0.0)
    if sandwich not in SANDWICH_MODES:
        raise ValueError(f"sandwich must be one of {SANDWICH_MODES}, got {sandwich!r}")
    return space, curves, domain, e


def build(
    costs: Mapping[str, Any],
    expand: Callable,
    *,
    alpha: float = 1.0,
    e: float | str = "auto",
    domain: tuple[float, float] = (0.0, math.inf),
    sandwich: str = "all",
    candidate_alpha: float | None = None,
    validate: bool = False,
    tolerance: float | None = 0.0,
    measured_range: tuple[float, float] | None = None,
    extrapolate: str = "warn",
    backend: str = "polydom",
    n_jobs: int | None = None,
    cache=None,
    cache_key: str | None = None,
    max_expansions: int | None = None,
    progress=None,
    requires: Mapping[str, Any] | None = None,
    serving: ServingParams | None = None,
    **backend_options,
) -> CostSensitiveIndex:
    """Precompute the index that answers "best model within this budget for this size".

    Parameters
    ----------
    costs : mapping of str to CostCurve, sequence of float or 1-D array
        One cost curve per feature (coefficients lowest degree first); the mapping's order is
        the feature order. Every curve must be >= 0 on ``domain``.
    expand : callable
        The black box: ``expand(frozenset_of_names) -> accuracy`` or an :class:`Expansion`
        carrying the trained model. Called once per explored set, ``frozenset()`` included.
    alpha : float, default 1.0
        Approximation factor (>= 1). At 1 the answers are exact; above, ``alpha * a >= OPT``.
    e : float or "auto", default "auto"
        Monotonicity tolerance (>= 0): the largest amount by which adding features may lower
        accuracy. Exactness at ``alpha = 1`` holds when violations are at most ``e``. Real
        learners are not monotone; ``"auto"`` measures the worst drop among the sets trained so
        far and explores again with it until no trained pair breaks it (``stats["e_used"]``,
        ``stats["e_observed"]``). A number fixes ``e``; ``0`` is the paper's monotone case.
    domain : (lo, hi), default (0, inf)
        Item sizes the index serves; a size outside is a ``ValueError`` at lookup.
    sandwich : {"all", "snapshot", "literal"}, default "all"
        Which expanded pairs may prune a set; see :mod:`lattice.explorer`.
    candidate_alpha : float, optional
        Accuracy slack in candidate dominance. ``None`` means 1 (exact, safe); passing ``alpha``
        reproduces the paper-literal Algorithm 1, whose losses compound.
    validate : bool, default False
        Check Theorem 3.13's verdict against a recomputed skyline at every crossing.
    tolerance : float or None, default 0.0
        The tie rule of a lookup: among the affordable sets whose accuracy is within
        ``tolerance`` of the best affordable one, the cheapest is served. ``0`` (default) always
        serves the most accurate set, the paper's rule. ``None`` means one standard error of the
        difference of the two scores, from the ``std_error`` the black box reports in its
        :class:`Expansion` -- measured on real images with a few hundred training items, that
        ties nearly every set with the best and serves far too cheap sets, so it is opt-in. The rule is precomputed per skyline
        entry, so a lookup stays two bisections.
    measured_range : (lo, hi), optional
        The item sizes the cost curves were measured on (fitted curves are polynomials; outside
        the measured sizes they extrapolate). Default: the whole domain.
    extrapolate : {"warn", "raise", "allow"}, default "warn"
        What a lookup does at a size outside ``measured_range``: warn once per index, raise
        ``ValueError``, or stay silent.
    backend : {"polydom", "greedy", "greedy-acc", "greedy-cost"}, default "polydom"
        A name from the backend table (:mod:`polydom.backends`).
        The Greedy backends need ``n0`` (the size at which to compare costs while expanding);
        ``"greedy"`` also accepts ``lambdas`` (``"greedy-acc"`` and ``"greedy-cost"`` fix their
        grid and refuse it). They ignore ``alpha``, ``e``, ``sandwich``, ``candidate_alpha``,
        ``tolerance`` and ``validate``.
    n_jobs : int, optional
        Train each lattice layer's sets in parallel through joblib (``-1``: all cores). The
        engine is the caller's ``joblib.parallel_config`` (loky, Dask, Ray); results are
        identical whatever it is. ``expand`` must then be picklable (cloudpickle is used).
    cache : str, os.PathLike or ExpansionStore, optional
        A resumable expansion cache (an LMDB directory of its own): sets trained under
        ``cache_key`` are reused, and each new one is committed as soon as it is trained.
    cache_key : str, optional
        Required with ``cache``: what the cached results were computed from (data, learner,
        feature definitions). Models must be storable with skops.
    max_expansions : int, optional
        Raise :class:`~polydom.ExpansionLimitError` instead of training more sets than this.
    progress : callable, optional
        ``progress(trained)`` after each trained set; if it has ``progress.finished(count)``,
        that is called as a screening black box's sets are trained fully.
    requires : mapping of str to iterable of str, optional
        Preparatory steps the features share (:mod:`polydom.steps`): each feature's steps, every
        one an item of ``costs`` with its own curve. A set then pays for the union of its
        features' steps, once; ``expand`` receives the features whose steps the set holds
        (never the steps), once per such set; ``lookup`` answers with the steps among the
        features to compute, and ``cost_of`` adds the steps a set needs.
    serving : ServingParams, optional
        What the index's anytime walks read about feature costs: guard ratios, their quantile,
        cost laws, whether each start is capped (:class:`polydom.index.serving.params.ServingParams`,
        which a classifier's fit measures). Default: guard ratios of 1, each start capped.
    **backend_options
        Options of one backend. PolyDom's: ``prefix_chains`` (bool, default True: train the
        prefixes anytime serving falls back to), ``reference_size`` (where chains compare feature
        costs), ``search`` (``"auto"``, ``"lattice"`` or ``"skyline"``: how sets are chosen for
        training, :mod:`polydom.index.search`; ``"auto"`` explores a lattice of up to 2**10 sets
        and searches the skyline's neighbourhoods above) and ``scores``: ``"measured"``
        (default) ranks sets by the black box's scores as
        they are; ``"monotone"`` by their weighted isotonic fit on the subset order
        (:func:`polydom.lattice.monotone_scores`, weights ``1 / std_error**2``), which takes the
        luck out of noisy scores -- a superset then never ranks below its subset. The measured
        scores stay in ``index.measured_scores``. Greedy's: ``n0`` and ``lambdas``.

    Returns
    -------
    CostSensitiveIndex
        A ``PolyDomIndex`` or a ``GreedyIndex``, both with the backend contract
        (``lookup``, ``lookup_many``, ``select``, ``with_costs``, ``summary``, ``save``).

    Examples
    --------
    >>> import polydom
    >>> costs = {"a": [1.0], "b": [0.0, 2.0]}
    >>> acc = {frozenset(): .5, frozenset("a"): .7, frozenset("b"): .8, frozenset("ab"): .9}
    >>> index = polydom.build(costs, acc.__getitem__)
    >>> sorted(index.lookup(size=3, budget=7).features)
    ['a', 'b']
    >>> sorted(index.lookup(size=3, budget=6.5).features)
    ['b']
    """
    spec = backend_spec(backend)
    space, curves, domain, e = validate_problem(costs, domain, e, sandwich)
    alpha = check_real("alpha", alpha, low=1.0)
    cand_alpha = 1.0 if candidate_alpha is None else check_real("candidate_alpha", candidate_alpha, low=1.0)
    # An option left at None was not given; one given to a backend that has no use for it is
    # refused, naming the backends it applies to.
    backend_options = {k: v for k, v in backend_options.items() if v is not None or k in spec.options}
    unexpected = sorted(set(backend_options) - set(spec.options))
    if unexpected:
        elsewhere = sorted({n for o in unexpected for n, other in BACKENDS.items() if o in other.options})
        raise TypeError(f"unexpected options for the {backend} backend: {unexpected}"
                        + (f" (they apply to {elsewhere})" if elsewhere else ""))
    if tolerance is not None:
        tolerance = check_real("tolerance", tolerance, low=0.0)
    if extrapolate not in EXTRAPOLATE_POLICIES:
        raise ValueError(f"extrapolate must be one of {EXTRAPOLATE_POLICIES}, got {extrapolate!r}")
    if measured_range is not None:
        measured_range = validate_domain(measured_range)
    offered = dict(
        alpha=alpha, e=e, sandwich=sandwich, candidate_alpha=cand_alpha, validate=validate, tolerance=tolerance,
        measured_range=measured_range, extrapolate=extrapolate, **backend_options,
    )
    requires = check_requires(requires, space.names)
    if serving is not None and not isinstance(serving, ServingParams):
        raise InputTypeError(f"serving must be a ServingParams, got {type(serving).__name__}")
    if serving is not None and len(serving.guard_ratios) != len(space):
        raise InputError(f"serving holds {len(serving.guard_ratios)} guard ratios for {len(space)} items")
    if requires:
        expand = UsableSets(expand, requires)
        offered["requires"] = requires  # PolyDom orders its prefix chains steps first
    store = _open_store(cache, cache_key)
    recorder = ModelRecorder(space, expand, n_jobs=n_jobs, store=store, max_expansions=max_expansions, on_trained=progress,
                             on_finished=getattr(progress, "finished", None),
                             on_finish_batch=getattr(progress, "finish_batch", None),
                             on_rescored=getattr(progress, "rescored", None),
                             on_round=getattr(progress, "search_round", None))
    try:
        return spec.build(space, curves, recorder, domain=domain, serving=serving,
                          **{k: v for k, v in offered.items() if k in spec.options})
    except KeyboardInterrupt:
        recorder.abort()  # Ctrl-C stops the workers' sets too, wherever it landed
        raise
    finally:
        recorder.close()  # nothing left in flight, the engine's threads and shipped files released


def _open_store(cache, cache_key):
    if cache is None:
        if cache_key is not None:
            raise ValueError("cache_key given without cache")
        return None
    from .cache import ExpansionStore

    if isinstance(cache, ExpansionStore):
        return cache
    if cache_key is None:
        raise ValueError("cache needs a cache_key naming what the cached results were computed from")
    return ExpansionStore(cache, cache_key)


def naive_expand_all(features, expand: Callable) -> Exploration:
    """NaiveExpandAll: call ``expand`` on all ``2**len(features)`` sets, ``{}`` included.

    Parameters
    ----------
    features : iterable of str, or a mapping whose keys are the features (e.g. ``costs``)
    expand : callable
        As for :func:`build`.

    Returns
    -------
    lattice.Exploration
        ``.expanded_sets()`` maps every set to its accuracy; ``.calls`` is ``2**len(features)``.
    """
    space = FeatureSpace(features.keys() if isinstance(features, Mapping) else features)
    return _naive_expand_all(space, ModelRecorder(space, expand))
