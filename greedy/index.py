"""The Greedy index: one feature sequence per λ, the prefix skyline at ``n0``, and anytime lookups.

Invariants (checked by :meth:`GreedyIndex.check_invariants`):

* ``sequences[i]`` is a permutation of all features (the order Greedy added them for
  ``lambdas[i]``); every prefix of every sequence has an accuracy in ``accuracy``.
* ``skyline`` covers the prefixes of all sequences: costs at ``n0`` strictly ascending,
  accuracies strictly ascending, the first entry costing 0 -- so every budget ``>= 0`` selects an
  entry.
* A lookup returns a prefix of one sequence whose predicted cost at the query size is at most the
  budget; ``{}`` (the prior model) when not even the sequence's first feature fits.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from polydom.index import Batch, Choice, CostCurve, IndexState, check_queries, check_query
from polydom.index.protocol import CostSensitiveIndex
from polydom.index.queries import BUDGET_SLACK
from polydom.index.state import check_std_errors, optional_column, read_optional_column
from polydom.lattice import FeatureSpace

from .anytime import SequenceWalk, best_computed, best_reachable, walk_predicted
from .skyline import SkylineEntry, prefix_masks, prefix_skyline

__all__ = ["GreedyIndex"]


class _SequenceState(NamedTuple):
    """What :meth:`GreedyIndex.lookup` and the measured walk read, one immutable record per
    version (unpacked in this field order on the hot path)."""

    domain: tuple
    sky_cost: list  # the λ skyline's costs at n0
    sky_seq: list  # and the sequence each entry walks
    seq_horner: list  # per sequence, its prefixes' cost polynomials
    seq_prefix: list  # per sequence, its prefixes (names, accuracy, mask, std error)
    seq_names: list
    models: object
    seq_served: list  # per sequence and prefix length, the prefix served


class _SequenceBatch(NamedTuple):
    """What :meth:`GreedyIndex.lookup_many` reads."""

    domain: tuple
    sky_cost: np.ndarray
    sky_seq: np.ndarray
    feature_horner: np.ndarray
    order: np.ndarray
    prefix_key: np.ndarray
    prefix_acc: np.ndarray
    space: object
    models: object
    std_error: object
    seq_served: np.ndarray


class _GreedySnapshot(NamedTuple):
    """A version's serving state, swapped in one assignment (:mod:`polydom.index.base`)."""

    measured: tuple
    lookup: _SequenceState
    batch: _SequenceBatch


class GreedyIndex(CostSensitiveIndex):
    """Greedy's two indexes (spec §9.3) and its anytime retrieval (spec §9.4).

    Built by :func:`polydom.build` with ``backend="greedy"``, ``"greedy-acc"`` or
    ``"greedy-cost"``; see the module docstring for the invariants.

    Parameters
    ----------
    space : FeatureSpace
    costs : sequence of CostCurve
        Per feature, in ``space`` order.
    domain : (lo, hi)
    n0 : float
        The expansion size: costs at ``n0`` ordered the sequences and order the skyline.
    lambdas : sequence of float
        The λ grid, in the order the sequences were built.
    sequences : sequence of sequence of int
        Per λ, the feature indices in the order they were added.
    accuracy : mapping of int to float
        Every set the expansion trained (bitmask -> accuracy); must cover every prefix.
    models : mapping of mask to model, optional
        Anything with ``.get(mask)``; stored indexes pass a lazy loader.
    stats, params : mapping, optional
    backend : {"greedy", "greedy-acc", "greedy-cost"}, default "greedy"
        The tag stored with the index.
    std_error : mapping of int to float, optional
        Standard errors of the trained sets' scores (bitmask -> error), for sets that have one;
        answers carry theirs as ``Choice.std_error``.

    Attributes
    ----------
    skyline : list of SkylineEntry
        The prefix skyline at ``n0``.
    step_costs : list of float
        ``c(f, n0)`` per feature.
    accuracy : dict of int to float
        Every trained set's accuracy (for inspection and audits).

    Examples
    --------
    >>> import polydom
    >>> costs = {"a": [1.0], "b": [0.0, 2.0]}
    >>> acc = {frozenset(): .5, frozenset("a"): .7, frozenset("b"): .8, frozenset("ab"): .9}
    >>> index = polydom.build(costs, acc.__getitem__, backend="greedy-acc", n0=1.0)
    >>> index.sequence(0.0)
    ('b', 'a')
    >>> sorted(index.lookup(size=3.0, budget=6.5).features)
    ['b']
    """

    backend = "greedy"
    option_kind = "fixed"

    def __init__(
        self,
        space: FeatureSpace,
        costs: Sequence[CostCurve],
        domain: tuple[float, float],
        *,
        n0: float,
        lambdas: Sequence[float],
        sequences: Sequence[Sequence[int]],
        accuracy: Mapping[int, float],
        models: Mapping[int, Any] | None = None,
        stats: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
        backend: str = "greedy",
        std_error: Mapping[int, float] | None = None,
    ):
        self.space = space
        self.costs = tuple(costs)
        self.domain = (float(domain[0]), float(domain[1]))
        self.n0 = float(n0)
        self.lambdas = tuple(float(lam) for lam in lambdas)
        self.sequences = tuple(tuple(int(f) for f in s) for s in sequences)
        self.accuracy = {int(m): float(a) for m, a in accuracy.items()}
        self.std_error = {int(m): float(v) for m, v in (std_error or {}).items()}
        self.models = models if models is not None else {}
        self.stats = dict(stats or {})
        self.params = dict(params or {})
        self.backend = backend
        if len(self.sequences) != len(self.lambdas):
            raise ValueError(f"{len(self.lambdas)} lambdas but {len(self.sequences)} sequences")
        for s in self.sequences:
            if sorted(s) != list(range(len(space))):
                raise ValueError(f"sequence {list(s)} is not a permutation of the {len(space)} features")
        self._prepare()

    def _prepare(self) -> None:
        """Plain lists for the lookup hot path, and dense arrays for ``lookup_many``."""
        self.step_costs = [c(self.n0) for c in self.costs]
        self.skyline: list[SkylineEntry] = prefix_skyline(self.sequences, self.accuracy, self.step_costs)
        distinct = list(dict.fromkeys(self.sequences))
        seq_id = [distinct.index(s) for s in self.sequences]
        horner = [tuple(reversed(c.coefficients)) for c in self.costs]
        names = self.space.names
        self._seq_names = [tuple(names[f] for f in s) for s in distinct]
        self._seq_horner = [tuple(horner[f] for f in s) for s in distinct]
        self._seq_prefix = [
            [(self.space.frozenset(m), self.accuracy[m], m, self.std_error.get(m)) for m in prefix_masks(s)]
            for s in distinct
        ]
        self._sky_cost = [e.cost for e in self.skyline]
        self._sky_seq = [seq_id[e.lam] for e in self.skyline]
        # A sequence holds a preparatory step just before the first feature that needs it
        # (polydom.steps): a walk that can afford the step but not that feature answers with the
        # prefix before the step, which costs less and scores the same.
        steps = {n for needed in (self.params.get("requires") or {}).values() for n in needed}
        self._seq_served = []
        for s_names in self._seq_names:
            served = list(range(len(s_names) + 1))
            for length in range(1, len(s_names) + 1):
                if s_names[length - 1] in steps:
                    served[length] = served[length - 1]
            self._seq_served.append(served)
        # lookup_many: the per-feature coefficients (padded, highest degree first) and, per
        # distinct sequence, its order and its prefixes' masks and accuracies.
        width = max(len(c.coefficients) for c in self.costs)
        self._feature_horner = np.array([c.padded(width)[::-1] for c in self.costs])
        self._order = np.array(distinct, dtype=np.int64).reshape(len(distinct), len(self.space))
        self._prefix_key = np.array([[m for _, _, m, _ in p] for p in self._seq_prefix], dtype=np.int64)
        self._prefix_acc = np.array([[a for _, a, _, _ in p] for p in self._seq_prefix], dtype=np.float64)
        self._sky_cost_arr = np.array(self._sky_cost, dtype=np.float64)
        self._sky_seq_arr = np.array(self._sky_seq, dtype=np.int64)
        # Each serving path reads this snapshot once, so a refresh that swaps it is atomic for
        # concurrent readers.
        serve = _SequenceState(self.domain, self._sky_cost, self._sky_seq, self._seq_horner, self._seq_prefix,
                               self._seq_names, self.models, self._seq_served)
        batch = _SequenceBatch(
            self.domain, self._sky_cost_arr, self._sky_seq_arr, self._feature_horner, self._order,
            self._prefix_key, self._prefix_acc, self.space, self.models, self.std_error,
            np.array(self._seq_served, dtype=np.int64),
        )
        self._snapshot = _GreedySnapshot(self.measured_range(), serve, batch)

    # ------------------------------------------------------------------ serving

    def lookup(self, size: float, budget: float) -> Choice:
        """Walk the sequence chosen by ``budget`` at ``n0`` while the features fit at ``size``.

        The skyline entry with the largest cost at ``n0`` that is ``<= budget`` names a λ; its
        sequence is walked from the first feature, adding each while the running predicted cost
        at ``size`` stays ``<= budget`` (both to 1e-12 relative, the protocol's slack), stopping
        at the first that does not fit. The answer is the last complete prefix -- it may hold more
        or fewer features than the skyline entry, since ``size`` need not be ``n0`` -- less a
        preparatory step it ends on (the step's feature did not fit: ``polydom.steps``).

        ``O(log #skyline + |F| * degree)``.

        Returns
        -------
        Choice
            The prefix, its accuracy, its predicted cost at ``size`` (``<= budget``, to the
            slack) and its model.

        Raises
        ------
        ValueError
            NaN, infinite or negative ``size`` or ``budget``; ``size`` outside the domain.
        TypeError
            Non-numeric arguments.
        """
        measured, (domain, sky_cost, sky_seq, seq_horner, seq_prefix, _, models, seq_served), _ = self._snapshot
        size, budget = check_query(size, budget, domain)
        if not measured[0] <= size <= measured[1]:
            self._outside_measured(size)
        limit = budget * BUDGET_SLACK  # the protocol's slack, as the measured walk's
        j = bisect_right(sky_cost, limit) - 1
        # j < 0 cannot happen for a valid budget (the first entry costs 0); kept as the spec's rule.
        sid = sky_seq[j if j > 0 else 0]
        length, spent = walk_predicted(seq_horner[sid], size, limit)
        served = seq_served[sid][length]
        if served < length:  # the walk ended on a step: the prefix before it, at its own cost
            length, spent = walk_predicted(seq_horner[sid][:served], size, limit)
        features, accuracy, key, std_error = seq_prefix[sid][length]
        return Choice(features, accuracy, spent, key, models, std_error)

    def options_at(self, size: float) -> tuple[list[int], list[float], list[float]]:
        """Every prefix of every sequence at ``size`` as ``(masks, costs, accuracies)``, cost ascending."""
        size = check_query(size, 0.0, self.domain)[0]
        masks = sorted({m for s in dict.fromkeys(self.sequences) for m in prefix_masks(s)})
        costs = [self.cost_of(self.space.frozenset(m), size) for m in masks]
        order = sorted(range(len(masks)), key=lambda i: (costs[i], -self.accuracy[masks[i]], masks[i]))
        return [masks[i] for i in order], [costs[i] for i in order], [self.accuracy[masks[i]] for i in order]

    @property
    def trained(self) -> Mapping[int, float]:
        """Every set Greedy's expansion trained (mask -> accuracy); also ``accuracy``."""
        return self.accuracy

    def with_costs(self, costs) -> "GreedyIndex":
        """The same sequences and models under new cost curves (the skyline at ``n0`` is re-derived)."""
        return type(self)(
            self.space, self._curves_for(costs), self.domain, n0=self.n0, lambdas=self.lambdas,
            sequences=self.sequences, accuracy=self.accuracy, models=self.models, stats=self.stats,
            params=self.params, backend=self.backend, std_error=self.std_error,
        )

    def _summary_details(self) -> dict:
        return {
            "n0": self.n0,
            "lambdas": list(self.lambdas),
            "sequences": [list(self.sequence(lam)) for lam in dict.fromkeys(self.lambdas)],
            "entries": len(self.skyline),
        }

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
        """Measured mode: compute a sequence prefix's features for real, one at a time.

        The target is the most accurate prefix, over every sequence, that a walk can reach at
        ``size``: a feature is started only if the time used plus its predicted cost (times its
        guard, :meth:`cost_guards`) fits ``budget`` (to 1e-12 relative, as :meth:`lookup`), so
        a prefix is reachable when every one of its steps passes that check on the predicted
        costs. The sequence :meth:`lookup` walks wins ties. With guards of 1 at ``n0`` that is
        the lookup's answer; elsewhere it is at least as accurate. Since a prefix reachable within
        a budget is reachable within any larger one, on a clock that matches the curves the served
        accuracy never falls as the budget grows -- even where the guards refuse the lookup's
        sequence at its first feature.

        If the clock refuses a step of the target (a feature ran slow), the walk continues with
        the most accurate prefix of any sequence that beats what is computed and is reachable
        in the time left, the computed features counting as free. It answers with the most
        accurate prefix whose features are all computed.

        Parameters
        ----------
        size, budget : float
            As for :meth:`lookup`; ``budget`` is in the clock's unit.
        compute : callable
            ``compute(feature_name)``, called at most once per feature; keep the values
            yourself (the return value is ignored).
        clock : callable, default time.perf_counter
            ``clock() -> float``, read once at the start and once after each feature.
        guarded : bool, default True
            Apply the cost guards.
        serving_guards : ServingGuards, optional
            With ``guarded``: guards learned from earlier walks' measured times
            (:mod:`polydom.index.serving.guards`), which this walk's times then join.
        cpu_clock : callable, optional
            The computing thread's CPU clock, read around each feature so that
            ``serving_guards`` learns its own cost apart from the machine's scheduling.
        late_price : LatePrice, optional
            Told whether the answer was late (Greedy's walk keeps its per-start cap by the
            guards; it does not weigh starts by a price).
        stop_when_confident, speculate : bool, default False
            The contract's options for backends with cascades and prefix chains; Greedy has
            neither, so ``stop_when_confident`` is refused and ``speculate`` changes nothing.

        Returns
        -------
        Choice
            The served prefix and its model. **Its ``cost`` is the measured elapsed time**, not
            a prediction. It is ``<= budget`` when no feature took longer than predicted; a
            feature that overran is still kept once computed, so ``cost`` may then exceed
            ``budget``, but no further feature is started that the clock says cannot fit.
        """
        ix = self._view()  # one version from start to end, whatever a refresh does meanwhile
        domain, sky_cost, sky_seq, seq_horner, seq_prefix, seq_names, models, _ = ix._snapshot[1]
        size, budget = check_query(size, budget, domain)
        if stop_when_confident:
            raise ValueError("this index has no cascade thresholds; train them (cascade=True) to stop when confident")
        if not callable(compute):
            raise TypeError(f"compute must be callable, got {compute!r}")
        # The lookup's slack, so that a clock matching the curves is not refused the last
        # feature of a set whose cost equals the budget by a rounding of the sum's order.
        limit = budget * BUDGET_SLACK
        j = bisect_right(sky_cost, limit) - 1
        first = sky_seq[j if j > 0 else 0]
        guards = ix.walk_guards(size, guarded, serving_guards)
        learn = serving_guards if guarded else None
        position = {name: i for i, name in enumerate(ix.space.names)}
        walks = [SequenceWalk(names, horners, prefixes, size, [position[n] for n in names], guards)
                 for names, horners, prefixes in zip(seq_names, seq_horner, seq_prefix)]
        start = clock()
        elapsed = 0.0
        computed: set[str] = set()
        served = (first, 0)
        floor = -1.0
        while True:
            target = best_reachable(walks, first, computed, elapsed, limit, floor)
            if target is None:
                break
            walk, length = walks[target[0]], target[1]
            for k in range(length):
                name = walk.names[k]
                if name in computed:
                    continue
                if elapsed + walk.cost[k] * walk.guards[k] > limit:
                    break  # slower than predicted: look for another target with what is left
                cpu_before = cpu_clock() if cpu_clock is not None and learn is not None else None
                compute(name)
                computed.add(name)
                before, elapsed = elapsed, clock() - start
                if learn is not None:
                    learn.observe(walk.features[k], size, walk.cost[k], elapsed - before,
                                  None if cpu_before is None else cpu_clock() - cpu_before)
            served = best_computed(walks, first, computed)
            floor = walks[served[0]].prefixes[served[1]][1]
            if all(name in computed for name in walk.names[:length]):
                break
        features, accuracy, key, std_error = walks[served[0]].prefixes[served[1]]
        if guarded and late_price is not None:
            late_price.observe(size, budget, elapsed > budget)
        return Choice(features, accuracy, float(elapsed), key, models, std_error)

    #: The paper's name for :meth:`select` on Greedy.
    anytime = select

    def lookup_many(self, sizes, budgets) -> Batch:
        """Answer many queries at once, vectorised with numpy.

        Parameters
        ----------
        sizes, budgets : array-like of float
            Equal lengths (a scalar budget applies to every size).

        Returns
        -------
        Batch
            ``batch[i] == lookup(sizes[i], budgets[i])``, bit for bit.
        """
        (domain, sky_cost_arr, sky_seq_arr, feature_horner, order, prefix_key, prefix_acc, space, models,
         std_errors, seq_served) = self._snapshot[2]
        n, c = check_queries(sizes, budgets, domain)
        c = c * BUDGET_SLACK  # the protocol's slack, as lookup's
        entry = np.maximum(np.searchsorted(sky_cost_arr, c, side="right") - 1, 0)
        sid = sky_seq_arr[entry]
        per_feature = np.zeros((len(n), len(space)))
        for column in feature_horner.T:
            per_feature = per_feature * n[:, None] + column[None, :]
        rows = np.arange(len(n))[:, None]
        # np.cumsum adds left to right, exactly as the scalar walk accumulates ``spent``.
        spent = np.cumsum(per_feature[rows, order[sid]], axis=1)
        over = spent > c[:, None]
        length = np.where(over.any(axis=1), over.argmax(axis=1), len(space))
        length = seq_served[sid, length]  # a walk that ended on a step answers before it (lookup)
        cost = np.where(length > 0, spent[np.arange(len(n)), np.maximum(length - 1, 0)], 0.0)
        return Batch(prefix_key[sid, length], prefix_acc[sid, length], cost, space, models, std_errors)

    # ------------------------------------------------------------------ state

    def to_state(self) -> IndexState:
        """Everything needed to rebuild this index, as JSON-able metadata and flat arrays.

        ``arrays``: ``lambdas`` (float64, ``inf`` kept), ``sequences`` (int64, ``len(lambdas)``
        rows of ``len(features)`` concatenated), ``trained_masks`` / ``trained_accuracy`` /
        ``trained_std_error`` (NaN for a set without one; absent in indexes stored before). The
        skyline is derived from these and ``n0``, so it is not stored.
        """
        meta = self.state_header()
        meta["n0"] = self.n0
        arrays = {
            "lambdas": np.array(self.lambdas, dtype=np.float64),
            "sequences": np.array([f for s in self.sequences for f in s], dtype=np.int64),
            "trained_masks": np.array(list(self.accuracy), dtype=np.int64),
            "trained_accuracy": np.array(list(self.accuracy.values()), dtype=np.float64),
            "trained_std_error": optional_column(self.std_error, self.accuracy),
        }
        return IndexState(meta, arrays, self.models)

    @classmethod
    def from_state(cls, state: IndexState) -> "GreedyIndex":
        """Inverse of :meth:`to_state`; ``state.models`` may be a lazy mapping."""
        meta, arrays = state.meta, state.arrays
        space = FeatureSpace(meta["features"])
        lo, hi = meta["domain"]
        flat = arrays["sequences"].tolist()
        width = len(space)
        sequences = [flat[i : i + width] for i in range(0, len(flat), width)]
        accuracy = dict(zip(arrays["trained_masks"].tolist(), arrays["trained_accuracy"].tolist()))
        std_error = {}
        if "trained_std_error" in arrays:
            check_std_errors(arrays, "trained_std_error", len(arrays["trained_masks"]))
            std_error = read_optional_column(arrays["trained_masks"].tolist(), arrays["trained_std_error"])
        return cls(
            space, [CostCurve(c) for c in meta["costs"]], (float(lo), float(hi)),
            n0=float(meta["n0"]), lambdas=arrays["lambdas"].tolist(), sequences=sequences, accuracy=accuracy,
            models=state.models, stats=meta.get("stats"), params=meta.get("params"), backend=meta["backend"],
            std_error=std_error,
        )

    # ------------------------------------------------------------------ inspection


    def sequence(self, lam: float) -> tuple[str, ...]:
        """The feature names of λ's sequence, in the order Greedy added them.

        Raises
        ------
        KeyError
            ``lam`` is not in the grid.
        """
        try:
            i = self.lambdas.index(float(lam))
        except ValueError:
            raise KeyError(f"λ = {lam!r} is not in the grid {list(self.lambdas)}") from None
        return tuple(self.space.names[f] for f in self.sequences[i])

    def check_invariants(self) -> None:
        """Assert the module's invariants."""
        width = len(self.space)
        for s in self.sequences:
            assert sorted(s) == list(range(width)), "each sequence must be a permutation of the features"
            assert all(m in self.accuracy for m in prefix_masks(s)), "every prefix must be trained"
        sky = self.skyline
        assert sky and sky[0].cost == 0.0, "the first skyline entry must cost 0 at n0"
        assert all(a.cost < b.cost for a, b in zip(sky, sky[1:])), "skyline costs must strictly ascend"
        assert all(a.accuracy < b.accuracy for a, b in zip(sky, sky[1:])), "skyline accuracies must strictly ascend"
        for e in sky:
            assert prefix_masks(self.sequences[e.lam])[e.position] == e.mask, "entry must be its (λ, position) prefix"

    def __repr__(self) -> str:
        return (
            f"<GreedyIndex backend={self.backend!r} features={len(self.space)} lambdas={len(self.lambdas)} "
            f"sequences={len(self._seq_names)} entries={len(self.skyline)} n0={self.n0}>"
        )

    def option_sets(self) -> tuple[list[int], list[float]]:
        """The sets :meth:`options_at` lists at every size (each prefix of each sequence), mask
        ascending, with their accuracies; the planners gather many sizes' options from these
        (:func:`polydom.index.serving.optiontable.options_many`)."""
        masks = sorted({m for s in dict.fromkeys(self.sequences) for m in prefix_masks(s)})
        return masks, [self.accuracy[m] for m in masks]


