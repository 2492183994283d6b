"""``CostSensitiveClassifier``: a scikit-learn classifier that predicts within a time budget.

``fit`` times the features, trains one model per explored feature set and builds an index
(:mod:`polydom.classifier.pipeline`); ``predict`` computes, per image, only the features of the most
accurate set that fits its budget (:mod:`polydom.serving.planner`); ``save`` and ``load`` keep the
classifier's own state inside its index (:mod:`polydom.classifier.classifier_state`).
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from polydom.costs.calibration import carry_calibration
from polydom.costs.decode import MIN_DECODE_SAMPLES, fit_decode_cost, sample_decode_times
from polydom.costs.measure import measure_feature_costs
from polydom.errors import InputError
from polydom.featurizers.provenance import normalize_modules
from polydom.serving.batch import BatchServer
from polydom.serving.planner import Explanation
from polydom.serving.state import Refusal, ServingState, follow, view_of

from .classifier_params import CONSTRAINTS, check_params, estimator_has
from .classifier_state import ClassifierStateError, load_classifier, save_classifier, state_from_version
from .constraints import Integer, check_param
from .inputs import as_image_list, check_budgets, check_errors, check_groups, check_images, check_labels
from .multilabel import is_multilabel_target, label_matrix
from .pipeline import FitSettings, run_fit
from .policies import Cascade, Selection, Serving, Timing

__all__ = ["CostSensitiveClassifier", "Explanation"]


class CostSensitiveClassifier(ClassifierMixin, BaseEstimator):
    """The most accurate classifier whose image features can be computed within a time budget.

    Parameters
    ----------
    features : list of str or Feature, optional
        The candidate features, by registry name or as :class:`polydom.featurizers.Feature`
        objects, in the index's feature order. ``None``: polydom's built-in image features.
    learners : classifier, or list of classifiers or of (name, classifier), optional
        The black box, cloned for every feature set. Several: each set gets the best of them,
        raced on one draw of folds. ``None``: :func:`polydom.classifier.blackbox.default_learners` (LDA
        with shrinkage, logistic regression). Linear classifiers (behind ``StandardScaler``)
        are served through a lean numpy path.
    budget : float, optional
        Default seconds per image's answer (decoding, for files and bytes, and feature
        extraction). ``None``: no limit.
    cv : int or cross-validation splitter, default 5
        Folds for each feature set's score. An int gives stratified k-fold, grouped by ``groups``
        when ``fit`` gets them (keep renderings of one picture in one fold).
    selection : Selection, optional
        How the index chooses among trained sets: backend, ``alpha``, ranking, scoring
        (:class:`polydom.Selection`; ``None``: its defaults).
    timing : Timing, optional
        How the cost curves are measured (:class:`polydom.Timing`; ``None``: its defaults).
    cascade : Cascade, optional
        Confidence cascades: stop computing features once a prefix's model is sure
        (:class:`polydom.Cascade`). ``None``: no cascade.
    serving : Serving, optional
        The late-share tolerance, learned guards, speculation, extrapolation
        (:class:`polydom.Serving`; ``None``: its defaults).
    cache_dir : str or path, optional
        Cache feature matrices and trained feature sets here, keyed by fingerprints of the data,
        the features and the learner: a refit trains only the sets not trained before.
    n_jobs : int, optional
        Parallel feature extraction and training (joblib; ``-1``: all cores).
    random_state : int, optional
        Seeds the folds, the timing images and every unset ``random_state`` of the learners:
        fits with the same seed give the same index and predictions.
    progress : bool, optional
        Progress bars on a terminal; plain lines elsewhere with ``True``; ``None``: on a
        terminal only.

    Attributes
    ----------
    index_ : PolyDomIndex or GreedyIndex
        The index: ``index_.lookup(size, budget)``.
    classes_ : ndarray
    feature_names_ : tuple of str
        The features, in the index's order. ``index_.features`` also holds the steps they share
        (``grey`` for the built-in features, ``docs/decisions/shared-steps.md``).
    feature_columns_ : dict of str to slice
        Each feature's column range in the feature matrix (a set's vector keeps this order).
    cost_fits_ : dict of str to CostFit
        Timings and fitted cost curve of each feature and of each step they share.
    cost_curves_ : dict of str to CostCurve
    n0_ : float
        Median training item size (the Greedy expansion size).
    timing_sides_ : tuple of int
        The square sides the costs were measured at.
    fit_stats_ : dict
        Seconds spent extracting, timing and building; ``expanded`` (sets the build used, ``{}``
        included), ``trained`` (in this fit) and ``reused`` (from the cache); ``features_cached``.
        How many sets of the lattice were trained fully, partly (screened only) or not at all is
        in ``index_.stats`` (``fully_trained``, ``partly_trained``, ``not_trained``); with
        ``n_jobs``, ``speculative`` counts sets started on idle workers that the build never used.
    planner_ : polydom.serving.planner.ServingPlanner
        Serves images from the version of ``index_`` served (per set: its features, model and
        lean predictor), with the guards serving learns.
    path_, version_ : str
        Set by :meth:`save` and :meth:`load`: the index directory and the published version.

    Notes
    -----
    *One version per request.* Every fitted attribute but ``index_`` is read from one immutable
    :class:`~polydom.serving.state.ServingState` -- the version served, its feature order and
    columns, ``classes_``, cost fits, the planner with its plans, learned guards and cascades --
    which a fit, :meth:`load`, :meth:`recost` or a refresh replaces whole, in one assignment.
    ``predict``, ``predict_proba``, ``explain`` and ``score`` read it once at their start, so
    each answers wholly from one version; predicting changes no attribute and learns
    nothing: a service that should learn its guards from the requests asks for a
    :meth:`server`, which holds them.

    *Refreshing.* A loaded classifier's ``index_.refresh()`` (or :meth:`refresh`) adopts the
    newest version at its path. The next request, or attribute read, rebuilds the serving state
    from that version's own saved classifier state -- a refit with its features in another order,
    a feature added or other classes is served as :meth:`load` would serve it -- or, where the
    version cannot be served (not saved by a classifier, damaged, a model refused), raises
    :class:`~polydom.classifier.classifier_state.ClassifierStateError` at every request until a servable
    version is adopted. The parameters stay this classifier's: ``budget`` and ``serving`` still
    apply, and ``get_params`` does not change (load the path again for the refit's parameters).

    See Also
    --------
    polydom.build : the index alone, for any black box and cost curves.

    Examples
    --------
    >>> import numpy as np, polydom
    >>> from polydom.featurizers.datasets import load_digits_images
    >>> images, labels, sides = load_digits_images(sides=(16, 32), n_per_class=6)
    >>> groups = np.arange(len(images)) // 2          # each digit is rendered at two sizes
    >>> clf = polydom.CostSensitiveClassifier(
    ...     features=["intensity_hist", "thumbnail"], cv=2, timing=polydom.Timing(images=2, repeats=1),
    ...     random_state=0, progress=False).fit(images, labels, groups=groups)
    >>> clf.predict(images[:3], budget=0.005).shape    # 5 ms of feature extraction per image
    (3,)
    >>> clf.explain(images[:1], budget=0.0)[0].features  # no time: the majority-class model
    ()
    """

    _constraints = CONSTRAINTS  # declared in polydom.classifier.classifier_params, checked when fit starts

    def __init__(self, features=None, learners=None, *, budget=None, cv=5, selection=None, timing=None, cascade=None,
                 serving=None, cache_dir=None, n_jobs=None, random_state=None, progress=None):
        self.features = features
        self.learners = learners
        self.budget = budget
        self.cv = cv
        self.selection = selection
        self.timing = timing
        self.cascade = cascade
        self.serving = serving
        self.cache_dir = cache_dir
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.progress = progress

    def _policies(self) -> tuple[Selection, Timing, Cascade | None, Serving]:
        """The four groups of settings, defaults where ``None``."""
        return (self.selection if self.selection is not None else Selection(),
                self.timing if self.timing is not None else Timing(), self.cascade,
                self.serving if self.serving is not None else Serving())

    def _check_params(self) -> None:
        """The constraint table, then each group's own check."""
        check_params(self.get_params(deep=False), self._constraints)
        for policy in self._policies():
            if policy is not None:
                policy.check()

    def fit(self, images, y, *, groups=None):
        """Measure costs, train the feature sets the lattice explores, and build the index.

        Parameters
        ----------
        images : sequence of images
            Training images: ``(H, W)``, ``(H, W, 3)`` or ``(H, W, 4)`` arrays of dtype bool,
            uint8, uint16 or float in ``[0, 1]``, at least 8 pixels a side (sizes may differ), PIL
            images, file paths or encoded bytes. Encoded ones are decoded and timed: their
            decode times fit the cost curve serving checks before decoding.
        y : array_like of shape (n_images,) or (n_images, n_labels), or list of label sets
            Class labels; or several labels per image: a 0/1 indicator matrix (one column per
            label, scikit-learn's multilabel convention) or one set of labels per image. With
            several labels each feature set's model answers every label, one walk per image
            serves them all, and ``predict`` returns the indicator matrix (``classes_`` are the
            labels, in column order; ``Selection(label_weights=...)`` weighs them).
        groups : array_like of shape (n_images,), optional
            Group of each image for the folds (e.g. one group per source picture rendered at
            several sizes), so that no picture is in both a training and a test fold.

        Returns
        -------
        self

        Raises
        ------
        TypeError, ValueError
            A bad parameter, an invalid image (named by its position), labels of the wrong length.
        polydom.featurizers.FeatureError
            A feature failed, naming it and the item.
        """
        self._check_params()
        decodes = []  # (size, seconds) of each training image that came encoded
        images = check_images(images, purpose="training image is required", decode_times=decodes)
        labels = None
        if is_multilabel_target(y):
            y, labels = label_matrix(y, len(images))
            if self.cascade is not None:
                raise InputError("cascade applies to one label per image: a cascade's models are sure of one "
                                 "class, not of several labels; fit without cascade=")
        else:
            y = check_labels(y, len(images))
        groups = check_groups(groups, len(images))
        settings = FitSettings.from_classifier(self)
        result = run_fit(images, y, groups, settings, labels=labels)
        if len(decodes) < MIN_DECODE_SAMPLES:
            # Fitted on arrays: learn what decoding a file costs anyway, so that a file served
            # later is decoded only where the decode and a feature fit its budget.
            decodes = sample_decode_times(images, random_state=self.random_state)
        state = ServingState.build(
            result.index, features={f.name: f for f in result.features}, classes=result.classes,
            columns=result.columns, cost_fits=result.fits, n0=result.n0, timing_sides=result.timing_sides,
            fit_stats=result.stats, cascade=result.cascade, decode_fit=fit_decode_cost(decodes),
            multilabel=labels is not None,
        )
        self._adopt_state(result.index, state)
        return self

    def save(self, path, **options) -> str:
        """Publish the fitted classifier -- index, models, parameters -- as an LMDB index at ``path``,
        atomically; :func:`polydom.load` opens it as a plain index, :meth:`load` as a classifier.

        Returns
        -------
        str
            The published version's name (also ``version_``; ``path_`` is the directory).
        """
        self._state()  # NotFittedError before fit
        return save_classifier(self, path, **options)

    @classmethod
    def load(cls, path, *, trusted=None, feature_modules=()) -> "CostSensitiveClassifier":
        """Open a classifier saved with :meth:`save`.

        Parameters
        ----------
        path : str or os.PathLike
        trusted : iterable of str or type, optional
            Model types to trust beyond polydom's list (see :func:`polydom.load`).
        feature_modules : str or iterable of str, optional
            Modules trusted to define the index's custom features (:func:`polydom.feature`): one
            that this process has not imported is imported, and only if named here. A single name
            counts as one module. A module whose source changed since the fit is refused before
            any of it runs.

        Raises
        ------
        ValueError
            The index at ``path`` was not saved by a ``CostSensitiveClassifier``; otherwise as
            :func:`polydom.load`.
        """
        return load_classifier(cls, path, trusted, normalize_modules(feature_modules))

    def refresh(self) -> bool:
        """Adopt the newest version published at this loaded classifier's path, and rebuild the
        serving state from it now; whether the version served changed.

        Calling ``index_.refresh()`` is equally safe: the next request rebuilds the state then.

        Raises
        ------
        ClassifierStateError
            The new version cannot be served by this classifier (it holds no classifier state,
            or a damaged one); every request raises it too, until a servable version is adopted.
        RuntimeError
            The classifier was fitted in memory, not loaded from a path (as ``index_.refresh``).
        IndexFormatError
            As ``index_.refresh()``: the newest version is damaged or holds another backend (the
            classifier keeps serving the version it had).
        """
        if "_serving" not in self.__dict__:
            check_is_fitted(self, "index_")
        before = self.__dict__["_serving"]
        self.index_.refresh()
        self._state()
        return self.__dict__["_serving"] is not before

    # ------------------------------------------------------------------ the serving state

    def _adopt_state(self, index, state: ServingState) -> None:
        """Serve ``state``, built from ``index`` (which becomes ``index_``)."""
        self.index_ = index
        self._serving = state  # last, one assignment: requests from now on read the new state

    def _state(self) -> ServingState:
        """The serving state every request reads once: the current one, rebuilt first if the
        index moved to a new version (:func:`polydom.serving.state.follow`).

        Raises
        ------
        NotFittedError
            Before ``fit`` or ``load``.
        ClassifierStateError
            The version adopted cannot be served by this classifier.
        """
        state = self.__dict__.get("_serving")
        if state is None:
            check_is_fitted(self, "index_")  # NotFittedError before fit
            raise NotFittedError("this CostSensitiveClassifier has no serving state; fit or load it")
        if not state.current():  # O(1): the index's view is the version this state serves
            modules = state.feature_modules
            state = follow(self, lambda source, view, where: state_from_version(source, view, where, modules),
                           ClassifierStateError)
        if isinstance(state, Refusal):
            state.raise_()
        return state

    def _replace_state(self, **changes) -> None:
        self._serving = self._state().replace(**changes)

    def _set_planner(self, planner) -> None:
        # A planner assigned from outside (demo jobs, benchmarks) serves what its index serves.
        self._replace_state(planner=planner, source=planner.index, index=view_of(planner.index))

    classes_ = property(lambda self: self._state().classes, lambda self, v: self._replace_state(classes=v),
                        doc="The classes, read-only (``classes_`` of the version served).")
    feature_names_ = property(lambda self: self._state().feature_names, doc="The index's feature order.")
    feature_columns_ = property(lambda self: self._state().feature_columns,
                                lambda self, v: self._replace_state(feature_columns=v),
                                doc="Each feature's column range in the feature matrix (read-only mapping).")
    cost_fits_ = property(lambda self: self._state().cost_fits, lambda self, v: self._replace_state(cost_fits=v),
                          doc="Timings and fitted cost curve of each feature (read-only mapping).")
    cost_curves_ = property(lambda self: self._state().cost_curves,
                            lambda self, v: self._replace_state(cost_curves=v), doc="Each feature's CostCurve.")
    n0_ = property(lambda self: self._state().n0, lambda self, v: self._replace_state(n0=float(v)),
                   doc="Median training item size.")
    timing_sides_ = property(lambda self: self._state().timing_sides,
                             lambda self, v: self._replace_state(timing_sides=tuple(v)),
                             doc="The square sides the costs were measured at.")
    fit_stats_ = property(lambda self: self._state().fit_stats, lambda self, v: self._replace_state(fit_stats=v),
                          doc="What the fit spent and trained.")
    planner_ = property(lambda self: self._state().planner, _set_planner,
                        doc="The ServingPlanner of the version served.")

    def _saved(name):
        def get(self):
            value = getattr(self._state(), name)
            if value is None:
                raise AttributeError(f"{name}_: this classifier was neither saved nor loaded")
            return value
        return get

    path_ = property(_saved("path"), lambda self, v: self._replace_state(path=v),
                     doc="The directory the classifier was saved to or loaded from.")
    version_ = property(_saved("version"), lambda self, v: self._replace_state(version=v),
                        doc="The published version served (set by save, load and a refresh).")
    del _saved

    def recost(self, images, *, sides=None, repeats=None):
        """Re-measure the features on this machine and re-cost the index (``index_.with_costs``),
        training nothing: PolyDom re-indexes its trained sets (exploration depends on accuracies
        only); Greedy keeps its sequences and re-ranks them with the new costs.

        Parameters
        ----------
        images : sequence of array_like
            Images to time the features on (resized to each side).
        sides : sequence of int, optional
            Default: the sides used at fit time.
        repeats : int, optional
            Default: the ``timing`` group's ``repeats``.

        Returns
        -------
        self
        """
        state = self._state()  # NotFittedError before fit; one version throughout
        images = check_images(images, purpose="image is required to time the features")
        sides = tuple(state.timing_sides if sides is None else sides)
        timing = self._policies()[1]
        repeats = timing.repeats if repeats is None else repeats
        check_param("repeats", repeats, [Integer(low=1)])
        # The index's items, the steps it shares among them, timed as the fit timed them.
        items = [state.planner.features[name] for name in state.index.features]
        fits = measure_feature_costs(items, images, sides, repeats=repeats, quantile=timing.quantile,
                                     degree=timing.degree, progress=self.progress, steps=False)
        # The serving overhead and guard were learned at fit time, on the training extraction.
        fits = {name: carry_calibration(state.cost_fits[name], fit) for name, fit in fits.items()}
        planner = state.planner.with_costs({name: fit.curve for name, fit in fits.items()})
        # The re-costed index is built in memory: it no longer follows the path it was loaded from.
        self._adopt_state(planner.index, state.replace(
            source=planner.index, index=planner.index, planner=planner, cost_fits=fits,
            cost_curves={name: fit.curve for name, fit in fits.items()}, timing_sides=tuple(int(s) for s in sides),
        ))
        return self

    def _request(self, images, budget, total_budget=None):
        """``(state, server, images, budgets, options)``: the serving state (read once: the whole
        request serves from it), the planner and per-image budgets or a batch server and the
        total, and the options its calls take."""
        state = self._state()
        images = as_image_list(images)
        if total_budget is None:
            budgets = check_budgets(self.budget if budget is None else budget, len(images))
            # Read per request, never written into the planner: predicting changes no state.
            return state, state.planner, images, budgets, {"speculate": bool(self._policies()[3].speculate)}
        if budget is not None:
            raise ValueError("give budget (seconds per image) or total_budget (seconds for the batch), not both")
        return state, BatchServer(state.planner), images, total_budget, {}

    def server(self):
        """A :class:`~polydom.serving.planner.Server` for this classifier's version: it serves as
        :meth:`predict` does and learns each feature's guard from the requests it serves
        (``serving`` group's ``learn_guards``). The classifier itself never changes by predicting.

        Every set the server can answer with is ready when it is returned: its model read,
        checked and rebuilt (:meth:`~polydom.serving.planner.ServingPlanner.prepare_plans`), so
        that no request pays for it. The classifier's own ``predict`` prepares each set on the
        first request that needs it.
        """
        from polydom.serving.planner import Server, ServingPlanner

        state = self._state()
        serving = self._policies()[3]
        planner = ServingPlanner(state.index, state.planner.features, cascade=state.planner.cascade,
                                 speculate=serving.speculate, learn=serving.learn_guards, decode=state.decode_fit,
                                 late_share=serving.late_share)
        planner.prepare_plans()
        return Server(planner, state.classes, budget=self.budget, speculate=serving.speculate,
                      multilabel=state.multilabel)

    def predict(self, images, budget=None, *, total_budget=None) -> np.ndarray:
        """Predict each image's class within its budget, computing only the chosen features.

        Parameters
        ----------
        images : sequence of images
            Arrays, PIL images, file paths or encoded bytes, mixed as they come.
        budget : float or array_like of shape (n_images,), optional
            Seconds allowed per image: decoding (for a path or bytes) and feature extraction;
            default the ``budget`` parameter (``None``: no limit).
        total_budget : float, optional
            Seconds for the whole batch instead (not with ``budget``; the ``budget`` parameter
            does not apply): planned before any feature is computed, then re-planned with the time
            left as images are served (:mod:`polydom.serving.batch`).

        Returns
        -------
        ndarray of shape (n_images,)
        """
        state, server, images, budgets, options = self._request(images, budget, total_budget)
        return server.predict(images, budgets, state.answers, **options)

    @available_if(estimator_has("predict_proba"))
    def predict_proba(self, images, budget=None, *, total_budget=None) -> np.ndarray:
        """Class probabilities of each image within its budget, or of the batch within ``total_budget``
        (as :meth:`predict`); columns follow ``classes_``.

        Available when the learner has ``predict_proba`` (the default hinge-loss SGD has not).
        """
        state, server, images, budgets, options = self._request(images, budget, total_budget)
        return server.predict_proba(images, budgets, state.answers, **options)

    def explain(self, images, budget=None, *, total_budget=None, errors="raise") -> list[Explanation]:
        """Predict as :meth:`predict` does; per image, an :class:`Explanation` of what was computed
        and how long it took. With ``total_budget``, a list that also carries the batch's realised
        spend (``.summary``, a :class:`~polydom.serving.batch.BatchSpend`) and its first ``.plan``.

        ``errors="return"`` serves a batch with bad items in it: a bad item's entry is the
        :class:`~polydom.PolydomError` it raised (naming the item), every good item is answered.
        The default ``"raise"`` fails the call at the first bad item."""
        check_errors(errors)
        _, server, images, budgets, options = self._request(images, budget, total_budget)
        if errors == "return":
            if total_budget is not None:
                raise InputError('errors="return" serves per-image budgets; with total_budget every item is '
                                 "planned together, so a bad item fails the call")
            options["errors"] = errors
        return server.explain(images, budgets, **options)

    def triage(self, images, k: int, *, total_budget: float, label=None, progress: bool = False):
        """The ``k`` images most likely positive, found within ``total_budget`` seconds.

        Cheap features are computed on every image and the costlier ones on the images whose
        place in the top ``k`` they could change (:mod:`polydom.serving.triage`). A Ctrl-C
        returns the ranking found so far (``result.interrupted``).

        Parameters
        ----------
        images : sequence of images
            Arrays, PIL images, file paths or encoded bytes; paths are decoded when needed, so
            a backlog of files never sits in memory whole.
        k : int
            How many images to return (at most ``len(images)``).
        total_budget : float
            Seconds of decoding and feature extraction for the whole backlog; exceeded by less
            than the measured time of the last step started.
        label : object, optional
            The class (or, with several labels, the label) to rank by; default the second of two
            classes, or the only label.
        progress : bool, default False
            Lines on stderr with the time spent and left.

        Returns
        -------
        polydom.serving.triage.Triage
            ``items`` (positions, best first), ``scores``, every image's score, the time spent.
        """
        from polydom.serving.triage import triage

        images = as_image_list(images)
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 1 <= k <= len(images):
            raise InputError(f"k must be an integer from 1 to the number of images ({len(images)}), got {k!r:.40}")
        if total_budget is None:
            raise InputError("total_budget is required: the seconds triage may spend on the whole backlog")
        total = check_budgets(total_budget, 1)[0]
        return triage(self._state(), images, int(k), float(total), label=label, progress=bool(progress))

    def score(self, images, y, sample_weight=None, budget=None, *, total_budget=None) -> float:
        """Accuracy of :meth:`predict` on ``images`` within ``budget`` (or ``total_budget``).

        With several labels per image: the mean over labels of each label's accuracy (one minus
        the Hamming loss); ``y`` as :meth:`fit` takes it, its labels those of ``classes_``.
        """
        from sklearn.metrics import accuracy_score

        state = self._state()
        if state.multilabel:
            Y, _ = label_matrix(y, len(images), state.classes)
            predicted = self.predict(images, budget=budget, total_budget=total_budget)
            correct = (predicted == Y).mean(axis=1)
            return float(np.average(correct, weights=sample_weight))
        y = np.asarray(y)
        if y.ndim != 1 or len(y) != len(images):
            raise ValueError(f"y must hold one label per image ({len(images)}), got shape {y.shape}")
        predicted = self.predict(images, budget=budget, total_budget=total_budget)
        return float(accuracy_score(y, predicted, sample_weight=sample_weight))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False  # a sequence of images, not a feature matrix
        return tags
