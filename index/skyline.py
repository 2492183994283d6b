"""The two-level PolyDom index and its lookup.

Invariants (checked by :meth:`PolyDomIndex.check_invariants`):

* ``bounds`` is strictly ascending and ``bounds[0]`` is the domain's lower end; range ``r`` is
  ``[bounds[r], bounds[r+1])``, the last one closed at the domain's upper end.
* ``skylines[r]`` lists candidates whose costs are non-decreasing at every size of range ``r``
  and whose accuracies are strictly increasing; its first entry costs 0 at every size (the
  empty set, or a zero-cost set at least as accurate), so every budget ``>= 0`` is answered.
* Costs are never stored per range: a lookup evaluates them at the query size (trap T8).
* ``ranked_prefixes`` is :func:`~polydom.index.serving.anytime.ranked_prefixes` of the chains and the
  trained accuracies (the anytime walk's table, derived once per index, never stored).
"""

from __future__ import annotations

import math
import sys
import time
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from polydom.index.costs.curve import CostCurve, set_cost_matrix
from polydom.index.costs.poly import horner_scalar
from polydom.index.serving.anytime import check_chains, ranked_prefixes, serve_anytime
from polydom.index.serving.prefixes import answer_sets
from polydom.lattice import FeatureSpace

from .candidates import candidate_set
from .cascade import Cascades
from .protocol import CostSensitiveIndex
from .queries import BUDGET_SLACK, Batch, bad_query, check_queries, check_query
from .ranking import rank_scores, step_needs
from .state import IndexState
from .sweep import check_against_brute_force, sweep
from .values import Choice

_FLOAT_MAX = sys.float_info.max
_new_choice = tuple.__new__

__all__ = ["PolyDomIndex", "IndexState", "Batch", "check_query", "check_queries"]


class _LookupState(NamedTuple):
    """What :meth:`PolyDomIndex.lookup` reads, one immutable record per version (unpacked in this
    field order on the hot path)."""

    lo: float  # the smallest size served
    size_max: float  # the largest, finite (a chained comparison then rejects NaN and inf)
    measured_lo: float  # the range the cost curves were measured on
    measured_hi: float
    bounds: list  # each size range's lower bound
    lengths: list  # each range's skyline length
    quadratic: bool  # every candidate's cost polynomial has degree <= 2
    sky_rows: list  # per range, its skyline's cost rows
    entries: list  # per range and skyline entry, what a lookup returns there
    models: object


class _BatchState(NamedTuple):
    """What :meth:`PolyDomIndex.lookup_many` reads: per-coefficient columns of every range's
    skyline, padded to a power of two."""

    domain: tuple
    bounds: np.ndarray
    padded: int  # the padded length of a range's skyline
    columns: list  # one column per coefficient
    candidates: np.ndarray  # the candidate at each padded position
    served: np.ndarray  # the position served when that one is the most accurate affordable
    masks: np.ndarray  # each candidate's mask
    accuracy: np.ndarray  # and its accuracy
    std_error: object
    space: object
    models: object


class _Snapshot(NamedTuple):
    """A version's serving state, swapped in one assignment (:mod:`polydom.index.base`)."""

    lookup: _LookupState
    batch: _BatchState


class PolyDomIndex(CostSensitiveIndex):
    """The PolyDom index: interesting points, a skyline per range, and the candidates' models.

    Built by :func:`polydom.build`; see the module docstring for the invariants.

    Parameters
    ----------
    space : FeatureSpace
    costs : sequence of CostCurve
        Per feature, in ``space`` order.
    domain : (lo, hi)
    candidates : sequence of int
        Candidate masks; position is the candidate id used by ``skylines``.
    accuracy : sequence of float
        Per candidate.
    bounds : sequence of float
    skylines : sequence of sequence of int
    models : mapping of mask to model, optional
        Anything with ``.get(mask)``; stored indexes pass a lazy loader.
    explored : mapping of mask to accuracy, optional
        Every expanded set with the score the index ranks it by (for inspection and the
        monotonicity audit).
    stats, params : mapping, optional
    std_error : mapping of mask to float, optional
        The standard error of each trained set's measured score, where the black box gave one.
    chains : mapping of mask to sequence of int, optional
        Per servable set, the order its features are computed in by the anytime walk (feature
        indices); every prefix of a chain is a trained set.
    cascades : Cascades, optional
        Confidence thresholds per chain prefix, for walks that may stop early (none: no cascade).
    measured : mapping of mask to accuracy, optional
        The black box's own scores, when the index ranks sets by something derived from them
        (``scores="monotone"``); empty when ``explored`` holds them.
    """

    backend = "polydom"
    option_kind = "skyline"

    def __init__(
        self,
        space: FeatureSpace,
        costs: Sequence[CostCurve],
        domain: tuple[float, float],
        candidates: Sequence[int],
        accuracy: Sequence[float],
        bounds: Sequence[float],
        skylines: Sequence[Sequence[int]],
        models: Mapping[int, Any] | None = None,
        explored: Mapping[int, float] | None = None,
        stats: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
        std_error: Mapping[int, float] | None = None,
        chains: Mapping[int, Sequence[int]] | None = None,
        cascades: Cascades | None = None,
        measured: Mapping[int, float] | None = None,
    ):
        self.space = space
        self.costs = tuple(costs)
        self.domain = (float(domain[0]), float(domain[1]))
        self.candidates = [int(m) for m in candidates]
        self.candidate_accuracy = [float(a) for a in accuracy]
        self.bounds = [float(b) for b in bounds]
        self.skylines = [[int(i) for i in s] for s in skylines]
        self.models = models if models is not None else {}
        self.explored = dict(explored) if explored is not None else {}
        self.std_error = {int(m): float(v) for m, v in (std_error or {}).items()}
        self.measured = {int(m): float(v) for m, v in (measured or {}).items()}
        self.chains = {int(m): tuple(int(i) for i in order) for m, order in (chains or {}).items()}
        self.cascades = cascades if cascades is not None else Cascades({}, [])
        self.ranked_prefixes = ranked_prefixes(self.chains, self.explored)
        self.stats = dict(stats or {})
        self.params = dict(params or {})
        self.params.setdefault("tolerance", None)
        self.candidate_coefficients = set_cost_matrix(self.costs, self.candidates) if self.candidates else np.zeros((0, 1))
        self._prepare()

    @classmethod
    def from_trained(
        cls,
        space: FeatureSpace,
        costs: Sequence[CostCurve],
        trained: Mapping[int, float],
        *,
        domain: tuple[float, float],
        candidate_alpha: float = 1.0,
        validate: bool = False,
        index_all: bool = False,
        models: Mapping[int, Any] | None = None,
        stats: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
        std_error: Mapping[int, float] | None = None,
        chains: Mapping[int, Sequence[int]] | None = None,
        cascades: Cascades | None = None,
        measured: Mapping[int, float] | None = None,
    ) -> "PolyDomIndex":
        """Index the trained sets ``trained`` (mask -> accuracy): candidate set, sweep, skylines.

        ``{}`` must be among them (it costs 0 everywhere, which guarantees an answer to every
        budget ``>= 0``). ``validate`` checks every sweep verdict and then the stored skylines
        against all trained sets at every interesting point and between them.
        """
        if 0 not in trained:
            raise ValueError("the empty feature set must be expanded (it answers the smallest budgets)")
        t0 = time.perf_counter()
        masks = list(trained)
        coef = dict(zip(masks, set_cost_matrix(costs, masks)))
        cands = candidate_set(trained, coef, domain, candidate_alpha)
        t1 = time.perf_counter()
        cand_coef = set_cost_matrix(costs, cands)
        cand_acc = [trained[m] for m in cands]
        swept = sweep(cand_coef, cand_acc, domain, index_all=index_all, validate=validate)
        if validate:
            check_against_brute_force(
                swept, cand_coef, cand_acc, set_cost_matrix(costs, masks), [trained[m] for m in masks], domain,
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
            models=models, explored=trained, stats=all_stats, params=params, std_error=std_error, chains=chains,
            cascades=cascades, measured=measured,
        )

    @property
    def trained(self) -> Mapping[int, float]:
        """Every set the lattice exploration trained, with the score the index ranks it by (the
        black box's accuracy, or its monotone fit with ``scores="monotone"``); also ``explored``."""
        return self.explored

    @property
    def measured_scores(self) -> Mapping[int, float]:
        """Every trained set's score as the black box measured it, whatever the index ranks by."""
        return self.measured or self.explored

    def select(self, size, budget, compute, clock=time.perf_counter, *, stop_when_confident=False,
               guarded=True, serving_guards=None, speculate=False, cpu_clock=None, late_price=None) -> Choice:
        """Serve on a real clock, anytime: fall back to a computed prefix, upgrade when time is left.

        Computes the looked-up set's features one by one in its chain's order; before each, the
        time used plus the feature's predicted cost must fit ``budget`` or the walk stops and the
        most accurate fully computed trained set is served; after each, a set clearly more
        accurate than the target whose uncomputed features now fit the time left becomes the
        target. See :mod:`polydom.index.serving.anytime`. Without chains (built with
        ``prefix_chains=False``) the base rule applies: look up, then compute. With
        ``stop_when_confident``, the cascade's thresholds may stop the walk at a prefix whose
        model is sure (``compute`` must then return each feature's vector). ``guarded=False``
        ignores the cost guards (:meth:`cost_guards`), as a batch sharing one total does: its
        items' overruns are booked and re-planned, not prevented one by one. ``serving_guards``
        (a :class:`~polydom.index.serving.guards.ServingGuards`) supplies guards learned from
        earlier walks and records this one's measured times. With ``speculate``, a feature the
        guards refuse is still started where its predicted cost fits, as
        ``compute(name, deadline)``, which must raise
        :class:`~polydom.index.serving.anytime.FeatureTimeout` once ``clock()`` passes ``deadline``
        (see :mod:`polydom.index.serving.anytime`). ``cpu_clock`` (the computing thread's CPU clock) lets
        ``serving_guards`` learn each feature's own cost apart from the machine's scheduling.
        ``late_price`` (a :class:`~polydom.index.serving.lateness.LatePrice`) prices a late answer, for a
        late-share budget.

        Returns
        -------
        Choice
            Its ``cost`` is the measured time on ``clock``.
        """
        return self.select_steps(size, budget, compute, clock, stop_when_confident=stop_when_confident,
                                 guarded=guarded, serving_guards=serving_guards, speculate=speculate,
                                 cpu_clock=cpu_clock, late_price=late_price)[0]

    def select_steps(self, size, budget, compute, clock=time.perf_counter, *, stop_when_confident=False,
                     guarded=True, serving_guards=None, speculate=False, cpu_clock=None, late_price=None):
        """:meth:`select`, with what happened: ``(choice, steps)``, the steps as
        ``("compute", name)``, ``("upgrade", mask)``, ``("stop", name)`` (the next feature did not
        fit), ``("confident", mask)`` (the cascade stopped), ``("speculate", name)`` and
        ``("abandon", name)`` (started past the guard; missed the deadline), in order."""
        ix = self._view()  # one version from start to end, whatever a refresh does meanwhile
        if stop_when_confident and not ix.cascades:
            raise ValueError("this index has no cascade thresholds; train them (cascade=True) to stop when confident")
        if not ix.chains:
            choice = CostSensitiveIndex.select(ix, size, budget, compute, clock)
            return choice, [("compute", n) for n in ix.space.names if n in choice.features]
        if not callable(compute):
            raise TypeError(f"compute must be callable, got {compute!r}")
        size, budget = check_query(size, budget, ix.domain)  # floats; an int beyond float range is inf
        mask, elapsed, steps = serve_anytime(
            ix, size, budget, compute, clock, stop_when_confident=stop_when_confident, guarded=guarded,
            serving_guards=serving_guards, speculate=speculate, cpu_clock=cpu_clock, late_price=late_price,
        )
        return Choice(ix.space.frozenset(mask), ix.explored[mask], float(elapsed), mask, ix.models,
                      ix.std_error.get(mask)), steps

    def options_at(self, size: float) -> tuple[list[int], list[float], list[float]]:
        """The skyline valid at ``size`` as ``(masks, costs, accuracies)``, cost ascending."""
        ids = self.skyline_ids_at(check_query(size, 0.0, self.domain)[0])
        costs = [horner_scalar(row[::-1], size) for row in self.candidate_coefficients[ids].tolist()]
        return [self.candidates[c] for c in ids], costs, [self.candidate_accuracy[c] for c in ids]

    def answer_sets(self) -> list[int]:
        """The candidates and every prefix an anytime walk may stop at (:func:`answer_sets`)."""
        return answer_sets(self.candidates, self.chains)

    def with_cascades(self, cascades: Cascades) -> "PolyDomIndex":
        """This index with cascade thresholds for ``select(..., stop_when_confident=True)``."""
        import copy

        other = copy.copy(self)
        other.cascades = cascades
        return other

    def skyline_ids_at(self, size: float) -> list[int]:
        """Candidate ids of the skyline valid at ``size``, cost ascending."""
        return self.skylines[bisect_right(self.bounds, size) - 1]

    def with_costs(self, costs) -> "PolyDomIndex":
        """Sweep the same trained sets under new cost curves; models and scores are kept."""
        keep = ("trained", "expanded", "pruned", "reused", "explore_seconds", "build_seconds", "score_largest_rise",
                "score_largest_fall", "scores_moved")
        return type(self).from_trained(
            self.space, self._curves_for(costs), self.explored, domain=self.domain,
            candidate_alpha=self.params.get("candidate_alpha", 1.0), models=self.models,
            stats={k: v for k, v in self.stats.items() if k in keep}, params=self.params, std_error=self.std_error,
            chains=self.chains, cascades=self.cascades, measured=self.measured,
        )

    def with_scores(self, scores: str) -> "PolyDomIndex":
        """The same trained sets and models, ranked by ``scores``; nothing is trained again.

        Parameters
        ----------
        scores : {"measured", "monotone", "bounded"}
            ``"measured"``: the black box's scores; ``"monotone"``: their weighted isotonic fit on
            the subset order (:func:`polydom.lattice.monotone_scores`); ``"bounded"``: that fit
            held within one standard error of each set's measured score
            (:func:`polydom.index.ranking.bounded_scores`).

        Returns
        -------
        PolyDomIndex
            Swept again over the new ranking; ``measured_scores`` and ``std_error`` unchanged.
            Chains keep their order (it only decides which prefix is computed first).

        Examples
        --------
        >>> import polydom
        >>> scores = {"": 0.5, "a": 0.7, "b": 0.6, "ab": 0.65}
        >>> index = polydom.build({"a": [1.0], "b": [2.0]}, lambda s: scores["".join(sorted(s))])
        >>> sorted(index.lookup(1, 3.0).features), sorted(index.with_scores("monotone").lookup(1, 3.0).features)
        (['a'], ['a', 'b'])
        """
        ranked, measured, fit_stats = rank_scores(self.measured_scores, self.std_error, scores,
                                                  step_needs(self.space, self.params.get("requires")))
        keep = {k: v for k, v in self.stats.items() if k not in ("score_largest_rise", "score_largest_fall", "scores_moved")}
        return type(self).from_trained(
            self.space, self.costs, ranked, domain=self.domain, candidate_alpha=self.params.get("candidate_alpha", 1.0),
            models=self.models, stats={**keep, **fit_stats}, params={**self.params, "scores": scores},
            std_error=self.std_error, chains=self.chains, cascades=self.cascades, measured=measured,
        )

    def _summary_details(self) -> dict:
        return {
            "candidates": len(self.candidates),
            "ranges": len(self.bounds),
            "entries": sum(map(len, self.skylines)),
            "bounds": list(self.bounds),
        }

    def _prepare(self) -> None:
        """Build the serving snapshot: everything ``lookup`` and ``lookup_many`` read, in one attribute.

        Each reads ``self._snapshot`` once, so swapping in a new snapshot (``refresh``) is atomic
        for concurrent readers: each query sees the old index or the new, never a mix.
        """
        coef = self.candidate_coefficients.tolist()
        quadratic = self.candidate_coefficients.shape[1] <= 3
        if quadratic:
            rows = [tuple(row) + (0.0,) * (3 - len(row)) for row in coef]
        else:
            rows = [tuple(reversed(row)) for row in coef]  # Horner order, highest degree first
        names = [self.space.frozenset(m) for m in self.candidates]
        sky_rows = [[rows[c] for c in sky] for sky in self.skylines]
        # entries[r][j]: what to serve when entry j is the most accurate affordable one -- the
        # cheapest entry within tolerance of it, with its position when that is not j itself
        # (the lookup then evaluates its cost instead of j's).
        entries = []
        for sky in self.skylines:
            row = []
            for j, i in enumerate(self.served_positions(sky)):
                c = sky[i]
                row.append((names[c], self.candidate_accuracy[c], self.candidates[c], None if i == j else i,
                            self.std_error.get(self.candidates[c])))
            entries.append(row)
        lo = self.domain[0]
        # A finite upper limit makes one chained comparison reject NaN and inf as well.
        size_max = self.domain[1] if math.isfinite(self.domain[1]) else _FLOAT_MAX
        measured = self.measured_range()
        serve = _LookupState(
            lo, size_max, measured[0], measured[1], list(self.bounds), [len(s) for s in self.skylines], quadratic,
            sky_rows, entries, self.models,
        )
        self._snapshot = _Snapshot(serve, self._batch_arrays())

    def tolerance_between(self, i: int, j: int) -> float:
        """How far below candidate ``j``'s accuracy candidate ``i`` may score and still tie.

        ``params["tolerance"]`` when it is a number; otherwise (None, the default) one standard
        error of the difference of the two estimates, ``sqrt(se_i^2 + se_j^2)``, treating them
        as independent (0 for sets whose black box reported no standard error, which is the
        paper's rule: the most accurate affordable set wins).
        """
        fixed = self.params.get("tolerance")
        return self._error_between(i, j) if fixed is None else float(fixed)

    def _error_between(self, i: int, j: int) -> float:
        se_i = self.std_error.get(self.candidates[i], 0.0)
        se_j = self.std_error.get(self.candidates[j], 0.0)
        return math.sqrt(se_i * se_i + se_j * se_j)

    def served_positions(self, sky: Sequence[int], tolerance: float | None | str = "params") -> list[int]:
        """Per skyline position ``j``, the first position ``i <= j`` whose accuracy is within
        :meth:`tolerance_between` of ``j``'s: the cheapest set that ties with the best one
        affordable. Skylines are cost-ascending, so the first such position is the cheapest.
        ``tolerance``, when given, replaces ``params["tolerance"]`` (None: the standard-error rule)."""
        acc = self.candidate_accuracy
        fixed = self.params.get("tolerance") if tolerance == "params" else tolerance
        if fixed is not None:
            # One tolerance for every pair: the first position reaching acc[j] - tolerance is where the
            # running maximum first does, found by bisection (a pair-by-pair scan is quadratic).
            values = np.asarray([acc[c] for c in sky], dtype=np.float64)
            return np.searchsorted(np.maximum.accumulate(values), values - float(fixed), side="left").tolist()
        return [next(i for i, ci in enumerate(sky[: j + 1]) if acc[ci] >= acc[cj] - self._error_between(ci, cj))
                for j, cj in enumerate(sky)]

    def _batch_arrays(self):
        """Flat per-coefficient columns for :meth:`lookup_many`, each range padded to a power of
        two with NaN costs, so that a fixed number of vectorised halving steps finds the
        answer without per-query loop bounds."""
        R = len(self.skylines)
        longest = max((len(s) for s in self.skylines), default=1)
        P = 1 << max(0, (longest - 1).bit_length())
        W = self.candidate_coefficients.shape[1]
        cols = np.zeros((W, R * P))
        cols[0, :] = np.nan  # padding: NaN never compares <= a budget, not even an infinite one
        cand = np.zeros(R * P, dtype=np.int64)
        served = np.arange(R * P, dtype=np.int64)
        for r, sky in enumerate(self.skylines):
            at = r * P
            cols[:, at : at + len(sky)] = self.candidate_coefficients[sky].T
            cand[at : at + len(sky)] = sky
            served[at : at + len(sky)] = at + np.asarray(self.served_positions(sky), dtype=np.int64)
        return _BatchState(
            self.domain, np.asarray(self.bounds, dtype=float), P, [np.ascontiguousarray(c) for c in cols], cand, served,
            np.array(self.candidates, dtype=np.int64), np.array(self.candidate_accuracy, dtype=float),
            self.std_error, self.space, self.models,
        )

    # ------------------------------------------------------------------ serving

    def lookup(self, size: float, budget: float) -> Choice:
        """The most accurate feature set whose cost at ``size`` is at most ``budget``.

        ``O(log #ranges + log #skyline)``: one bisection over ``bounds``, one over the range's
        skyline with costs evaluated at ``size``. Among equally accurate sets the cheapest at
        ``size`` is returned; remaining ties go to fewer features, then lower feature indices.
        A cost within ``1e-12`` relative above the budget counts as fitting (:data:`BUDGET_SLACK`).

        Raises
        ------
        ValueError
            NaN, infinite or negative ``size`` or ``budget``; ``size`` outside the domain.
        TypeError
            Non-numeric arguments.
        """
        lo, size_max, measured_lo, measured_hi, bounds, lengths, quadratic, sky_rows, entries, models = self._snapshot[0]
        if type(size) is not float or type(budget) is not float:
            # numpy scalars and the like; ints as floats (one beyond float range reads as inf)
            size, budget = check_query(size, budget, self.domain)
        try:
            ok = lo <= size <= size_max and 0.0 <= budget  # NaN fails; an infinite budget is fine
        except OverflowError:
            ok = False
        if not ok:
            raise bad_query(size, budget, self.domain)
        if not measured_lo <= size <= measured_hi:
            self._outside_measured(size)
        limit = budget * BUDGET_SLACK
        r = bisect_right(bounds, size) - 1
        sky = sky_rows[r]
        left, right = 0, lengths[r]
        c = 0.0  # the first entry's cost
        if quadratic:
            # Degree <= 2 (the common case): one expression, no inner loop.
            # The last probe that fits is entry left - 1 (the first entry costs 0 and always
            # fits), so its cost is kept rather than evaluated again.
            while left < right:
                mid = (left + right) >> 1
                c0, c1, c2 = sky[mid]
                probe = c0 + size * (c1 + size * c2)
                if probe <= limit:
                    left = mid + 1
                    c = probe
                else:
                    right = mid
        else:
            while left < right:
                mid = (left + right) >> 1
                probe = 0.0  # poly.horner_scalar, inlined on the hot path
                for a in sky[mid]:
                    probe = probe * size + a
                if probe <= limit:
                    left = mid + 1
                    c = probe
                else:
                    right = mid
        features, accuracy, key, tied, std_error = entries[r][left - 1]
        if tied is not None:
            # A cheaper set within tolerance is served: its own cost at this size.
            row = sky[tied]
            c = row[0] + size * (row[1] + size * row[2]) if quadratic else horner_scalar(row, size)
        return _new_choice(Choice, (features, accuracy, c, key, models, std_error))

    def lookup_many(self, sizes, budgets) -> Batch:
        """Answer many queries at once, vectorised with numpy.

        Parameters
        ----------
        sizes, budgets : array-like of float
            Equal lengths (a scalar budget applies to every size).

        Returns
        -------
        Batch
            Columns ``keys``, ``accuracy``, ``cost``; ``batch[i] == lookup(sizes[i], budgets[i])``.

        Notes
        -----
        ``log2`` of the longest skyline vectorised steps over all queries, each a gather of the
        probed entries' coefficients and one Horner evaluation.
        """
        domain, bounds, P, cols, cand, served, cand_mask, cand_acc, std_errors, space, models = self._snapshot[1]
        n, c = check_queries(sizes, budgets, domain)
        c = c * BUDGET_SLACK
        base = (np.searchsorted(bounds, n, side="right") - 1) * P
        W = len(cols)
        pos = base.copy()
        step = P >> 1
        while step:
            probe = pos + step
            cost = cols[W - 1][probe]
            for k in range(W - 2, -1, -1):
                cost = cost * n + cols[k][probe]
            pos = np.where(cost <= c, probe, pos)
            step >>= 1
        pos = served[pos]
        cost = cols[W - 1][pos]
        for k in range(W - 2, -1, -1):
            cost = cost * n + cols[k][pos]
        ids = cand[pos]
        return Batch(cand_mask[ids], cand_acc[ids], cost, space, models, std_errors)

    # ------------------------------------------------------------------ state

    def to_state(self) -> "IndexState":
        """Everything needed to rebuild this index, as JSON-able metadata and flat arrays."""
        from .skylinestate import encode

        return encode(self)

    @classmethod
    def from_state(cls, state: "IndexState") -> "PolyDomIndex":
        """Inverse of :meth:`to_state`; ``state.models`` may be a lazy mapping."""
        from .skylinestate import decode

        return decode(cls, state)

    # ------------------------------------------------------------------ inspection

    def skyline_at(self, size: float) -> list[Choice]:
        """The whole skyline valid at ``size``, cost ascending."""
        masks, costs, accuracies = self.options_at(size)
        return [Choice(self.space.frozenset(m), acc, cost, m, self.models, self.std_error.get(m))
                for m, cost, acc in zip(masks, costs, accuracies)]

    def check_invariants(self) -> None:
        """Assert the module's invariants (costs checked at both ends and the middle of each range)."""
        assert self.bounds and self.bounds[0] == self.domain[0]
        assert all(a < b for a, b in zip(self.bounds, self.bounds[1:])), "bounds must ascend"
        assert len(self.bounds) == len(self.skylines)
        for r, sky in enumerate(self.skylines):
            accs = [self.candidate_accuracy[c] for c in sky]
            assert all(a < b for a, b in zip(accs, accs[1:])), f"range {r}: accuracy must strictly ascend"
            assert sky and not self.candidate_coefficients[sky[0]].any(), f"range {r}: first entry must cost 0"
        check_chains(self.chains, self.explored)
        assert self.ranked_prefixes == ranked_prefixes(self.chains, self.explored), "ranked prefixes are stale"

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} features={len(self.space)} candidates={len(self.candidates)} "
            f"ranges={len(self.bounds)} entries={sum(map(len, self.skylines))}>"
        )
