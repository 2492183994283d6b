"""Serving a fitted index: per image, choose a feature set, compute only its features, predict.

:class:`ServingPlanner` holds an index and the feature objects it names. For each trained set
it prepares a :class:`SetPlan` once -- the set's features in column order, its model and a lean
predictor (:func:`polydom.classifier.lean.lean_model`) -- and serves images
through the index's :meth:`~polydom.index.protocol.CostSensitiveIndex.select`, which decides
on the real clock which features to compute and which set to serve. Nothing here depends on
which backend the index is.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

import numpy as np

from polydom.classifier.inputs import check_errors
from polydom.classifier.lean import lean_model
from polydom.costs.decode import decode_fits
from polydom.errors import PolydomError
from polydom.featurizers import Feature
from polydom.featurizers.sources import DecodeDeadline, as_array, decode_image, header_shape, is_encoded
from polydom.index.base import StoredIndex
from polydom.index.serving.anytime import FeatureTimeout, prepared
from polydom.index.serving.guards import ServingGuards
from polydom.index.storage.errors import ModelLoadError
from polydom.index.serving.lateness import LatePrice

from .answers import Answers

__all__ = ["Explanation", "SetPlan", "Served", "ServingPlanner", "Server"]

_FLOAT_MAX = sys.float_info.max
_EMPTY = np.zeros(0)


@dataclass(frozen=True)
class Explanation:
    """What the classifier did for one item.

    Attributes
    ----------
    item : int
        Position of the image in the input.
    size : int
        Its item size (pixel count).
    budget : float
        Seconds allowed for feature extraction (``inf``: no limit).
    features : tuple of str
        The features of the set served, in the index's feature order (a step they share, such
        as ``grey``, is listed in ``steps`` only).
    estimated_accuracy : float
        The score the index ranks the model's feature set by (its cross-validated accuracy, or
        the monotone fit of those; see ``Choice.accuracy``).
    predicted_cost : float
        Seconds the fitted cost curves predict for those features and their steps at ``size``.
    measured_cost : float
        Seconds the extraction took.
    label : object
        The prediction.
    steps : tuple
        What serving did, in order: ``("compute", feature)``, ``("upgrade", features)`` (time
        was left, so a more accurate set became the target), ``("stop", feature)`` (that feature
        no longer fitted the time left), ``("confident", features)`` (the cascade stopped),
        ``("explore", feature)`` (started past the fit's guard to learn its cost here),
        ``("speculate", feature)`` (started although its guarded cost did not fit) and
        ``("abandon", feature)`` (it missed the deadline and was left to finish unused).
    std_error : float or None
        The standard error of the set's measured cross-validated score (``Choice.std_error``);
        None when the index keeps none.
    computed : tuple of str
        Every feature the walk computed, in the order it computed them: those of ``features``
        and any the walk computed but could not serve (it ran slow, the walk fell back to a
        set without it). A step they share is listed in ``steps`` only.
    """

    item: int
    size: int
    budget: float
    features: tuple
    estimated_accuracy: float
    predicted_cost: float
    measured_cost: float
    label: Any
    steps: tuple = ()
    std_error: float | None = None
    computed: tuple = ()

    @property
    def stopped_because(self) -> str:
        """Why serving ended: ``"complete"``, ``"budget"`` (the next feature did not fit, or a
        feature tried past its guard missed the deadline) or ``"confident"``."""
        last = self.steps[-1][0] if self.steps else "compute"
        return {"stop": "budget", "abandon": "budget", "confident": "confident"}.get(last, "complete")

    @property
    def within_budget(self) -> bool:
        """Whether the measured extraction time stayed within the budget."""
        return self.measured_cost <= self.budget


class SetPlan:
    """How to serve one trained feature set.

    Attributes
    ----------
    key : int
        The set's mask in the index.
    features : tuple of Feature
        Its features in the index's (column) order.
    names : tuple of str
    model : fitted classifier
    predictor : LeanConstant, LeanLinear or SklearnPredictor
        ``predict_one(x)`` on the concatenated feature vectors; identical labels to ``model``.
    """

    __slots__ = ("key", "features", "names", "model", "predictor")

    def __init__(self, key: int, features: tuple, model):
        self.key = key
        self.features = features
        self.names = tuple(f.name for f in features)
        self.model = model
        self.predictor = lean_model(model)

    def __repr__(self) -> str:
        return f"<SetPlan {list(self.names)} {self.predictor!r}>"


@dataclass(frozen=True)
class Served:
    """One image served: the index's choice, the set's plan, the feature vector and the timings.

    ``measured`` is the extraction time on the real clock; ``choice.accuracy`` the score the index
    ranks the set by (``index.measured_scores`` holds the black box's own).
    """

    choice: Any
    plan: SetPlan
    x: np.ndarray
    measured: float
    size: int
    steps: tuple = ()
    index: Any = None  # the version served (the one the choice and the plan come from)
    computed: tuple = ()  # every feature the walk computed, in order (served or not)


class ServingPlanner:
    """Serve images from ``index``, preparing one :class:`SetPlan` per set on first use.

    Invariant: a cached plan is served only for the model mapping it was prepared from, with
    its features in that version's column order. A classifier builds its planner over one
    version (:mod:`polydom.serving.state`) and never sees another; a planner built over a live
    loaded index reads the version that index serves at each request, once, and prepares plans
    anew when its models change.

    Parameters
    ----------
    index : CostSensitiveIndex
    features : mapping of str to Feature
        At least every feature of ``index``.
    """

    def __init__(self, index, features: Mapping[str, Feature], *, cascade: bool = False, speculate: bool = False,
                 learn: bool = True, decode=None, late_share: float | None = None):
        missing = [n for n in index.features if n not in features]
        if missing:
            raise ValueError(f"no Feature objects for the index's features {missing}")
        self.index = index
        self.features = {n: features[n] for n in index.features}
        # (models, plans): the plans of one version's model mapping, read and replaced as one
        # object so that a thread never pairs one version's plans with another's models.
        self._cache: tuple = (index.models, {})
        # Stop buying features once a prefix's model is sure (only where thresholds were trained).
        self.cascade = bool(cascade) and bool(index.cascades)
        # Try a feature the guards refuse on a worker thread, abandoned at the deadline
        # (polydom.index.serving.anytime, "trying past the guard"); anytime indexes only.
        self.speculate = bool(speculate)
        # Guards that follow this process's measured feature times (polydom.index.serving.guards),
        # at the quantile the fit's guards were taken at; none where the index has no guards or
        # was fitted with learn_guards=False (the quantile is then None), or with ``learn=False``
        # (a classifier's own planner: its predictions change nothing, the fit's guards decide).
        serving = index.serving_params
        self.learn = bool(learn)
        self.serving_guards = (ServingGuards(index, quantile=serving.guard_quantile)
                               if learn and serving.learn_guards else None)
        # The decode step's cost fit (polydom.costs.decode.fit_decode_cost), or None: an
        # encoded image is then decoded whatever the budget, and its time subtracted.
        self.decode = decode
        # A late-share budget (polydom.index.serving.lateness): a learning planner prices lateness per
        # size and budget band; a classifier's own planner learns nothing, so it has none.
        self.late_share = late_share
        self.late_price = LatePrice(late_share) if late_share is not None and learn else None
        # The walk's clock (an injected one in tests of the anytime logic).
        self.clock = time.perf_counter
        # What the anytime walk reads of the index, prepared now rather than at the first request.
        version = _version_of(index)
        if version.chains:
            prepared(version)

    def with_costs(self, curves) -> "ServingPlanner":
        """A planner over ``index.with_costs(curves)``: the same sets and models, new cost curves."""
        return type(self)(self.index.with_costs(curves), self.features, cascade=self.cascade, speculate=self.speculate,
                          learn=self.learn, decode=self.decode, late_share=self.late_share)

    def plan(self, key: int, index=None) -> SetPlan:
        """The plan of the trained set with mask ``key`` in ``index`` (default: the version
        ``self.index`` serves now), prepared once per version. ``O(1)`` once cached.

        Raises
        ------
        RuntimeError
            The index has no model for the set, or names a feature this planner has no
            :class:`Feature` for (a live index refreshed to a version with another feature: a
            classifier rebuilds its planner instead, :mod:`polydom.serving.state`).
        """
        if index is None:
            index = _version_of(self.index)
        models = index.models
        cached, plans = self._cache
        # A plan belongs to one version's models: another version's cache is not looked in.
        plan = plans.get(key) if cached is models else None
        if plan is None:
            chosen = index.space.frozenset(int(key))
            missing = [n for n in index.features if n in chosen and n not in self.features]
            if missing:
                raise RuntimeError(f"this planner has no Feature objects for {missing}: its index moved to another "
                                   "version (a classifier rebuilds its planner; build a new one)")
            model = models.get(int(key))
            if model is None:
                raise RuntimeError(f"the index has no model for feature set {sorted(chosen)}")
            # The set's usable features in the version's column order, which is what its model was
            # trained on: a feature whose steps the set lacks adds nothing (polydom.steps), and
            # a step adds no columns.
            items = set(index.features)
            try:
                plan = SetPlan(int(key), tuple(self.features[n] for n in index.features
                                               if n in chosen and _usable(self.features[n], chosen, items)), model)
            except (AttributeError, TypeError, ValueError) as exc:  # a stored model that passed its checks
                raise ModelLoadError(f"the model of feature set {sorted(chosen)} cannot serve: "
                                     f"{type(exc).__name__}: {exc}") from exc
            if cached is not models:
                plans = {}
                self._cache = (models, plans)
            plans[int(key)] = plan
        return plan

    def prepare_plans(self) -> int:
        """Prepare now the plan of every set the version served can answer with; how many.

        A plan is otherwise prepared on the first request that answers with its set, after the
        walk: the model is read, checked and rebuilt then (milliseconds for a stored one), and
        that request answers late by as much (``docs/decisions/prepared-plans.md``). The sets
        are the index's :meth:`~polydom.index.protocol.CostSensitiveIndex.answer_sets`.

        Raises
        ------
        ModelIntegrityError, UntrustedModelError, ModelLoadError
            A stored model fails its checks, or cannot serve (now rather than at a request).
        """
        index = _version_of(self.index)
        keys = [key for key in index.answer_sets() if key in index.models]
        for key in keys:
            self.plan(key, index)
        return len(keys)

    def serve(self, image, i: int, budget: float, *, guarded: bool = True, speculate: bool | None = None) -> Served:
        """Choose a set for image ``i`` within ``budget`` seconds and compute its features.

        ``guarded=False`` lets the index start a feature whenever its predicted cost fits,
        ignoring the cost guards (a batch sharing one total books overruns instead).
        ``speculate`` overrides the planner's own setting for this call (the classifier passes
        its parameter per request instead of writing it into a shared planner).

        A loaded index is read through its version view once (``index._view()``), so
        that the choice, the plan and the readable steps all come from one version even when
        this planner was built over a live loaded index that a refresh switches meanwhile.

        An encoded image (a path or bytes) is sized from its header. The budget covers the whole
        answer: it is decoded only if the decode step's guarded curve fits (:attr:`decode`) and
        the time left still buys a feature (:func:`~polydom.costs.decode.decode_fits`), and
        the features get what its measured time leaves; otherwise nothing is decoded and the
        answer falls back on time to the set that costs nothing.

        Raises
        ------
        TypeError, ValueError
            An invalid image, named by ``i``.
        polydom.featurizers.FeatureError
            A feature failed, naming it and the item.
        """
        decoded, abandoned = 0.0, False
        if is_encoded(image):
            start, begun = time.perf_counter(), self.clock()
            height, width = header_shape(image, index=i)
            size = height * width
            version = _version_of(self.index)
            if decode_fits(self.decode, size, budget, version):
                # A decode that runs past the point where no feature could follow is given up:
                # the answer then computes nothing, on time (docs/decisions/decoding.md).
                try:
                    array = decode_image(image, index=i, clock=self.clock,
                                         deadline=begun + budget - self.cheapest_feature(version, size))
                except DecodeDeadline:
                    array, abandoned = None, True
                decoded = time.perf_counter() - start
                budget = 0.0 if abandoned else max(budget - decoded, 0.0)
            else:
                array, budget = None, 0.0  # no time to decode: nothing can be computed
        else:
            array = as_array(image, index=i)
            size = array.shape[0] * array.shape[1]
        computed = {}
        features = self.features
        prepared: dict = {}  # the steps' outputs (greyscale ...), computed once for every feature

        pixels = [array]

        def compute(name: str, deadline: float | None = None) -> np.ndarray:
            if pixels[0] is None:  # only a feature predicted free is computed at budget 0: decode for it
                pixels[0] = decode_image(image, index=i)
            if deadline is None:
                vector = features[name].evaluate(pixels[0], index=i, prepared=prepared)
            else:
                vector = _by_deadline(features[name], pixels[0], i, deadline, prepared)
            computed[name] = vector
            return vector

        index = _version_of(self.index)
        options = {"stop_when_confident": True} if self.cascade else {}
        if not guarded:
            options["guarded"] = False
        else:
            if self.serving_guards is not None:
                options["serving_guards"] = self.serving_guards
                # Features run on this thread: its CPU clock separates their own cost from the
                # machine's scheduling (polydom.index.serving.guards).
                options["cpu_clock"] = time.thread_time
            if (self.speculate if speculate is None else speculate) and index.chains:
                options["speculate"] = True
            if self.late_price is not None:
                options["late_price"] = self.late_price
        if self.clock is not time.perf_counter:  # an injected clock (the walk's default is this one)
            options["clock"] = self.clock
        choice, steps = index.select_steps(size, budget, compute, **options)
        space = index.space
        readable = tuple((kind, tuple(sorted(space.frozenset(v))) if isinstance(v, int) else v) for kind, v in steps)
        plan = self.plan(choice.key, index)
        x = np.concatenate([computed[n] for n in plan.names]) if plan.names else _EMPTY
        if decoded and not abandoned:  # a decode given up is timed, not listed as done
            readable = (("decode", ()),) + readable
        # Nothing computed, nothing spent: the clock's own overhead is not extraction time.
        walked = tuple(name for name in computed if features[name].dimension != 0)  # features, not steps
        return Served(choice, plan, x, (choice.cost if computed else 0.0) + decoded, size, readable, index, walked)

    def cheapest_feature(self, index, size: float) -> float:
        """Predicted seconds of the cheapest feature at ``size``, with the steps it needs."""
        return min((index.cost_of([name], size) for name, feature in self.features.items()
                    if feature.dimension != 0 and name in index.space.names), default=0.0)

    # ------------------------------------------------------------------ many images

    def predict(self, images, budgets, answers: Answers, *, speculate: bool | None = None) -> np.ndarray:
        """Answers to ``images`` (:meth:`Answers.empty`), each within its budget."""
        out = answers.empty(len(images))
        for i, image in enumerate(images):
            served = self.serve(image, i, budgets[i], speculate=speculate)
            out[i] = served.plan.predictor.predict_one(served.x)
        return out

    def predict_proba(self, images, budgets, answers: Answers, *, speculate: bool | None = None) -> np.ndarray:
        """Probabilities, one column per class or label (:meth:`Answers.proba`), each image within its budget."""
        out = np.zeros((len(images), len(answers.classes)))
        for i, image in enumerate(images):
            served = self.serve(image, i, budgets[i], speculate=speculate)
            out[i] = answers.proba(served.plan.model, served.x)
        return out

    def explain(self, images, budgets, *, speculate: bool | None = None, errors: str = "raise") -> list:
        """One :class:`Explanation` per image: the set served, its costs and the label. With
        ``errors="return"``, a bad item's entry is the :class:`~polydom.PolydomError` it raised
        (naming the item) and the other items are served as usual."""
        out = []
        for i, image in enumerate(images):
            try:
                s = self.serve(image, i, budgets[i], speculate=speculate)
            except PolydomError as exc:
                if errors != "return":
                    raise
                out.append(exc)
                continue
            label = s.plan.predictor.predict_one(s.x)
            predicted = s.index.cost_of(s.plan.names, s.size)
            out.append(Explanation(i, s.size, float(budgets[i]), s.plan.names, float(s.choice.accuracy),
                                   float(predicted), float(s.measured), label, s.steps, s.choice.std_error,
                                   s.computed))
        return out


class Server:
    """Serves one classifier's requests and learns from them: the object a service keeps.

    Made by :meth:`polydom.CostSensitiveClassifier.server`. Unlike the classifier's own
    ``predict`` -- which changes nothing, so one prediction never changes the next -- a server
    learns each feature's guard from the times it measures (:mod:`polydom.index.serving.guards`),
    as the ``serving`` group's ``learn_guards`` says: the machine that serves is not the one that
    was timed. It serves the version of the index the classifier served when it was made.

    Attributes
    ----------
    planner : ServingPlanner
        Its planner, with the guards it learns (``planner.serving_guards``).
    classes : ndarray
    budget : float or None
        Seconds per image when a call gives none.
    speculate : bool
    multilabel : bool
        Whether each answer is one 0/1 value per label (``classes`` are then the labels).
    """

    def __init__(self, planner: ServingPlanner, classes, budget=None, speculate: bool = False, multilabel: bool = False):
        self.planner, self.classes, self.budget, self.speculate = planner, np.asarray(classes), budget, bool(speculate)
        self.multilabel = bool(multilabel)
        self._answers = Answers(self.classes, self.multilabel)

    def _budgets(self, images, budget):
        from polydom.classifier.inputs import as_image_list, check_budgets

        images = as_image_list(images)
        return images, check_budgets(self.budget if budget is None else budget, len(images))

    def predict(self, images, budget=None) -> np.ndarray:
        """Labels (or label rows) within ``budget`` seconds per image (as the classifier's ``predict``), learning."""
        images, budgets = self._budgets(images, budget)
        return self.planner.predict(images, budgets, self._answers, speculate=self.speculate)

    def predict_proba(self, images, budget=None) -> np.ndarray:
        """Probabilities within ``budget`` per image, columns following ``classes``."""
        images, budgets = self._budgets(images, budget)
        return self.planner.predict_proba(images, budgets, self._answers, speculate=self.speculate)

    def explain(self, images, budget=None, *, errors="raise") -> list:
        """One :class:`Explanation` per image, as the classifier's ``explain`` (``errors`` as there)."""
        images, budgets = self._budgets(images, budget)
        return self.planner.explain(images, budgets, speculate=self.speculate, errors=check_errors(errors))


def _usable(feature, chosen, items) -> bool:
    """Whether ``feature`` (a Feature or a Step) adds columns to the set ``chosen``: it is no step,
    and ``chosen`` holds every step it needs that is an item of the index (a step that is none,
    the feature computes itself)."""
    return feature.dimension != 0 and all(step in chosen for step in feature.requires if step in items)


def _version_of(index):
    """The version a loaded index serves now (:meth:`StoredIndex._view`, which no refresh
    changes); any other index -- built in memory, or a wrapper -- as it is."""
    return index._view() if isinstance(index, StoredIndex) else index


class _DeadlineWorkers:
    """Worker threads for features tried past their guard, and how late a timed wait wakes.

    A wait with a timeout returns some time after it (a fraction of a millisecond under load,
    ``docs/decisions/speculation.md``), which at sub-millisecond budgets is most of the slack: the wait ends early
    by the 0.9 quantile of the recent overshoots (measured on a few idle waits first, then on
    every wait that timed out and every result handed back), so that an abandoned feature's
    answer comes back by the deadline. While a computation given up at its deadline still runs,
    the next feature tried past its guard is given up at once rather than started beside it.
    """

    def __init__(self):
        # Two workers: one abandoned computation does not hold up the next request's.
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="polydom-speculate")
        self.lock = threading.Lock()
        self.running_abandoned = 0  # computations given up at their deadline and still running
        self.overshoot: deque = deque(maxlen=64)  # how late timed waits woke
        self.handback: deque = deque(maxlen=64)  # how long a finished result took to reach its caller
        idle = threading.Event()
        for _ in range(8):
            asked = time.perf_counter() + 2e-4
            idle.wait(2e-4)
            self.overshoot.append(max(0.0, time.perf_counter() - asked))

    def margin(self) -> float:
        # Results already waiting when asked for add delays near zero; kept apart, they cannot
        # pull the timeouts' quantile down.
        with self.lock:
            return max(_quantile90(self.overshoot), _quantile90(self.handback))

    def _done_abandoned(self, future) -> None:
        with self.lock:
            self.running_abandoned -= 1

    def run(self, feature: Feature, array: np.ndarray, i: int, deadline: float, prepared: dict) -> np.ndarray:
        wake = deadline - self.margin()
        with self.lock:  # one decision for all threads: check and submit together
            if self.running_abandoned:
                # An abandoned computation still holds a core: a second one would slow every
                # request behind it (served for real at 0.5 ms, 39% of the walks that started no
                # feature past its guard overran while abandoned ones piled up), so give up now.
                raise FeatureTimeout(feature.name)
            future = self.pool.submit(_stamped, feature, array, i, prepared)
        try:
            vector, finished = future.result(timeout=max(0.0, wake - time.perf_counter()))
        except FutureTimeout:
            with self.lock:
                self.overshoot.append(max(0.0, time.perf_counter() - wake))
            if not future.cancel():  # already running: count it until it ends
                with self.lock:
                    self.running_abandoned += 1
                future.add_done_callback(self._done_abandoned)
            raise FeatureTimeout(feature.name) from None
        # A result also reaches this thread late (it must wake and take the interpreter back);
        # the margin covers those delays too, so a feature finishing just before it is in time.
        with self.lock:
            self.handback.append(max(0.0, time.perf_counter() - finished))
        return vector


def _quantile90(values) -> float:
    seen = sorted(values)
    return seen[int(0.9 * (len(seen) - 1))] if seen else 0.0


def _stamped(feature: Feature, array: np.ndarray, i: int, prepared: dict) -> tuple[np.ndarray, float]:
    """The feature's vector and when the worker finished computing it."""
    vector = feature.evaluate(array, index=i, prepared=prepared)
    return vector, time.perf_counter()


_WORKERS: _DeadlineWorkers | None = None
_WORKERS_LOCK = threading.Lock()


def _by_deadline(feature: Feature, array: np.ndarray, i: int, deadline: float, prepared: dict | None = None) -> np.ndarray:
    """``feature`` on ``array``, computed on a worker thread; ``FeatureTimeout`` by ``deadline``
    (on ``time.perf_counter()``) if it has not finished. The computation is then left to finish
    unused: a Python thread cannot be stopped."""
    global _WORKERS
    with _WORKERS_LOCK:
        if _WORKERS is None:
            _WORKERS = _DeadlineWorkers()
    return _WORKERS.run(feature, array, i, deadline, {} if prepared is None else prepared)
