"""PolyDom's default classifier against cost-sensitive peers, on real images, held out.

Every method sees the same things: the same features (by default the demo's eight), the same
training and held-out pictures (each rendered at every side: by default the demo's five, 28 to
280 px), the same training feature matrix, and the same fitted feature costs -- the cost curves the PolyDom classifier measured on
this machine (``clf.cost_fits_``). A *cell* is (item size, budget); in each cell every method
picks what to compute from the fitted costs at that size, and is then judged on the measured
times: every held-out item's features are computed and timed once, serially, and a method's
measured cost on an item is the sum of the recorded times of the features it computed.

Methods
-------
``PolyDom``
    ``polydom.CostSensitiveClassifier`` fitted as the demo fits its primary backend (``--cv`` folds, the classifier's default,
    grouped folds, the demo's timing settings) with the library's defaults for learners, ``e``,
    ``tolerance`` and the cost curves (quantile, and calibration and anytime guards where the
    library has them; ``--cost-quantile`` overrides the quantile), backend ``polydom`` at alpha 1.
    Served through its index's anytime ``select`` on a clock that replays each held-out item's
    recorded feature times (:func:`polydom.demo.evaluation.serve_grid`, exactly as the demo and
    ``benchmarks/realdata.py`` do): it may fall back to a computed prefix or upgrade with time left.
``PolyDom, guards off`` (a diagnostic, not a peer)
    The same fitted classifier served with its anytime cost guards at 1, when it has guards:
    what the guards cost in accuracy and buy in violations.
``LightGBM CEGB``
    Cost-efficient gradient boosting (``lightgbm.LGBMClassifier`` with
    ``cegb_penalty_feature_coupled``): a column's coupled penalty is paid once, when the model
    first splits on it. Polydom's costs are per *feature* (a group of columns computed together),
    which LightGBM cannot express, so a choice has to be made. ``--cegb-spread full`` (default)
    puts the feature's whole cost on every one of its columns: the first column of a feature
    then costs exactly what computing the feature costs, which is the decision that matters for a
    budget; further columns of an already computed feature are over-charged (they are free in
    truth), which the low end of the trade-off sweep compensates. ``even`` divides the cost over
    the feature's columns, which makes touching a wide feature (``hog``: 144 columns) look 144
    times cheaper than it is. Costs are taken at each size and divided by the sum of all
    features' costs at that size (penalties are fractions of "everything", so one trade-off grid
    serves every size); ``cegb_tradeoff`` is swept on a log scale, plus one unpenalised model.
    All models (sizes x trade-offs) form one pool, trained on 75 % of the training pictures
    (whole pictures, all their renderings); per cell the model with the best accuracy on the
    other 25 % is chosen among those whose *used* features (nonzero split importance) fit the
    budget at that size by the fitted costs -- the majority class if none does. The chosen model
    is then refitted, same parameters, on all training pictures but only the columns of the
    features it used, so the refit can only use fewer features and still fits.
``Forward selection``
    Static sequential forward selection over *features* (groups of columns).
    ``sklearn.feature_selection.SequentialFeatureSelector`` selects single columns and has no
    notion of groups, so the selection is implemented here with ``cross_val_score``: start empty,
    add the feature whose addition gives the best grouped ``--cv``-fold CV accuracy, until all are in
    (cost-blind, as SFS is). Per cell: the longest prefix of that order whose fitted cost at the
    size fits the budget, with a model trained on the prefix.
``Exhaustive``
    Every subset of the features (2^8 = 256) cross-validated on the training pictures; per cell
    the subset with the best CV accuracy whose fitted cost at the size fits the budget (ties:
    the cheaper at that size, then fewer features).
``Forward selection, same guards`` and ``Exhaustive, same guards`` (diagnostics, not peers)
    The same CV fits, planned at PolyDom's risk: a set fits when its predicted cost plus the
    largest (guard - 1) x cost among its features fits the budget -- the rule by which PolyDom's
    anytime walk starts a set, with the fitted index's guards at the size (the guards PolyDom
    learns while serving are not replayed). They separate the choice of sets from the risk taken.

Forward selection and exhaustive use polydom's default learners (LDA with shrinkage, logistic
regression; :func:`polydom.classifier.blackbox.default_learners`): each subset gets the better of the two by
the mean CV accuracy on the same grouped folds (no race: both are always scored). Models for
the served subsets are refitted on all training pictures. The three peers serve statically:
they compute every feature of their choice, whatever the clock says.

Statistics: per cell, accuracy +- binomial standard error over held-out items (one item per
held-out picture in a cell), paired differences against PolyDom with a paired standard error
(same items), and the violation rate (measured extraction time above the budget).

    python -P benchmarks/peers.py --dataset digits
    python -P benchmarks/peers.py --dataset fashion-mnist --held-out-per-class 30
    python -P benchmarks/peers.py --dataset digits --realdata --busy 2

Settings: ``--sides 28,56,112`` (image sides, default the demo's), ``--budgets 0.0002,0.001``
(seconds, default the demo's), ``--features a,b,c`` (built-in feature names, default the demo's);
``--realdata`` sets all three to ``benchmarks/realdata.py``'s (its ``FEATURES`` and
``BUDGETS_MS``; its sides are only an argparse default there, so :data:`REALDATA_SIDES` repeats
them here). ``--busy N`` starts N CPU-bound processes (pure-Python spin loops, spawned) before
anything else and stops them after serving, so that fit, timing, held-out extraction and serving
all run on a loaded machine; the report records it with the load average at start and end.

Writes ``benchmarks/results/peers-<dataset>[-<setting>...].md`` (:func:`report_name`: a part per
non-default setting, e.g. ``peers-digits-realdata-busy2.md``), or ``--out``. Needs ``pip install
".[images,bench]"`` (LightGBM).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import multiprocessing
import os
import pathlib
import platform
import shlex
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

# Run as ``python -P``, a script's own folder is not on sys.path; ``lab`` is the package beside it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

HERE = pathlib.Path(__file__).resolve().parent
METHODS = ("PolyDom", "LightGBM CEGB", "Forward selection", "Exhaustive")
REFERENCE = "PolyDom"
PEERS = METHODS[1:]
#: Not a peer: PolyDom's own fit served with its anytime walk's cost guards set to 1, to show what
#: the guards (``calibrate_costs``/``cost_guard``) cost and buy. Left out of the "best peer" counts.
UNGUARDED = "PolyDom, guards off"
#: Not peers either: forward selection and exhaustive search budgeting with PolyDom's anytime cost
#: guards as fitted (:func:`guarded_cost`), so that they take about the risk of a late answer
#: PolyDom's walk takes (the walk also learns guards while serving; these plans keep the fit's).
#: They show whether PolyDom loses a cell by its choice of sets or by the risk it refuses.
#: Not peers: PolyDom's own fit ranked another way (``index_.with_scores``, nothing retrained),
#: served on the same grid -- the held-out evidence for the default ranking.
RANKINGS = {"monotone": "PolyDom, monotone ranking", "measured": "PolyDom, measured ranking"}
SAME_GUARDS = {"Forward selection": "Forward selection, same guards", "Exhaustive": "Exhaustive, same guards"}
#: cegb_tradeoff values: 0 (no penalty, every feature allowed) once, then a log grid that goes from
#: "barely penalised" to "only the cheapest single feature survives" on the demo's digits.
DEFAULT_TRADEOFFS = (0.0, 1.0, 10.0, 100.0, 1e3, 1e4, 1e5)
#: ``benchmarks/realdata.py``'s sides: there only the default of its ``--sides`` option, not a
#: module constant, so repeated here (its features and budgets are imported from it).
REALDATA_SIDES = (28, 56, 112)


# --------------------------------------------------------------------------- settings

def parse_list(text: str, kind, what: str) -> tuple:
    """A comma-separated option as a tuple of ``kind`` (``int``, ``float`` or ``str``), blanks
    dropped; ``ValueError`` naming the option on an entry that does not parse or on an empty list."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise ValueError(f"{what}: empty list")
    try:
        return tuple(kind(t) for t in items)
    except ValueError:
        raise ValueError(f"{what}: cannot read {text!r} as a comma-separated list of {kind.__name__}") from None


def realdata_settings() -> tuple:
    """``(sides, budgets in seconds, features)`` of ``benchmarks/realdata.py``: its ``FEATURES``
    and ``BUDGETS_MS`` module constants, and :data:`REALDATA_SIDES`."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_polydom_realdata", HERE / "realdata.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return REALDATA_SIDES, tuple(ms / 1e3 for ms in module.BUDGETS_MS), tuple(module.FEATURES)


def report_name(dataset: str, sides, budgets, features, busy: int, *, defaults, realdata=None,
                late_share=None) -> str:
    """``peers-<dataset>[-...].md``: one part per setting that differs from ``defaults`` (``(sides,
    budgets, features)``): ``realdata`` when all three are ``realdata``'s, else ``s28-56`` (sides),
    ``b0.2-1`` (budgets in ms), ``+gabor-glcm`` (features added to and dropped from the defaults;
    ``f`` and the list when only their order differs); then ``busyN``."""
    sides, budgets, features = tuple(sides), tuple(float(b) for b in budgets), tuple(features)
    d_sides, d_budgets, d_features = (tuple(v) for v in defaults)
    parts = [dataset]
    if realdata is not None and (sides, budgets, features) == tuple(tuple(v) for v in realdata):
        parts.append("realdata")
    else:
        if sides != d_sides:
            parts.append("s" + "-".join(map(str, sides)))
        if budgets != tuple(float(b) for b in d_budgets):
            parts.append("b" + "-".join(ms(b) for b in budgets))
        if features != d_features:
            added = "".join(f"+{f}" for f in features if f not in d_features)
            dropped = "".join(f"-{f}" for f in d_features if f not in features)
            parts.append(added + dropped or "f" + "-".join(features))
    if busy:
        parts.append(f"busy{busy}")
    if late_share is not None:
        parts.append(f"late{late_share * 100:g}")
    return "peers-" + "-".join(parts) + ".md"


# --------------------------------------------------------------------------- busy processes

def spin(parent: int) -> None:
    """A busy process: pure-Python integer arithmetic that never sleeps (one core, no BLAS
    threads), until it is terminated or its parent ``parent`` is gone (an orphan stops itself)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's; it stops us
    x = 1
    while os.getppid() == parent:
        for _ in range(200_000):  # ~10-20 ms between checks
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF


def elapsed_log(started: float):
    """A ``log(message)`` that prints each message to stderr after the seconds since ``started``
    (``time.perf_counter()``): the progress lines of the benchmarks."""

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.0f} s] {message}", file=sys.stderr, flush=True)

    return log


@contextlib.contextmanager
def busy_processes(n: int, log=None):
    """``n`` spawned :func:`spin` processes for the duration of the block, stopped on the way out
    whatever happens (exception, Ctrl-C): terminated, joined with a timeout, killed if need be."""
    context = multiprocessing.get_context("spawn")
    procs = []
    try:
        for i in range(n):
            proc = context.Process(target=spin, args=(os.getpid(),), name=f"peers-busy-{i}", daemon=True)
            proc.start()
            procs.append(proc)
        if procs and log:
            log(f"started {n} busy process{'es' if n > 1 else ''}: pids {', '.join(str(p.pid) for p in procs)}")
        yield procs
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)
        if procs and log:
            log(f"stopped {len(procs)} busy process{'es' if len(procs) > 1 else ''}")


def cpu_seconds(pid: int):
    """User + system CPU seconds process ``pid`` has used (Linux ``/proc``), or None."""
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


# --------------------------------------------------------------------------- data

def load_split(dataset: str, sides, train_per_class: int, held_out_per_class: int, seed: int):
    """Images, labels, training and held-out positions, and picture groups -- as the demo makes them
    (:func:`lab.job._run`): every picture rendered at every side, whole pictures split."""
    from lab.job import load_split as demo_split

    images, labels, train, test = demo_split(dataset, sides, train_per_class, held_out_per_class, seed)
    groups = np.arange(len(images)) // len(sides)
    return images, np.asarray(labels), train, test, groups


def item_sizes(images, positions) -> np.ndarray:
    return np.array([images[i].shape[0] * images[i].shape[1] for i in positions], dtype=np.int64)


@dataclass
class Costs:
    """Fitted extraction seconds of each feature and of the steps they share (greyscale), as
    functions of the item size (the classifier's cost curves: every method budgets with these).
    A set costs the union of its features and their steps, as PolyDom's index counts it."""

    names: tuple
    curves: dict
    requires: dict = field(default_factory=dict)

    def items(self, features) -> frozenset:
        """``features`` and the steps they require (:func:`polydom.steps.closure`)."""
        from polydom.steps import closure

        return closure(features, self.requires)

    def of(self, features, size: float) -> float:
        return float(sum(self.curves[f](float(size)) for f in self.items(features)))

    def table(self, size: float) -> dict:
        """Each item's cost at ``size``: the features', then the steps'."""
        steps = sorted(set(self.curves) - set(self.names))
        return {f: float(self.curves[f](float(size))) for f in (*self.names, *steps)}


def guarded_cost(costs: Costs, features, size: float, guards: dict) -> float:
    """The smallest budget at which PolyDom's anytime walk targets ``features`` from scratch: the
    walk takes a set only when the budget covers its predicted cost plus room for the last feature
    started to take its guard's share, the largest ``(guard - 1) * cost`` among them
    (``polydom.index.serving.anytime``); with that room each feature's own check passes whatever the order."""
    table = costs.table(size)
    if not features:
        return 0.0
    items = costs.items(features)
    return sum(table[f] for f in items) + max((guards[f] - 1.0) * table[f] for f in items)


def with_guards(fitted: Fitted, name: str, costs: Costs, guards_at, X, y, layout, learners, sides, budgets) -> Fitted:
    """``fitted`` (forward selection or exhaustive) planned again with :func:`guarded_cost` in place
    of the predicted cost: the same ranking of subsets (or the same prefix order), no new CV."""
    out = Fitted(seconds=fitted.seconds, models="the same CV fits + refits")
    models = {plan.used: plan.model for plan in fitted.plans.values()}
    if name == "Exhaustive":
        scored = fitted.scores
        choices = [(s, f"cv {scored[s][0]:.3f}", scored[s][1]) for s in scored]
    else:
        choices = [(p, f"prefix {k}", fitted.prefix_scores[k][1]) for k, p in enumerate(fitted.prefixes)]
    for side in sides:
        size, guards = side * side, guards_at(side * side)
        need = {s: guarded_cost(costs, s, size, guards) for s, _, _ in choices}
        if name == "Exhaustive":  # as fit_exhaustive: best CV first, then cheaper, then smaller
            ranked = sorted(choices, key=lambda c: (-fitted.scores[c[0]][0], costs.of(c[0], size), len(c[0])))
        else:  # the longest prefix that fits
            ranked = choices[::-1]
        for budget in budgets:
            chosen, note, learner = next(c for c in ranked if need[c[0]] <= budget)  # () needs 0
            if chosen not in models:
                models[chosen] = refit(X, y, layout, chosen, learner, learners)
            out.plans[(side, budget)] = Plan(chosen, chosen, models[chosen], note)
    return out


@dataclass
class Plan:
    """What a static method serves in one cell: the features it computes (``used``), the columns
    its model reads (``inputs``; a LightGBM refit reads all columns of the features it may use)
    and the model (``None``: the majority class)."""

    used: tuple
    inputs: tuple
    model: object = None
    note: str = ""


@dataclass
class Fitted:
    """A fitted peer: its per-cell plans, fit wall time, models trained, and what to show."""

    plans: dict = field(default_factory=dict)  # (side, budget) -> Plan
    seconds: float = 0.0
    models: str = ""
    details: list = field(default_factory=list)


def columns_of(layout: dict, features) -> np.ndarray:
    """Column positions of ``features`` in the feature-matrix layout, in layout order."""
    wanted = set(features)
    parts = [np.arange(sl.start, sl.stop) for name, sl in layout.items() if name in wanted]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


# --------------------------------------------------------------------------- PolyDom

def timing_sides(sides) -> tuple:
    """The demo's timing sides, plus any served side outside their range (so that no served size
    is extrapolated to); the demo's own sides and ``--realdata``'s lie inside, and get exactly
    the demo's."""
    from lab.settings import TIMING_SIDES

    low, high = min(TIMING_SIDES), max(TIMING_SIDES)
    return tuple(sorted(set(TIMING_SIDES) | {s for s in sides if not low <= s <= high}))


def fit_polydom(train_images, y, groups, features, sides, *, cv, cost_quantile, cache_dir, n_jobs, seed, guard=None):
    """The demo's primary backend: PolyDom alpha 1 with the library's defaults for everything the
    demo does not set (learners, e, tolerance, cost quantile and calibration); ``cost_quantile``
    and ``guard`` (the serving late-share tolerance as ``1 - guard``) override the library's only
    when given. Timed at :func:`timing_sides`."""
    import polydom

    extra = {} if cost_quantile is None else {"quantile": cost_quantile}
    serving = polydom.Serving() if guard is None else polydom.Serving(guard=guard)
    clf = polydom.CostSensitiveClassifier(
        features=list(features), cv=cv, timing=polydom.Timing(sides=timing_sides(sides), repeats=5, images=4, **extra),
        cache_dir=cache_dir, selection=polydom.Selection(backend="polydom", alpha=1.0), serving=serving,
        n_jobs=n_jobs, random_state=seed, progress=False,
    )
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the learner's convergence tally; the fit stats keep it
        clf.fit(train_images, y, groups=groups)
    seconds = time.perf_counter() - t0
    clf.planner_ = clf.server().planner  # served as a service serves: learning its guards
    return clf, seconds


def without_guards(clf):
    """``clf`` served with every anytime cost guard at 1 (same trained sets, models and curves),
    or None when its index has no guards to remove."""
    import copy

    from polydom.serving.planner import ServingPlanner

    index = clf.index_
    if not hasattr(index, "cost_guards") or all(g == 1.0 for g in index.cost_guards()):
        return None
    other = copy.copy(index)
    other.params = {**index.params, "cost_guard": None}  # cost_guards() then gives 1 per feature
    out = copy.copy(clf)
    out.index_ = other
    out.planner_ = ServingPlanner(other, clf.planner_.features, cascade=clf.planner_.cascade)
    return out


# --------------------------------------------------------------------------- subset scoring

def _score_subset(X, y, cols, learners, splits):
    """Mean CV accuracy of the better learner on columns ``cols`` (majority class when empty),
    the learner's name, and how many fits it took."""
    from sklearn.base import clone
    from sklearn.dummy import DummyClassifier
    from sklearn.model_selection import cross_val_score

    if len(cols) == 0:
        scores = cross_val_score(DummyClassifier(strategy="most_frequent"), X[:, :1], y, cv=splits)
        return float(scores.mean()), "majority", len(splits)
    best, best_name, fits = -1.0, None, 0
    Xs = X[:, cols]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # logistic regression may stop at max_iter on a fold
        for name, est in learners:
            score = float(cross_val_score(clone(est), Xs, y, cv=splits).mean())
            fits += len(splits)
            if score > best:
                best, best_name = score, name
    return best, best_name, fits


def score_subsets(X, y, layout, subsets, learners, splits, n_jobs):
    """``{subset: (cv accuracy, learner, fits)}`` for feature subsets (tuples in layout order)."""
    from joblib import Parallel, delayed

    results = Parallel(n_jobs=n_jobs)(
        delayed(_score_subset)(X, y, columns_of(layout, s), learners, splits) for s in subsets)
    return dict(zip(subsets, results))


def refit(X, y, layout, subset, learner_name, learners):
    """The named learner trained on all training rows of ``subset``'s columns (None: majority)."""
    from sklearn.base import clone

    if not subset:
        return None
    model = clone(dict(learners)[learner_name])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(X[:, columns_of(layout, subset)], y)


# --------------------------------------------------------------------------- exhaustive

def fit_exhaustive(X, y, layout, costs: Costs, learners, splits, sides, budgets, n_jobs) -> Fitted:
    """Every subset cross-validated; per cell the best-CV subset that fits at that size."""
    names = costs.names
    t0 = time.perf_counter()
    subsets = [tuple(n for n, keep in zip(names, mask) if keep) for mask in itertools.product((0, 1), repeat=len(names))]
    scored = score_subsets(X, y, layout, subsets, learners, splits, n_jobs)
    out = Fitted()
    models = {}
    for side in sides:
        size = side * side
        # Best CV accuracy first; among equals the cheaper at this size, then the smaller set.
        ranked = sorted(subsets, key=lambda s: (-scored[s][0], costs.of(s, size), len(s)))
        for budget in budgets:
            chosen = next(s for s in ranked if costs.of(s, size) <= budget)  # () costs 0: always fits
            if chosen not in models:
                models[chosen] = refit(X, y, layout, chosen, scored[chosen][1], learners)
            out.plans[(side, budget)] = Plan(chosen, chosen, models[chosen], f"cv {scored[chosen][0]:.3f}")
    out.seconds = time.perf_counter() - t0
    cv_fits = sum(v[2] for v in scored.values())
    out.models = f"{len(subsets)} subsets, {cv_fits} CV fits + {len([m for m in models.values() if m])} refits"
    top = sorted(subsets, key=lambda s: -scored[s][0])[:5]
    out.details = ["best CV subsets: " + "; ".join(f"{'+'.join(s)} {scored[s][0]:.3f} ({scored[s][1]})" for s in top)]
    out.scores = scored
    return out


# --------------------------------------------------------------------------- forward selection

def fit_forward(X, y, layout, costs: Costs, learners, splits, sides, budgets, n_jobs) -> Fitted:
    """Cost-blind forward selection over features; per cell the longest affordable prefix."""
    names = costs.names
    t0 = time.perf_counter()
    order, fits, prefix_scores = [], 0, [_score_subset(X, y, [], learners, splits)]
    fits += prefix_scores[0][2]
    while len(order) < len(names):
        rest = [n for n in names if n not in order]
        candidates = [tuple(n for n in names if n in order or n == c) for c in rest]
        scored = score_subsets(X, y, layout, candidates, learners, splits, n_jobs)
        fits += sum(v[2] for v in scored.values())
        # The best addition; ties go to the earlier feature in the layout (deterministic).
        best = max(range(len(rest)), key=lambda j: (scored[candidates[j]][0], -j))
        order.append(rest[best])
        prefix_scores.append(scored[candidates[best]])
    prefixes = [tuple(n for n in names if n in order[:k]) for k in range(len(order) + 1)]
    models = {}
    out = Fitted()
    for side in sides:
        size = side * side
        for budget in budgets:
            # Longest prefix that fits (costs only grow along a prefix, so scan from the end).
            k = max(k for k in range(len(prefixes)) if costs.of(prefixes[k], size) <= budget)
            if k not in models:
                models[k] = refit(X, y, layout, prefixes[k], prefix_scores[k][1], learners)
            out.plans[(side, budget)] = Plan(prefixes[k], prefixes[k], models[k], f"prefix {k}")
    out.seconds = time.perf_counter() - t0
    out.models = f"{fits} CV fits + {len([m for m in models.values() if m])} refits"
    out.details = ["order: " + " → ".join(f"{n} ({s[0]:.3f})" for n, s in zip(order, prefix_scores[1:]))]
    out.order, out.prefixes, out.prefix_scores = order, prefixes, prefix_scores
    return out


# --------------------------------------------------------------------------- LightGBM CEGB

def lgbm_params(tradeoff: float, penalties, seed: int) -> dict:
    """Small boosted trees for ~1,000 training rows; one thread (the machine is shared)."""
    params = dict(n_estimators=150, num_leaves=7, learning_rate=0.1, min_child_samples=5, colsample_bytree=1.0,
                  n_jobs=1, random_state=seed, verbose=-1)
    if tradeoff > 0:
        params.update(cegb_tradeoff=float(tradeoff), cegb_penalty_feature_coupled=[float(p) for p in penalties])
    return params


def _fit_lgbm(X, y, params, layout, columns=None):
    """A fitted LGBMClassifier on ``columns`` of X and the features it splits on."""
    import lightgbm

    cols = np.arange(X.shape[1]) if columns is None else columns
    model = lightgbm.LGBMClassifier(**params).fit(X[:, cols], y)
    importance = np.zeros(X.shape[1])
    importance[cols] = model.booster_.feature_importance(importance_type="split")
    used = tuple(name for name, sl in layout.items() if importance[sl].sum() > 0)
    return model, used


def column_penalties(costs: Costs, layout: dict, size: float, spread: str) -> np.ndarray:
    """Each column's coupled penalty at ``size``: its feature's fitted cost over the total cost of
    all features there, on every column (``full``) or divided over the columns (``even``)."""
    table = costs.table(size)
    total = sum(table.values())  # the shared steps included: a share of the whole extraction
    pen = np.zeros(max(sl.stop for sl in layout.values()))
    for name, sl in layout.items():
        share = table[name] / total
        pen[sl] = share if spread == "full" else share / (sl.stop - sl.start)
    return pen


def fit_lightgbm(X, y, layout, costs: Costs, sub, val, tradeoffs, spread, sides, budgets, n_jobs, seed) -> Fitted:
    """The CEGB pool (sizes x trade-offs), validation-chosen per cell, refitted on all training rows."""
    from joblib import Parallel, delayed

    t0 = time.perf_counter()
    jobs = []  # (side, tradeoff, params)
    for tradeoff in tradeoffs:
        for side in (sides if tradeoff > 0 else sides[:1]):  # unpenalised: one model serves every size
            pen = column_penalties(costs, layout, side * side, spread)
            jobs.append((side if tradeoff > 0 else None, tradeoff, lgbm_params(tradeoff, pen, seed)))
    fitted = Parallel(n_jobs=n_jobs)(delayed(_fit_lgbm)(X[sub], y[sub], p, layout) for _, _, p in jobs)
    pool = []
    for (side, tradeoff, params), (model, used) in zip(jobs, fitted):
        acc = float((model.predict(X[val]) == y[val]).mean())
        pool.append(dict(side=side, tradeoff=tradeoff, params=params, used=used, val=acc))
    out = Fitted()
    refits = {}
    for side in sides:
        size = side * side
        for budget in budgets:
            fits = [m for m in pool if costs.of(m["used"], size) <= budget]
            if not fits:
                out.plans[(side, budget)] = Plan((), (), None, "majority")
                continue
            best = max(fits, key=lambda m: (m["val"], -costs.of(m["used"], size)))
            if not best["used"]:
                # A model without a split predicts one class from its prior: serve the majority.
                out.plans[(side, budget)] = Plan((), (), None, f"no split (val {best['val']:.3f}): majority")
                continue
            key = id(best)
            if key not in refits:
                # Same parameters, all training rows, only the columns of the features it used:
                # the refit can drop features but not add any, so it still fits the budget.
                # Penalties follow the kept columns.
                cols = columns_of(layout, best["used"])
                params = dict(best["params"])
                if "cegb_penalty_feature_coupled" in params:
                    params["cegb_penalty_feature_coupled"] = list(np.asarray(params["cegb_penalty_feature_coupled"])[cols])
                refits[key] = _fit_lgbm(X, y, params, layout, cols)
            model, used = refits[key]
            where = "all sizes" if best["side"] is None else f"{best['side']} px"
            out.plans[(side, budget)] = Plan(used, best["used"], model,
                                             f"tradeoff {best['tradeoff']:g} at {where}, val {best['val']:.3f}")
    out.seconds = time.perf_counter() - t0
    out.models = f"{len(pool)} pool models + {len(refits)} refits"
    out.pool = pool
    return out


# --------------------------------------------------------------------------- serving and statistics

def serve_static(fitted: Fitted, X, seconds, layout, names, costs, sizes, y, sides, budgets, majority):
    """Correct and measured arrays of shape (n_budgets, n_items) for a static method: it computes
    every feature its plan uses and the steps they share (measured cost = their recorded times,
    ``seconds`` laid out in the order of ``names``) and predicts."""
    correct = np.zeros((len(budgets), len(y)), dtype=bool)
    measured = np.zeros((len(budgets), len(y)))
    position = {n: j for j, n in enumerate(names)}
    for side in sides:
        rows = np.flatnonzero(sizes == side * side)
        for b, budget in enumerate(budgets):
            plan = fitted.plans[(side, budget)]
            if plan.model is None:
                predicted = np.full(len(rows), majority)
            else:
                predicted = plan.model.predict(X[np.ix_(rows, columns_of(layout, plan.inputs))])
            correct[b, rows] = predicted == y[rows]
            measured[b, rows] = seconds[np.ix_(rows, [position[n] for n in costs.items(plan.used)])].sum(axis=1)
    return correct, measured


def cell_stats(correct, measured, sizes, sides, budgets) -> dict:
    """Per (side, budget): accuracy, binomial SE, violation rate, mean measured ms, correct vector."""
    out = {}
    for side in sides:
        rows = np.flatnonzero(sizes == side * side)
        for b, budget in enumerate(budgets):
            c = correct[b, rows].astype(float)
            p = float(c.mean())
            late = (measured[b, rows] > budget).astype(float)
            out[(side, budget)] = dict(acc=p, se=math.sqrt(p * (1 - p) / len(c)), viol=float(late.mean()),
                                       ms=1e3 * float(measured[b, rows].mean()), correct=c, late=late)
    return out


def on_time(results: dict) -> dict:
    """The same answers with every one that overran its budget counted wrong: what a caller with a
    hard deadline gets, since an answer after it is none."""
    out = {}
    for name, cells in results.items():
        out[name] = {}
        for cell, stats in cells.items():
            c = stats["correct"] * (1.0 - stats["late"])
            p = float(c.mean())
            out[name][cell] = dict(stats, correct=c, acc=p, se=math.sqrt(p * (1 - p) / len(c)))
    return out


def paired(a: dict, b: dict) -> tuple[float, float]:
    """Difference of accuracies a - b over the same items and its paired standard error."""
    d = a["correct"] - b["correct"]
    return float(d.mean()), (float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else 0.0)


def summarize(results: dict, sides, budgets) -> dict:
    """Per method means; per peer, cells > 2 paired SE ahead of / behind PolyDom; and PolyDom
    against the best peer of each cell."""
    cells = [(s, b) for s in sides for b in budgets]
    ref = results[REFERENCE]
    rows = {}
    for name, res in results.items():
        diffs = [paired(res[c], ref[c]) for c in cells]
        rows[name] = dict(mean=float(np.mean([res[c]["acc"] for c in cells])),
                          viol=float(np.mean([res[c]["viol"] for c in cells])),
                          worst=max(res[c]["viol"] for c in cells),
                          ahead=sum(d > 2 * se for d, se in diffs if d > 0),
                          behind=sum(-d > 2 * se for d, se in diffs if d < 0))
    out = dict(rows=rows, n_cells=len(cells), **versus_best(results, REFERENCE, cells))
    if UNGUARDED in results:
        out["unguarded"] = versus_best(results, UNGUARDED, cells)
    timely = on_time(results)
    out["on_time"] = versus_best(timely, REFERENCE, cells)
    guarded = [n for n in SAME_GUARDS.values() if n in results]
    if guarded:
        out["same_guards"] = versus_best(results, REFERENCE, cells, guarded)
        out["same_guards_on_time"] = versus_best(timely, REFERENCE, cells, guarded)
    for name, res in timely.items():
        rows[name]["on_time"] = float(np.mean([res[c]["acc"] for c in cells]))
    out["rankings"] = {name: versus_best(timely, name, cells) for name in RANKINGS.values() if name in results}
    return out


def versus_best(results: dict, name: str, cells, peers=PEERS) -> dict:
    """``name`` against the best of ``peers`` in each cell: cells within one paired SE of it (or
    above), cells more than 2 paired SE behind it, cells more than 2 paired SE ahead of every peer,
    and per cell ``(best peer, difference, paired SE)``."""
    within, behind, ahead, by_cell = 0, [], [], {}
    ref = results[name]
    for c in cells:
        best = max(peers, key=lambda p: results[p][c]["acc"])
        d, se = paired(ref[c], results[best][c])
        by_cell[c] = (best, d, se)
        within += d >= -se
        if -d > 2 * se:
            behind.append((c, best, d, se))
        if all(paired(ref[c], results[p][c])[0] > 2 * paired(ref[c], results[p][c])[1] for p in peers):
            ahead.append(c)
    return dict(within=within, behind=behind, ahead=ahead, cells=by_cell)


# --------------------------------------------------------------------------- report

def ms(seconds: float) -> str:
    return f"{1e3 * seconds:g}"


def write_report(path, ctx: dict) -> str:
    a, summary, results = ctx["args"], ctx["summary"], ctx["results"]
    sides, budgets, costs = ctx["sides"], ctx["budgets"], ctx["costs"]
    clf = ctx["clf"]
    fs = clf.fit_stats_
    L = [
        f"# PolyDom against peers, real images held out: {a.dataset}",
        "",
        f"`{ctx['command']}` — {ctx['wall']:.0f} s wall on this machine ({ctx['machine']}; "
        f"load average {ctx['load'][0]} at start, {ctx['load'][1]} at the end).",
        "",
        busy_note(ctx["busy"], ctx["load"]),
        "",
        f"{ctx['n_train']} training images ({a.train_per_class} pictures per class × sides "
        f"{', '.join(map(str, sides))}), {ctx['n_test']} held-out images ({ctx['n_test'] // len(sides)} pictures, one "
        f"item per picture in each cell); features {', '.join(costs.names)}; budgets "
        f"{', '.join(ms(b) for b in budgets)} ms. Every method budgets with PolyDom's fitted cost curves "
        f"(`cost_fits_`) and is judged on the held-out items' measured "
        f"times (held-out features {'read from the cache' if ctx['held_cached'] else 'computed and timed serially now'}"
        f"{busy_while(ctx['busy'])}). "
        "Methods and their settings: see the docstring of `benchmarks/peers.py`; in short, PolyDom serves "
        "anytime (`select` on a replayed clock), the peers compute their whole chosen set. LightGBM CEGB: "
        f"coupled penalty per column = the feature's cost share at the size, spread `{a.cegb_spread}`; "
        f"trade-offs {', '.join(f'{t:g}' for t in ctx['tradeoffs'])}. Forward selection is implemented over feature "
        "groups with `cross_val_score` (scikit-learn's `SequentialFeatureSelector` selects single columns, it "
        "cannot group them). Forward selection and exhaustive use polydom's two default learners, the better by "
        f"grouped {a.cv}-fold CV per subset.",
        "",
        f"PolyDom's parameters that bear on costs and selection, as fitted: {ctx['polydom_params']}. Anytime cost guards per "
        f"feature (a walk starts a feature only if time used + guard × predicted cost fits): {ctx['guards']}. The "
        f"row *{UNGUARDED}* serves the same fit with guards of 1; it is a diagnostic, not a peer, and is left out of "
        "the best-peer counts. So are the rows *" + "* and *".join(SAME_GUARDS.values()) + "*: the same selections "
        "budgeting with PolyDom's guards as fitted (a set fits if its predicted cost plus the largest (guard − 1) × "
        "cost among its features fits, the rule by which PolyDom's walk takes a set), so that they run about the "
        "risk of a late answer PolyDom runs; PolyDom's walk also learns guards while serving, these plans do not.",
        "",
        "## Summary over all cells",
        "",
        f"PolyDom is within one paired SE of (or above) the best peer of the cell in **{summary['within']} of "
        f"{summary['n_cells']}** cells; more than 2 paired SE behind the best peer in **{len(summary['behind'])}**; "
        f"more than 2 paired SE ahead of every peer in **{len(summary['ahead'])}**."
        + ("" if "unguarded" not in summary else
           f" The same counts for *{UNGUARDED}*: within one SE in {summary['unguarded']['within']}, more than 2 SE "
           f"behind in {len(summary['unguarded']['behind'])}, ahead of every peer in {len(summary['unguarded']['ahead'])}."),
        "",
        f"**On time** (an answer whose measured extraction overran its budget counts as wrong): PolyDom is "
        f"within one paired SE of (or above) the best peer in **{summary['on_time']['within']} of "
        f"{summary['n_cells']}** cells, more than 2 paired SE behind it in {len(summary['on_time']['behind'])}, "
        f"more than 2 paired SE ahead of every peer in {len(summary['on_time']['ahead'])}.",
        "",
        *[f"The same fit ranked otherwise, on time (*{name}*, a diagnostic): within one paired SE of the best peer in "
          f"{vs['within']} of {summary['n_cells']} cells, more than 2 paired SE behind in {len(vs['behind'])}; mean on "
          f"time {summary['rows'][name]['on_time']:.3f} against the default's {summary['rows'][REFERENCE]['on_time']:.3f}."
          for name, vs in summary.get("rankings", {}).items()],
        "",
    ]
    if "same_guards" in summary:
        g, t = summary["same_guards"], summary["same_guards_on_time"]
        L += ["**At the same risk** (against the better of *" + "* and *".join(SAME_GUARDS.values()) + "*): "
              f"PolyDom is within one paired SE of (or above) it in **{g['within']} of {summary['n_cells']}** cells, "
              f"more than 2 paired SE behind in {len(g['behind'])}, more than 2 paired SE ahead in {len(g['ahead'])}; "
              f"on time: within one SE in **{t['within']}**, more than 2 SE behind in {len(t['behind'])}, ahead in "
              f"{len(t['ahead'])}.", ""]
        L += [f"- {s}² px, {ms(b)} ms: {best} ahead by {-d:.3f} (paired SE {se:.3f}){' on time' if on else ''}"
              for on, found in ((False, g), (True, t)) for (s, b), best, d, se in found["behind"]]
        L += [""] if g["behind"] or t["behind"] else []
    L += [
        "| method | mean accuracy over cells | on time | mean violation rate | worst violation rate | cells > 2 SE "
        "ahead of PolyDom | cells > 2 SE behind PolyDom | fit wall (s) | models |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name in results:
        r = summary["rows"][name]
        L.append(f"| {name} | {r['mean']:.3f} | {r['on_time']:.3f} | {100 * r['viol']:.1f}% | {100 * r['worst']:.1f}% | "
                 f"{'—' if name == REFERENCE else r['ahead']} | {'—' if name == REFERENCE else r['behind']} | "
                 f"{ctx['fit_seconds'][name]:.0f} | {ctx['models'][name]} |")
    L += ["",
          f"PolyDom's fit wall time includes extracting the training features ({fs['extract_seconds']:.0f} s"
          f"{', from the cache' if fs.get('features_cached') else ''}), timing them ({fs['timing_seconds']:.0f} s) "
          f"and building ({fs['build_seconds']:.0f} s); the peers reuse that matrix and those cost curves, so their "
          f"times are training and selection only. Parallel workers: {a.n_jobs} for PolyDom's fit and for the peers' "
          "outer loops (subsets, pool models); LightGBM itself one thread."]
    if summary["behind"]:
        L += ["", "Cells where PolyDom is more than 2 paired SE behind the best peer:", ""]
        L += [f"- {s}² px, {ms(b)} ms: {best} ahead by {-d:.3f} (paired SE {se:.3f})"
              for (s, b), best, d, se in summary["behind"]]
    if summary["on_time"]["behind"]:
        L += ["", "On time, cells where PolyDom is more than 2 paired SE behind the best peer:", ""]
        L += [f"- {s}² px, {ms(b)} ms: {best} ahead by {-d:.3f} (paired SE {se:.3f})"
              for (s, b), best, d, se in summary["on_time"]["behind"]]
    shown = tuple(costs.table(1.0))  # the features, then the steps they share
    L += ["", "## Fitted feature costs (ms) at each size", "",
          "| side | " + " | ".join(shown) + " | all |", "|---:|" + "---:|" * (len(shown) + 1)]
    for side in sides:
        t = costs.table(side * side)
        L.append(f"| {side} | " + " | ".join(f"{1e3 * t[n]:.3f}" for n in shown) + f" | {1e3 * sum(t.values()):.2f} |")
    timely = on_time(results)
    n_side = len(budgets)
    L += ["", "## Per cell", "",
          "Accuracy ± binomial SE; Δ = peer − PolyDom ± paired SE; v = violation rate; ms = mean measured extraction. "
          "The second table of each size counts a late answer as wrong (*on time*), gives each method's late share "
          f"and compares PolyDom with the cell's best peer ({', '.join(PEERS)}) on time: *within* = within one "
          "paired SE of it or above, *behind* = more than 2 paired SE behind; rows in italics are diagnostics, not "
          "peers.",
          "",
          f"On time, PolyDom is within one paired SE of (or above) the best peer in **{summary['on_time']['within']} "
          f"of {summary['n_cells']}** cells and more than 2 paired SE behind it in "
          f"**{len(summary['on_time']['behind'])}** ({n_side} budgets × {len(sides)} size{'s' if len(sides) > 1 else ''}); as answered (late "
          f"answers counted as given), {summary['within']} and {len(summary['behind'])}.",
          ""]
    others = [n for n in results if n != REFERENCE]
    for side in sides:
        L += [f"### {side}×{side} pixels", "",
              "| budget (ms) | PolyDom | " + " | ".join(f"{p} | Δ" for p in others) + " |",
              "|---:|---:|" + "---:|---:|" * len(others)]
        for b in budgets:
            ref = results[REFERENCE][(side, b)]
            row = [f"{ref['acc']:.3f} ± {ref['se']:.3f} v{100 * ref['viol']:.0f}% {ref['ms']:.2f}ms"]
            for p in others:
                c = results[p][(side, b)]
                d, se = paired(c, ref)
                mark = " **" if abs(d) > 2 * se else ""
                row.append(f"{c['acc']:.3f} ± {c['se']:.3f} v{100 * c['viol']:.0f}% {c['ms']:.2f}ms")
                row.append(f"{mark.strip()}{d:+.3f} ± {se:.3f}{mark.strip()}")
            L.append(f"| {ms(b)} | " + " | ".join(row) + " |")
        L.append("")
        L += on_time_table(side, budgets, timely, summary["on_time"]["cells"])
    L += ["## What the peers chose", ""]
    for name in PEERS:
        f = ctx["fitted"][name]
        L += [f"**{name}.** " + " ".join(f.details)] if f.details else []
    L += ["", "LightGBM pool (validation accuracy on 25 % of the training pictures; features with nonzero split "
          "importance):", "", "| trade-off | penalties at | validation acc | used features |", "|---:|---:|---:|---|"]
    for m in ctx["fitted"]["LightGBM CEGB"].pool:
        L.append(f"| {m['tradeoff']:g} | {'—' if m['side'] is None else str(m['side']) + ' px'} | {m['val']:.3f} | "
                 f"{', '.join(m['used']) or '(none)'} |")
    L += ["", "Sets served per cell (PolyDom: the most frequent set its anytime walk ended on):", "",
          "| side | budget (ms) | " + " | ".join(METHODS) + " |", "|---:|---:|" + "---|" * len(METHODS)]
    for side in sides:
        for b in budgets:
            row = [ctx["polydom_sets"][(side, b)]]
            for p in PEERS:
                plan = ctx["fitted"][p].plans[(side, b)]
                row.append("+".join(plan.used) or "(majority)")
            L.append(f"| {side} | {ms(b)} | " + " | ".join(row) + " |")
    text = "\n".join(L) + "\n"
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(path).write_text(text)
    return text


def on_time_table(side, budgets, timely: dict, verdicts: dict) -> list:
    """Report lines for one size: per budget every method's on-time accuracy ± SE and late share,
    and PolyDom against the best peer on time (``verdicts``: :func:`versus_best`'s ``cells``), with
    the size's counts of cells within one paired SE and more than 2 paired SE behind."""
    names = list(timely)
    shown = [n if n in METHODS else f"*{n}*" for n in names]
    L = [f"On time at {side}×{side} pixels:", "",
         "| budget (ms) | " + " | ".join(shown) + " | best peer | PolyDom − best ± paired SE | |",
         "|---:|" + "---:|" * len(names) + "---|---:|---|"]
    within = behind = 0
    for b in budgets:
        best, d, se = verdicts[(side, b)]
        verdict = "behind" if -d > 2 * se else "within" if d >= -se else ""
        within, behind = within + (verdict == "within"), behind + (verdict == "behind")
        row = [f"{timely[n][(side, b)]['acc']:.3f} ± {timely[n][(side, b)]['se']:.3f} "
               f"late {100 * timely[n][(side, b)]['viol']:.0f}%" for n in names]
        L.append(f"| {ms(b)} | " + " | ".join(row) + f" | {best} | {d:+.3f} ± {se:.3f} | {verdict} |")
    L += ["", f"At {side}×{side}, on time: within one paired SE of the best peer in **{within} of {len(budgets)}** "
          f"cells, more than 2 paired SE behind in **{behind}**.", ""]
    return L


def busy_note(busy: dict, load) -> str:
    """The report's line on the load the run ran under."""
    if not busy["n"]:
        return (f"No busy processes (`--busy 0`): the benchmark ran on its own (load average {load[0]} before it "
                f"started, {load[1]} at the end of serving).")
    cpu = "" if busy["cpu"] is None else (
        f"; together they used {busy['cpu']:.0f} CPU-s in {busy['wall']:.0f} s of wall "
        f"({busy['cpu'] / max(busy['wall'], 1e-9):.2f} cores on average)")
    return (f"**{busy['n']} busy process{'es' if busy['n'] > 1 else ''} ran** (`--busy {busy['n']}`: pure-Python spin "
            "loops, spawned before the data were loaded and stopped after serving, so through the fits, the timing "
            f"pass, the held-out extraction and serving); {busy['alive']} of {busy['n']} still alive at the end"
            f"{cpu}. Load average {load[0]} before they started, {load[1]} at the end of serving, before they were "
            "stopped.")


def busy_while(busy: dict) -> str:
    n = busy["n"]
    return f", with {n} busy process{'es' if n > 1 else ''} running" if n else ""


def load_average() -> str:
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except (AttributeError, OSError):
        return "?"


# --------------------------------------------------------------------------- main

def main(argv=None) -> None:
    import polydom
    from lab.settings import DEFAULT_BUDGETS, DEFAULT_FEATURES, DEFAULT_SIDES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=("digits", "fashion-mnist"), default="digits")
    parser.add_argument("--train-per-class", type=int, default=20)
    parser.add_argument("--held-out-per-class", type=int, default=50)
    parser.add_argument("--sides", default=None,
                        help=f"comma-separated image sides in pixels (default: the demo's, {','.join(map(str, DEFAULT_SIDES))})")
    parser.add_argument("--budgets", default=None,
                        help=f"comma-separated budgets in seconds (default: the demo's, {','.join(f'{b:g}' for b in DEFAULT_BUDGETS)})")
    parser.add_argument("--features", default=None,
                        help=f"comma-separated built-in feature names (default: the demo's, {','.join(DEFAULT_FEATURES)})")
    parser.add_argument("--realdata", action="store_true",
                        help="sides, budgets and features exactly as benchmarks/realdata.py's (excludes the three options)")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="N CPU-bound processes running for the whole benchmark (default 0)")
    parser.add_argument("--cache", default=None, help="feature and expansion cache directory (default: a temporary one)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-jobs", type=int, default=2, help="parallel workers (PolyDom fit, peers' outer loops)")
    parser.add_argument("--cost-quantile", type=float, default=None,
                        help="cost-curve quantile (default: the library's, as the demo)")
    parser.add_argument("--cv", type=int, default=polydom.CostSensitiveClassifier().cv,
                        help="folds of the grouped cross-validation, PolyDom's (cv=) and the peers' alike "
                             "(default: the classifier's, %(default)s)")
    parser.add_argument("--guard", type=float, default=None,
                        help="PolyDom's serving guard, Serving(guard=...) (default: the library's)")
    parser.add_argument("--late-share", type=float, default=None, metavar="S",
                        help="serve PolyDom under a late-share budget S (e.g. 0.02), priced and adjusted over the "
                             "answers as a server does (polydom.index.serving.lateness); default none")
    parser.add_argument("--cegb-spread", choices=("full", "even"), default="full",
                        help="a feature's cost on each of its columns (full) or divided over them (even)")
    parser.add_argument("--tradeoffs", default=",".join(f"{t:g}" for t in DEFAULT_TRADEOFFS))
    parser.add_argument("--keep", default=None, metavar="DIR",
                        help="save PolyDom's fitted classifier and the held-out features, times, sizes and labels "
                             "here, to replay a cell later")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    defaults = (DEFAULT_SIDES, DEFAULT_BUDGETS, DEFAULT_FEATURES)
    sides, budgets, features, realdata = settings(parser, args, defaults)
    command = "python -P benchmarks/peers.py" + ("" if not sys.argv[1:] else " " + shlex.join(sys.argv[1:]))
    out = pathlib.Path(args.out or HERE / "results" / report_name(args.dataset, sides, budgets, features, args.busy,
                                                                   defaults=defaults, realdata=realdata,
                                                                   late_share=args.late_share))
    started = time.perf_counter()
    log = elapsed_log(started)

    from threadpoolctl import threadpool_limits

    load_start = load_average()  # before the busy processes start
    with busy_processes(args.busy, log) as busy:
        busy_started = time.perf_counter()
        # As the demo: parallelism is over items and sets; BLAS threads on top oversubscribe 2 cores.
        with threadpool_limits(1), tempfile.TemporaryDirectory(prefix="polydom-peers-") as tmp:
            cache = args.cache or tmp
            ctx = run(args, cache, log, features, sides, budgets)
        load_end = load_average()  # while they still run
        alive = sum(p.is_alive() for p in busy)
        used = [cpu_seconds(p.pid) for p in busy]
        busy_wall = time.perf_counter() - busy_started
    ctx.update(command=command, wall=time.perf_counter() - started, load=(load_start, load_end),
               busy=dict(n=args.busy, alive=alive, wall=busy_wall,
                         cpu=None if None in used else sum(used)),
               machine=f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    text = write_report(out, ctx)
    print(text)
    log(f"wrote {out}")


def settings(parser, args, defaults) -> tuple:
    """``(sides, budgets, features, realdata's (sides, budgets, features))`` from the options:
    sides and budgets sorted without repeats, features checked against the registry;
    ``parser.error`` on anything unusable."""
    from polydom.featurizers import MIN_SIDE, UnknownFeatureError, resolve_features

    realdata = realdata_settings()
    given = [f"--{o}" for o in ("sides", "budgets", "features") if getattr(args, o) is not None]
    if args.realdata and given:
        parser.error(f"--realdata sets sides, budgets and features: drop {', '.join(given)}")
    if args.busy < 0:
        parser.error("--busy: a number of processes, 0 or more")
    if args.realdata:
        sides, budgets, features = realdata
    else:
        try:
            sides = defaults[0] if args.sides is None else parse_list(args.sides, int, "--sides")
            budgets = defaults[1] if args.budgets is None else parse_list(args.budgets, float, "--budgets")
            features = defaults[2] if args.features is None else parse_list(args.features, str, "--features")
        except ValueError as error:
            parser.error(str(error))
    if min(sides) < MIN_SIDE:
        parser.error(f"--sides: the features need images of at least {MIN_SIDE} px a side")
    if not all(math.isfinite(b) and b > 0 for b in budgets):
        parser.error("--budgets: positive seconds")
    if len(set(features)) != len(features):
        parser.error("--features: a feature named twice")
    try:
        resolve_features(list(features))
    except UnknownFeatureError as error:
        parser.error(f"--features: {error}")
    return tuple(sorted(set(sides))), tuple(sorted(set(float(b) for b in budgets))), tuple(features), realdata


def keep(path, clf, held, sizes, y) -> None:
    """Save the fitted classifier (``clf.save``) and the held-out matrix, wall and CPU times, sizes
    and labels (``held-out.npz``) under ``path``, so that a cell can be served again later."""
    os.makedirs(path, exist_ok=True)
    clf.save(os.path.join(path, "classifier"))
    cpu = held.cpu_seconds if held.cpu_seconds is not None else np.full_like(held.seconds, np.nan)
    np.savez(os.path.join(path, "held-out.npz"), X=held.X, seconds=held.seconds, cpu_seconds=cpu, sizes=sizes, y=y)


def load_kept(path):
    """What :func:`keep` saved under ``path``: the classifier served as this benchmark serves it
    (``clf.server()``'s learning planner) and the held-out arrays (``cpu_seconds`` None where the
    run measured none)."""
    import polydom

    held = dict(np.load(os.path.join(path, "held-out.npz")))
    if np.isnan(held["cpu_seconds"]).all():
        held["cpu_seconds"] = None
    clf = polydom.CostSensitiveClassifier.load(os.path.join(path, "classifier"))
    clf.planner_ = clf.server().planner
    return clf, held


def run(args, cache, log, features, sides, budgets) -> dict:
    from polydom.classifier.blackbox import default_learners
    from polydom.demo.evaluation import serve_grid
    from polydom.index.serving.lateness import LatePrice
    from polydom.classifier.extraction import extract_features
    from polydom.featurizers import resolve_features
    from lab.job import split_pictures
    from sklearn.model_selection import StratifiedGroupKFold

    sides, budgets = tuple(sides), tuple(float(b) for b in budgets)
    tradeoffs = tuple(float(t) for t in args.tradeoffs.split(","))
    images, labels, train, test, groups = load_split(args.dataset, sides, args.train_per_class,
                                                     args.held_out_per_class, args.seed)
    train_images, test_images = [images[i] for i in train], [images[i] for i in test]
    y_train, y_test = labels[train], labels[test]
    g_train = groups[train]
    test_sizes = item_sizes(images, test)
    majority = np.bincount(y_train).argmax()
    log(f"{len(images)} images: {len(train)} for training, {len(test)} held out")

    fit_seconds, models, fitted = {}, {}, {}
    clf, fit_seconds[REFERENCE] = fit_polydom(
        train_images, y_train, g_train, features, sides, cv=args.cv, cost_quantile=args.cost_quantile,
        cache_dir=cache, n_jobs=args.n_jobs, seed=args.seed, guard=args.guard)
    fs = clf.fit_stats_
    models[REFERENCE] = (f"{fs['trained']} sets trained, {fs['reused']} from cache ({fs['expanded']} used)"
                         if not fs.get("partly_trained") else
                         f"{fs['trained']} sets screened, {fs['fully_trained']} trained fully, {fs['reused']} from cache")
    log(f"fitted PolyDom in {fit_seconds[REFERENCE]:.0f} s: {models[REFERENCE]}")
    costs = Costs(tuple(clf.feature_names_), dict(clf.cost_curves_), dict(clf.index_.params.get("requires") or {}))

    # The training matrix the classifier trained on: the same images and features hit its feature
    # cache, so this is the matrix itself, not a recomputation (checked against its layout).
    train_matrix = extract_features(train_images, resolve_features(features), cache_dir=os.path.join(cache, "features"),
                                    progress=False)
    assert train_matrix.cached, "the training matrix should come from the classifier's feature cache"
    layout = {n: sl for n, sl in train_matrix.columns.items() if n in costs.names}  # steps have no columns
    assert layout == dict(clf.feature_columns_)
    X = train_matrix.X
    learners = default_learners()
    splits = list(StratifiedGroupKFold(args.cv, shuffle=True, random_state=args.seed).split(X, y_train, g_train))

    # Validation split for LightGBM: whole training pictures (all their renderings), 75 / 25 per class.
    sub, val = split_pictures(y_train, len(sides), int(round(0.75 * args.train_per_class)), args.seed + 1)
    fitted["LightGBM CEGB"] = fit_lightgbm(X, y_train, layout, costs, sub, val, tradeoffs, args.cegb_spread,
                                           sides, budgets, args.n_jobs, args.seed)
    log(f"fitted LightGBM CEGB in {fitted['LightGBM CEGB'].seconds:.0f} s")
    fitted["Forward selection"] = fit_forward(X, y_train, layout, costs, learners, splits, sides, budgets, args.n_jobs)
    log(f"fitted forward selection in {fitted['Forward selection'].seconds:.0f} s")
    fitted["Exhaustive"] = fit_exhaustive(X, y_train, layout, costs, learners, splits, sides, budgets, args.n_jobs)
    log(f"fitted exhaustive in {fitted['Exhaustive'].seconds:.0f} s")
    for name in PEERS:
        fit_seconds[name], models[name] = fitted[name].seconds, fitted[name].models
    index = clf.index_

    def guards_at(size):
        return dict(zip(index.space.names, index.cost_guards(size)))

    for name, guarded in SAME_GUARDS.items():
        fitted[guarded] = with_guards(fitted[name], name, costs, guards_at, X, y_train, layout, learners, sides, budgets)
        fit_seconds[guarded], models[guarded] = fitted[guarded].seconds, fitted[guarded].models

    # Held-out features computed and timed once, serially, no worker of ours running (the busy
    # processes of --busy, if any, do run: that is their point).
    t0 = time.perf_counter()
    held = extract_features(test_images, resolve_features(features), n_jobs=None,
                            cache_dir=os.path.join(cache, "features"), progress=False)
    assert {n: sl for n, sl in held.columns.items() if n in costs.names} == layout
    log(f"held-out features in {time.perf_counter() - t0:.0f} s ({held.seconds.sum():.1f} s measured)")
    if args.keep:
        keep(args.keep, clf, held, test_sizes, y_test)
        log(f"kept the fit and the held-out measurements in {args.keep}")

    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sizes inside the timed range: no extrapolation warnings expected
        late_price = None if args.late_share is None else LatePrice(args.late_share)
        grid = serve_grid(clf, held.X, held.seconds, test_sizes, y_test, budgets,
                          cpu_seconds=held.cpu_seconds, late_price=late_price)
    results[REFERENCE] = cell_stats(grid.correct, grid.measured, test_sizes, sides, budgets)
    bare = without_guards(clf)
    polydom_sets = {}
    for side in sides:
        rows = np.flatnonzero(test_sizes == side * side)
        for b, budget in enumerate(budgets):
            keys, counts = np.unique(grid.keys[b, rows], return_counts=True)
            key = int(keys[counts.argmax()])
            names = clf.planner_.plan(key).names
            polydom_sets[(side, budget)] = ("+".join(names) or "(majority)") + (
                f" ({counts.max() / len(rows):.0%})" if len(keys) > 1 else "")
    for name in PEERS + tuple(SAME_GUARDS.values()):
        correct, measured = serve_static(fitted[name], held.X, held.seconds, layout, held.names, costs, test_sizes, y_test,
                                         sides, budgets, majority)
        results[name] = cell_stats(correct, measured, test_sizes, sides, budgets)
    if bare is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bare_grid = serve_grid(bare, held.X, held.seconds, test_sizes, y_test, budgets,
                                   cpu_seconds=held.cpu_seconds)
        results[UNGUARDED] = cell_stats(bare_grid.correct, bare_grid.measured, test_sizes, sides, budgets)
        fit_seconds[UNGUARDED], models[UNGUARDED] = 0.0, "PolyDom's fit"
    from lab.job import with_scores

    for scores, name in RANKINGS.items():
        if clf.index_.params.get("scores") == scores or not hasattr(clf.index_, "with_scores"):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ranked_grid = serve_grid(with_scores(clf, scores), held.X, held.seconds, test_sizes, y_test, budgets,
                                   cpu_seconds=held.cpu_seconds)
        results[name] = cell_stats(ranked_grid.correct, ranked_grid.measured, test_sizes, sides, budgets)
        fit_seconds[name], models[name] = 0.0, "PolyDom's fit, re-ranked"
    log("served every method")
    shown = ("timing__quantile", "timing__calibrate", "serving__guard", "selection__tolerance", "selection__scores",
             "selection__e", "learners", "cv")
    params = {**clf.get_params(deep=False),
              **{f"{group}__{k}": v for group, policy in zip(("selection", "timing", "cascade", "serving"),
                                                           clf._policies()) if policy is not None
                 for k, v in policy.get_params().items()}}
    guards = clf.index_.cost_guards() if hasattr(clf.index_, "cost_guards") else None
    return dict(args=args, summary=summarize(results, sides, budgets),
                polydom_params=", ".join(f"`{k}={params[k]!r}`" for k in shown if k in params),
                guards="none" if guards is None else ", ".join(f"{n} {g:.2f}" for n, g in zip(clf.index_.features, guards)), results=results, sides=sides, budgets=budgets,
                costs=costs, clf=clf, fit_seconds=fit_seconds, models=models, fitted=fitted, tradeoffs=tradeoffs,
                n_train=len(train), n_test=len(test), held_cached=held.cached, polydom_sets=polydom_sets)


if __name__ == "__main__":
    main()
