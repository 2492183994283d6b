"""The contract every index backend implements (PolyDom, Greedy and its variants, the baselines).

A backend is a class with a ``backend`` tag that answers "the most accurate trained feature set
whose cost at this size fits this budget", both from predicted costs (:meth:`lookup`,
:meth:`lookup_many`) and on a real clock (:meth:`select`). Everything a caller needs beyond
that -- re-costing without retraining, a summary to print, the trained sets and their scores, a
state for storage -- has one name here, so callers never branch on the backend's tag.

Invariants every backend keeps (checked by its ``check_invariants``):

* every budget ``>= 0`` at every size of ``domain`` gets an answer (the empty set costs 0);
* an answer's predicted cost at the query size is at most the budget (up to 1e-12 relative);
* every answer is one of the trained sets, with the accuracy recorded in :attr:`trained`.
"""

from __future__ import annotations

import math
import operator
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from polydom.index.costs.curve import CostCurve, format_curve, set_cost_matrix
from polydom.index.costs.poly import horner_scalar

from .base import StoredIndex
from .errors import (
    BackendError,
    ExtrapolationWarning,  # noqa: F401 - defined with the package's errors
)
from .serving.params import SERVING_KEYS, ServingParams, law_row  # noqa: F401 - older walks import law_row from here
from .values import Choice

__all__ = ["CostSensitiveIndex", "ExtrapolationWarning", "EXTRAPOLATE_POLICIES", "BackendError", "check_backend"]

#: What a lookup does at a size outside the range the costs were measured on.
EXTRAPOLATE_POLICIES = ("warn", "raise", "allow")


class CostSensitiveIndex(StoredIndex, ABC):
    """Abstract base of every index backend.

    Attributes
    ----------
    backend : str
        The tag stored with the index and accepted by ``polydom.build(backend=...)``.
    space : FeatureSpace
        The features, in index order.
    costs : tuple of CostCurve
        Per feature, in ``space`` order.
    domain : (float, float)
        The item sizes served.
    models : mapping of int to object
        Trained models by feature-set mask (lazily loaded for stored indexes).
    std_error : dict of int to float
        The standard error of each trained set's measured score, by mask (absent for sets whose
        black box reported none); every answer carries its set's as ``Choice.std_error``.
    stats, params : dict
        What the build measured and the options it was built with.
    chains : mapping of int to tuple of int
        An anytime backend's prefix chains (a set's mask to its features' walking order); empty
        where serving a set is computing what :meth:`lookup` returns.
    cascades : Cascades or None
        Confidence-cascade thresholds where they were trained (:meth:`select` may then stop at a
        prefix whose model is sure).
    """

    backend: str
    #: Which precomputed option tables batch and stream planning read
    #: (:func:`polydom.index.serving.optiontable.option_source`): ``"skyline"`` (the skylines per size
    #: range), ``"fixed"`` (a fixed list of sets, :meth:`option_sets`), or None (none: planning
    #: asks :meth:`options_at` size by size).
    option_kind: str | None = None
    chains: Mapping[int, tuple[int, ...]] = MappingProxyType({})
    cascades = None
    #: A set's measured score by mask where the index is ranked by a fit of the scores (empty
    #: where it is ranked by the measured scores themselves).
    measured: Mapping[int, float] = MappingProxyType({})
    params: dict = MappingProxyType({})
    stats: dict = MappingProxyType({})
    std_error: Mapping[int, float] = MappingProxyType({})

    # ------------------------------------------------------------------ answers

    @abstractmethod
    def lookup(self, size: float, budget: float) -> Choice:
        """The most accurate trained set whose predicted cost at ``size`` fits ``budget``."""

    @abstractmethod
    def lookup_many(self, sizes, budgets):
        """:meth:`lookup` for many queries at once; a ``Batch`` of columns."""

    def select(
        self,
        size: float,
        budget: float,
        compute: Callable[[str], object],
        clock: Callable[[], float] = time.perf_counter,
        *,
        stop_when_confident: bool = False,
        guarded: bool = True,
        serving_guards=None,
        speculate: bool = False,
        cpu_clock: Callable[[], float] | None = None,
        late_price=None,
    ) -> Choice:
        """Compute a set's features for real, one by one, and return the set served.

        The base rule looks up the set for ``(size, budget)`` and computes its features in index
        order; backends with an anytime rule override it. Every backend takes the same options:
        ``guarded=False`` ignores :meth:`cost_guards` when deciding to start a feature;
        ``serving_guards`` (a :class:`~polydom.index.serving.guards.ServingGuards`) supplies guards
        learned while serving and records the walk's times, ``cpu_clock`` the computing thread's
        CPU clock for it; ``late_price`` prices a late answer; ``speculate`` and
        ``stop_when_confident`` apply to backends with prefix chains and cascades. The base rule
        starts no feature conditionally and ignores them all. ``compute(name)`` is called at most
        once per feature (keep its values yourself); ``clock`` is read before the first feature
        and after each.

        Returns
        -------
        Choice
            Its ``cost`` is the **measured** time on ``clock``, not a prediction.
        """
        if stop_when_confident and not self.cascades:
            raise ValueError("this index has no cascade thresholds; train them (cascade=True) to stop when confident")
        if not callable(compute):
            raise TypeError(f"compute must be callable, got {compute!r}")
        choice = self.lookup(size, budget)
        start = clock()
        for name in self.space.names:
            if name in choice.features:
                compute(name)
        return choice.with_cost(clock() - start)

    def select_steps(self, size: float, budget: float, compute: Callable[[str], object],
                     clock: Callable[[], float] = time.perf_counter, **options) -> tuple[Choice, list]:
        """:meth:`select`, with what happened: ``(choice, steps)``. The base rule reports each
        computed feature as ``("compute", name)``; anytime backends report their walk's decisions
        too (:func:`polydom.index.serving.anytime.serve_anytime`)."""
        computed: list[str] = []

        def recording(name, *deadline):
            value = compute(name, *deadline)
            computed.append(name)
            return value

        choice = self.select(size, budget, recording, clock, **options)
        return choice, [("compute", name) for name in computed]

    @property
    def serving_params(self) -> ServingParams:
        """What an anytime walk reads about feature costs, as one typed record
        (:class:`~polydom.index.serving.params.ServingParams`): guard ratios and the quantile they
        were taken at, per size; cost laws; whether starts are capped. Read from :attr:`params`
        once, and again whenever one of its serving entries is set anew (as a fit and a refresh
        do); an index without them has guard ratios of 1.

        Raises
        ------
        ValueError
            A stored entry is malformed (naming it).
        """
        params = self.params
        key = tuple(map(params.get, SERVING_KEYS))
        cached = self.__dict__.get("_serving_params")
        if cached is None or not all(map(operator.is_, cached[0], key)):
            cached = self.__dict__["_serving_params"] = (key, ServingParams.from_params(params, len(self.space)))
        return cached[1]

    def cost_guards(self, size: float | None = None) -> tuple[float, ...]:
        """Per feature, in index order, the factor an anytime walk applies to the feature's
        predicted cost before starting it (the guard ratios of :attr:`serving_params`, set by the
        classifier from measured / predicted times, see :mod:`polydom.costs.calibration`), 1 for
        each without.

        A walk starts a feature only if the time used plus ``guard * predicted cost`` fits the
        budget, so it overruns only when the feature is slower than nearly all its measured
        calls. Lookups and the skyline ignore the guards.

        Parameters
        ----------
        size : float, optional
            The item's size. With per-size guards, the guards at the nearest calibrated size, or
            between two the larger of their guards; without ``size`` (or without them), the
            guards over all sizes.
        """
        return self.serving_params.guards_at(size)

    def walk_guards(self, size: float, guarded: bool = True, serving_guards=None) -> tuple[float, ...]:
        """The guards an anytime walk at ``size`` applies: those ``serving_guards`` learned (a
        :class:`~polydom.index.serving.guards.ServingGuards`), else :meth:`cost_guards`; 1 each
        when not ``guarded``."""
        if not guarded:
            return (1.0,) * len(self.space)
        if serving_guards is not None:
            learned = serving_guards.guards(size)
            if len(learned) == len(self.space):
                return learned
            # Learned for another version's features (a refresh changed them): not this index's.
        return self.cost_guards(size)

    @property
    def start_cap(self) -> bool:
        """Whether an anytime walk caps each start by the cost guards (set by the classifier from
        ``Serving(guard=...)``); True where the index does not say, as indexes saved before the
        flag existed were served."""
        return self.serving_params.start_cap

    def cost_laws(self, size: float | None = None) -> tuple | None:
        """Per feature, in index order, the measured law of a serving call's time over its
        predicted cost: a tuple of ascending quantiles at evenly spaced levels from 0 to 1, or
        None for a feature without one (set by the classifier from its serving-like calls,
        :func:`polydom.costs.calibration.cost_laws`). None when the index has none. With
        ``size``, the laws at the nearest calibrated size, that of the next larger one between two."""
        return self.serving_params.laws_at(size)

    @abstractmethod
    def options_at(self, size: float) -> tuple[list[int], list[float], list[float]]:
        """Every set this index can serve at ``size``: ``(masks, costs at size, accuracies)``,
        cost ascending. Planners over many items (a shared budget) choose among these."""

    def plan_batch(self, sizes, total_budget: float, **options):
        """One set per item of a batch sharing ``total_budget``: the most accurate plan that fits.

        Parameters
        ----------
        sizes : array-like of float
            The items' sizes.
        total_budget : float
            The summed predicted cost of the plan is at most this.
        **options
            ``max_item_budget``, ``exact``, ``accuracy``, ``time_limit``, ``mip_rel_gap``: see
            :func:`polydom.index.serving.planning.plan_batch`.

        Returns
        -------
        BatchPlan
            ``choices`` (a ``Batch``, one row per item) and ``total_cost``.
        """
        from polydom.index.serving.planning import (
            plan_batch,  # imported on use: the contract stays free of its planners
        )

        return plan_batch(self, sizes, total_budget, **options)

    # ------------------------------------------------------------------ costs

    def measured_range(self) -> tuple[float, float]:
        """The sizes the cost curves were fitted on (``params["measured_range"]``), else the domain."""
        rng = self.params.get("measured_range")
        return (float(rng[0]), float(rng[1])) if rng else self.domain

    def _outside_measured(self, size: float) -> None:
        """Apply ``params["extrapolate"]`` to a lookup at ``size`` outside :meth:`measured_range`.

        ``"warn"`` (default) warns once per index, ``"raise"`` raises ``ValueError``, ``"allow"``
        is silent. Cost curves are polynomials fitted on the measured sizes; far outside them a
        budget can be badly over- or under-provisioned, and the caller should know.
        """
        policy = self.params.get("extrapolate", "warn")
        if policy == "allow":
            return
        lo, hi = self.measured_range()
        message = (
            f"size {size!r} is outside the sizes the feature costs were measured on [{lo:g}, {hi:g}]; "
            f"the cost curves are extrapolated there"
        )
        if policy == "raise":
            raise ValueError(message + " (extrapolate='raise')")
        if not getattr(self, "_warned_extrapolation", False):
            self._warned_extrapolation = True
            import warnings

            warnings.warn(message + " (this warning is shown once per index; extrapolate='allow' silences it)",
                          ExtrapolationWarning, stacklevel=3)

    def cost_of(self, features, size: float) -> float:
        """Predicted cost of a feature set (names) at ``size``: the sum of its features' curves,
        and of the preparatory steps they need where the index was built with ``requires``
        (each step once)."""
        requires = self.params.get("requires")
        if requires:
            features = set(features) | {s for f in features for s in requires.get(f, ())}
        row = set_cost_matrix(self.costs, [self.space.mask(features)])[0]
        return horner_scalar(row.tolist()[::-1], float(size))

    @abstractmethod
    def with_costs(self, costs: Mapping[str, Any] | Sequence[CostCurve]) -> "CostSensitiveIndex":
        """A new index of the same backend over new cost curves, without retraining any model.

        ``costs`` maps every feature name to its curve (or lists the curves in index order).
        """

    def _curves_for(self, costs) -> tuple[CostCurve, ...]:
        """``costs`` as curves in index order, or one clear error naming a missing or extra feature."""
        from polydom.index.costs.curve import as_cost_curve

        if isinstance(costs, Mapping):
            missing = [n for n in self.space.names if n not in costs]
            extra = [n for n in costs if n not in self.space.names]
            if missing or extra:
                raise ValueError(f"costs must name exactly the index's features; missing {missing}, unknown {extra}")
            costs = [costs[n] for n in self.space.names]
        curves = tuple(as_cost_curve(c) for c in costs)
        if len(curves) != len(self.space):
            raise ValueError(f"expected {len(self.space)} cost curves, got {len(curves)}")
        return curves

    # ------------------------------------------------------------------ what was trained

    def answer_sets(self) -> list[int]:
        """Every set a lookup or a walk of this index may answer with (those without a model
        included): by default every set with a model. A server prepares them all before its first
        request (:meth:`polydom.serving.planner.ServingPlanner.prepare_plans`)."""
        return [int(m) for m in self.models]

    @property
    @abstractmethod
    def trained(self) -> Mapping[int, float]:
        """Every trained feature set (bitmask) with its accuracy estimate."""

    # ------------------------------------------------------------------ storage and inspection

    def state_header(self) -> dict:
        """The metadata every backend stores first: tag, features, cost curves, domain, params, stats."""

        from .base import jsonable

        return {
            "backend": self.backend,
            "features": list(self.space.names),
            "costs": [list(c.coefficients) for c in self.costs],
            "domain": [self.domain[0], self.domain[1] if math.isfinite(self.domain[1]) else "inf"],
            "params": jsonable(self.params),
            "stats": jsonable(self.stats),
        }

    @abstractmethod
    def to_state(self):
        """Everything needed to rebuild the index: an ``IndexState``."""

    @classmethod
    @abstractmethod
    def from_state(cls, state) -> "CostSensitiveIndex":
        """Inverse of :meth:`to_state`; ``state.models`` may be a lazy mapping."""

    @abstractmethod
    def check_invariants(self) -> None:
        """Assert the backend's invariants (its module docstring states them)."""

    def summary(self) -> dict:
        """What ``polydom inspect``, the build command and reports print about this index.

        Keys: ``backend``, ``features``, ``costs`` (formatted curves), ``domain``, ``trained``
        (count), ``params``, ``stats``, plus the backend's own under ``details``.
        """
        return {
            "backend": self.backend,
            "features": list(self.space.names),
            "costs": {n: format_curve(c) for n, c in zip(self.space.names, self.costs)},
            "domain": list(self.domain),
            "trained": len(self.trained),
            "params": dict(self.params),
            "stats": dict(self.stats),
            "details": self._summary_details(),
        }

    def _summary_details(self) -> dict:
        """Backend-specific entries of :meth:`summary`."""
        return {}


def check_backend(index_class) -> None:
    """Refuse a backend class that is not a :class:`CostSensitiveIndex` implementing every part of
    the contract: its abstract methods, and a ``backend`` tag.

    Raises
    ------
    BackendError
        Naming the class and what it lacks.
    """
    if not (isinstance(index_class, type) and issubclass(index_class, CostSensitiveIndex)):
        raise BackendError(f"a backend's index class must subclass CostSensitiveIndex, got {index_class!r}")
    missing = sorted(index_class.__abstractmethods__)
    if missing:
        raise BackendError(f"backend class {index_class.__name__} does not implement {', '.join(missing)}")
    if not isinstance(getattr(index_class, "backend", None), str):
        raise BackendError(f"backend class {index_class.__name__} has no backend tag (a class attribute `backend`)")
