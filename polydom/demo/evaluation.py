"""Serving a fitted classifier over many budgets, and what a served item costs apart from features.

:func:`serve_grid` answers every (held-out item, budget) pair without recomputing features: each
feature of each item was computed and timed once (:func:`polydom.classifier.extraction.extract_features`),
so the *measured* extraction time of a feature set on an item is the sum of its features' times
on that item. Each answer comes from the index's own ``select``, as at serving time, with a clock
that advances by each feature's recorded time when the feature is computed -- the decisions the
index would take if the features took those times again (PolyDom serves its lookup; Greedy
walks its sequence and stops when the next feature no longer fits).

:func:`serving_overhead` measures, per item, everything a request pays besides extraction: the
lookup, assembling the chosen features' vector and predicting with the set's model (lean path),
next to the same prediction through scikit-learn.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["GridResult", "MODES", "serve_grid", "serving_overhead", "lookup_latency"]

_FLOAT_MAX = sys.float_info.max


@dataclass
class GridResult:
    """Answers of one classifier to every (item, budget) pair.

    Attributes
    ----------
    budgets : ndarray of shape (n_budgets,)
    correct : ndarray of bool, shape (n_budgets, n_items)
    measured : ndarray of float, shape (n_budgets, n_items)
        Measured extraction seconds of the features used.
    predicted : ndarray of float, shape (n_budgets, n_items)
        Seconds the cost curves predicted for them.
    n_features : ndarray of int, shape (n_budgets, n_items)
    keys : ndarray of int, shape (n_budgets, n_items)
        The bitmask of the items each answer used (over ``clf.index_.features``: the features
        and the steps they share).
    """

    budgets: np.ndarray
    correct: np.ndarray
    measured: np.ndarray
    predicted: np.ndarray
    n_features: np.ndarray
    keys: np.ndarray | None = None

    def accuracy(self) -> np.ndarray:
        """Accuracy per budget."""
        return self.correct.mean(axis=1)

    def on_time(self) -> "GridResult":
        """These answers with every one whose measured time exceeded its budget counted wrong: the
        accuracy a caller with a hard deadline gets, since an answer after it is none."""
        late = self.measured > self.budgets[:, None]
        return dataclasses.replace(self, correct=self.correct & ~late)

    def violations(self) -> np.ndarray:
        """Share of items whose measured extraction time exceeded the budget, per budget."""
        return (self.measured > self.budgets[:, None]).mean(axis=1)


#: How a grid serves: the index's own ``select`` (anytime for PolyDom), the cascade on top of it,
#: or the plain rule -- look the set up from predicted costs, then compute all of it. The walks
#: try features past their guards as the classifier's ``speculate`` says.
MODES = ("select", "cascade", "plain")


def _replayed_select(index, positions: dict, seconds: np.ndarray, size: float, budget: float,
                     row: np.ndarray | None = None, columns: dict | None = None, mode: str = "select",
                     serving_guards=None, speculate: bool = False, cpu_seconds: np.ndarray | None = None,
                     late_price=None):
    """Serve one item with a clock replaying its recorded feature times (``seconds``); ``compute``
    hands back the item's recorded feature vector (from ``row``) for models that read it.
    ``serving_guards`` learns from the replayed times as serving learns from real ones; with
    ``speculate`` a feature tried past its guard that would miss the deadline is abandoned there,
    the clock standing at the deadline. With ``cpu_seconds`` (the same calls' CPU times) a replayed
    CPU clock advances with them, as serving's thread clock does."""
    from polydom.index.protocol import CostSensitiveIndex
    from polydom.index.serving.anytime import FeatureTimeout

    now = [0.0]
    cpu_now = [0.0]

    def compute(name, deadline=None):
        took = seconds[positions[name]]
        if deadline is not None and now[0] + took > deadline:
            now[0] = deadline  # abandoned at the deadline, as serving's worker thread is
            raise FeatureTimeout(name)
        now[0] += took
        if cpu_seconds is not None:
            cpu_now[0] += cpu_seconds[positions[name]]
        return None if row is None else row[columns[name]] if name in columns else row[:0]  # a step: no columns

    clock = lambda: now[0]  # noqa: E731 - a replayed clock
    if mode == "plain":
        return CostSensitiveIndex.select(index, size, min(budget, _FLOAT_MAX), compute, clock)
    options = {"stop_when_confident": True} if mode == "cascade" else {}
    if speculate and index.chains:
        options["speculate"] = True
    if cpu_seconds is not None and serving_guards is not None:
        options["cpu_clock"] = lambda: cpu_now[0]
    if late_price is not None:
        options["late_price"] = late_price
    return index.select(size, min(budget, _FLOAT_MAX), compute, clock, serving_guards=serving_guards, **options)


def serve_grid(clf, X: np.ndarray, seconds: np.ndarray, sizes: Sequence[int], y, budgets: Sequence[float],
               mode: str = "select", cpu_seconds: np.ndarray | None = None,
               decode_seconds: np.ndarray | None = None, late_price=None) -> GridResult:
    """Serve every item of a precomputed feature matrix at every budget.

    Parameters
    ----------
    clf : fitted CostSensitiveClassifier
    X : ndarray of shape (n_items, n_columns)
        All features of the held-out items, in ``clf.feature_columns_`` layout.
    seconds : ndarray of shape (n_items, n_items_of_the_index)
        Each item's measured time on each image, in ``clf.index_.features`` order (as
        :func:`~polydom.classifier.extraction.extract_features` lays out the same features).
    sizes : sequence of int
        Item sizes.
    y : array_like
        True labels.
    budgets : sequence of float
    mode : {"select", "cascade", "plain"}, default "select"
        See :data:`MODES`.
    cpu_seconds : ndarray of shape (n_items, n_features), optional
        The same calls' CPU times, replayed to the serving guards as serving's thread clock
        would report them.
    decode_seconds : ndarray of shape (n_items,), optional
        Each item came encoded and took this long to decode. Replayed as serving decodes
        (:meth:`~polydom.serving.planner.ServingPlanner.serve`): only where the planner's
        guarded decode curve fits the budget, the walk getting what the decode leaves, the
        decode counted in the measured time, and given up (nothing computed) where it runs
        past the point at which no feature could follow it; otherwise nothing is computed.
    late_price : LatePrice, optional
        A late-share budget (:class:`~polydom.index.serving.lateness.LatePrice`), priced and adjusted
        over the replayed answers as a server's is over real ones.

    Returns
    -------
    GridResult
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    planner = clf.planner_
    policies = getattr(clf, "_policies", None)
    speculate = bool(policies()[3].speculate if policies is not None else getattr(clf, "speculate", False))
    sizes = np.asarray(sizes, dtype=np.float64)
    y = np.asarray(y)
    budgets = np.asarray(budgets, dtype=np.float64)
    n, k = len(sizes), len(budgets)
    correct = np.zeros((k, n), dtype=bool)
    measured = np.zeros((k, n))
    predicted = np.zeros((k, n))
    n_features = np.zeros((k, n), dtype=np.int64)
    served = np.zeros((k, n), dtype=np.int64)
    columns = clf.feature_columns_
    # The index's items in its order (the steps its features share, then the features): the
    # order in which extract_features lays out the seconds of the same features.
    positions = {name: j for j, name in enumerate(planner.index.features)}
    from polydom.costs.decode import decode_fits

    decode = getattr(planner, "decode", None)
    # A server's late-share budget, unless the caller gives one of its own.
    prices = late_price if late_price is not None else getattr(planner, "late_price", None)
    for b, budget in enumerate(budgets):
        keys = np.zeros(n, dtype=np.int64)
        for i in range(n):
            spent, left = 0.0, float(budget)
            if decode_seconds is not None:
                if decode_fits(decode, float(sizes[i]), left, planner.index):
                    # Given up where no feature could follow it, as serving gives it up.
                    cutoff = max(left - planner.cheapest_feature(planner.index, float(sizes[i])), 0.0)
                    took = float(decode_seconds[i])
                    spent, left = (took, max(left - took, 0.0)) if took <= cutoff else (cutoff, 0.0)
                else:
                    left = 0.0
            choice = _replayed_select(planner.index, positions, seconds[i], float(sizes[i]), left,
                                      X[i], columns, mode, planner.serving_guards, speculate,
                                      None if cpu_seconds is None else cpu_seconds[i], prices)
            keys[i], measured[b, i] = choice.key, choice.cost + spent
        served[b] = keys
        for key in np.unique(keys):
            rows = np.flatnonzero(keys == key)
            plan = planner.plan(int(key))
            cols = [np.arange(columns[f].start, columns[f].stop) for f in plan.names]
            features = X[np.ix_(rows, np.concatenate(cols))] if cols else np.zeros((len(rows), 0))
            correct[b, rows] = plan.predictor.predict(features) == y[rows]
            predicted[b, rows] = [planner.index.cost_of(plan.names, s) for s in sizes[rows]]
            n_features[b, rows] = len(plan.names)
    return GridResult(budgets, correct, measured, predicted, n_features, served)


def lookup_latency(index, sizes: Sequence[float], budgets: Sequence[float], repeats: int = 5) -> dict:
    """Median seconds of one ``index.lookup`` and of ``lookup_many`` per query.

    Each of the ``len(sizes)`` queries is looked up once per repeat; the best of the repeats'
    per-query averages is reported (the usual ``timeit`` convention).
    """
    sizes = [float(s) for s in sizes]
    budgets = [min(float(b), _FLOAT_MAX) for b in budgets]
    lookup = index.lookup
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        for s, b in zip(sizes, budgets):
            lookup(s, b)
        best = min(best, (time.perf_counter() - start) / len(sizes))
    batch_best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        index.lookup_many(sizes, budgets)
        batch_best = min(batch_best, (time.perf_counter() - start) / len(sizes))
    return {"lookup": best, "lookup_many_per_query": batch_best}


def serving_overhead(clf, X: np.ndarray, sizes: Sequence[int], budgets: Sequence[float], repeats: int = 3) -> dict:
    """Per-item seconds of everything but feature extraction, on the PolyDom serving path.

    For each (item, budget), back to back: the lookup, the plan (cached per set), concatenating
    the item's chosen feature vectors (precomputed) and the lean prediction; then, in a pass of
    its own, the same predictions through the model's scikit-learn ``predict``, checked to be
    identical. Back to back, the hot path stays in the CPU caches; between real extractions it
    costs somewhat more (see the real serving pass of the demo).

    Returns
    -------
    dict
        ``total`` (lookup + assemble + lean predict), ``lookup``, ``assemble``, ``lean_predict``,
        ``sklearn_predict`` (medians in seconds), ``lean_share`` (fraction of sets served by the
        lean path), ``identical`` (bool).
    """
    planner = clf.planner_
    index, plan_of = planner.index, planner.plan
    columns = clf.feature_columns_
    pairs = [(i, b) for b in budgets for i in range(len(sizes))]
    # Warm the per-set plans (model load and lean compile happen once per set, not per item).
    for i, b in pairs:
        plan_of(index.lookup(float(sizes[i]), min(float(b), _FLOAT_MAX)).key)
    vectors = [{f: X[i, columns[f]].copy() for f in clf.feature_names_} for i in range(len(sizes))]
    clock = time.perf_counter
    t_lookup, t_assemble, t_predict, t_total, t_sklearn = [], [], [], [], []
    served = []
    for _ in range(repeats):
        for i, b in pairs:
            size, budget = float(sizes[i]), min(float(b), _FLOAT_MAX)
            t0 = clock()
            choice = index.lookup(size, budget)
            plan = plan_of(choice.key)
            t1 = clock()
            v = vectors[i]
            x = np.concatenate([v[n] for n in plan.names]) if plan.names else np.zeros(0)
            t2 = clock()
            label = plan.predictor.predict_one(x)
            t3 = clock()
            t_lookup.append(t1 - t0)
            t_assemble.append(t2 - t1)
            t_predict.append(t3 - t2)
            t_total.append(t3 - t0)
            served.append((choice.key, plan, x, label))
    # scikit-learn's predict in a pass of its own: interleaved, its ~1 ms of Python would evict
    # the lean path's data from the CPU caches and inflate what is measured above.
    identical, lean_sets, sets = True, set(), set()
    for key, plan, x, label in served[: len(pairs)]:
        t0 = clock()
        ref = plan.model.predict(x.reshape(1, -1))[0]
        t_sklearn.append(clock() - t0)
        identical &= bool(ref == label)
        sets.add(key)
        if plan.predictor.lean:
            lean_sets.add(key)
    med = lambda v: float(np.median(v))  # noqa: E731
    return {
        "total": med(t_total), "lookup": med(t_lookup), "assemble": med(t_assemble),
        "lean_predict": med(t_predict), "sklearn_predict": med(t_sklearn),
        "total_p95": float(np.percentile(t_total, 95)),
        "lean_share": len(lean_sets) / max(1, len(sets)), "identical": identical, "samples": len(t_total),
    }
