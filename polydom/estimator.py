"""``CostSensitiveClassifier``: a scikit-learn classifier that predicts within a time budget.

``fit`` times the features, trains one model per explored feature set and builds an index
(:mod:`polydom.pipeline`); ``predict`` computes, per image, only the features of the most
accurate set that fits its budget (:mod:`polydom.serving`); ``save`` and ``load`` keep the
classifier's own state inside its index (:mod:`polydom.classifier_state`).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from .batchserving import BatchServer
from .calibration import carry_calibration
from .classifier_params import CONSTRAINTS, check_params, estimator_has
from .classifier_state import ClassifierStateError, load_classifier, save_classifier, state_from_version
from .constraints import Integer, check_param
from .costs import measure_feature_costs
from .inputs import as_image_list, check_budgets, check_groups, check_images, check_labels
from .pipeline import FitSettings, run_fit
from .serving import Explanation
from .servingstate import Refusal, ServingState, follow, view_of

__all__ = ["CostSensitiveClassifier", "Explanation"]


class CostSensitiveClassifier(ClassifierMixin, BaseEstimator):
    """The most accurate classifier whose image features can be computed within a time budget.

    Parameters
    ----------
    features : list of str or Feature, optional
        The candidate features, by registry name or as :class:`polydom.featurizers.Feature`
        objects, in the index's feature order. ``None``: polydom's built-in image features.
    estimator : scikit-learn classifier, optional
        One black-box learner, cloned for every feature set (the paper's setting; its learner
        was ``make_pipeline(StandardScaler(), SGDClassifier(loss="hinge", penalty="l1"))``).
        Linear classifiers (behind ``StandardScaler``) are served through a lean numpy path.
    learners : list of classifiers or of (name, classifier), optional
        Several learners: each feature set gets the best of them. With the PolyDom backend they
        race on the screening draw (a 2-fold split, below); otherwise on the first fold, so
        that clearly worse ones stop early. ``None`` and no ``estimator``:
        :func:`polydom.blackbox.default_learners` (LDA with shrinkage, logistic regression).
    budget : float, optional
        Default seconds of feature extraction per image. ``None``: no limit.
    alpha : float, default 1.0
        Approximation factor of the PolyDom backend (>= 1; 1 is exact). With an int ``cv`` and
        four or more features, a PolyDom build *screens* every set it explores on a 2-fold draw
        and trains fully (``cv`` folds, a model on every row) only the sets whose upper bound
        could still put them on the skyline (``docs/screening.md``).
    e : float or "auto", default "auto"
        Monotonicity tolerance of the lattice exploration; ``"auto"`` measures it on the trained
        sets (``index_.stats["e_used"]``), so that alpha = 1 stays exact on the scores it has.
    tolerance : float or None, default 0.0
        The tie rule: among affordable sets within ``tolerance`` of the best, serve the cheapest.
        ``0``: the most accurate (the paper's rule); ``None``: within one standard error of the
        difference of their scores (opt-in: with few training items it serves too cheap sets).
    scores : {"bounded", "monotone", "measured"}, default "bounded"
        What the PolyDom index ranks trained sets by. ``"monotone"``: the weighted isotonic fit
        of the cross-validated scores on the subset order (a superset never ranks below its
        subset), which takes out the luck that picking the best of many noisy scores rewards.
        ``"bounded"``: that fit held within one standard error of each set's measured score, so
        no set is served whose measured score lies more than the two sets' standard errors
        below an affordable trained set (:func:`polydom.index.ranking.bounded_scores`).
        ``"measured"``: the scores as cross-validated. ``index_.with_scores(mode)`` re-ranks a
        fitted index without training (``docs/score-ranking.md``).
        ``index_.measured_scores`` holds the measured scores either way. PolyDom backend only
        (the Greedy backends walk the measured scores).
    cv : int or cross-validation splitter, default 5
        Folds for each feature set's score. An int gives stratified k-fold, grouped by ``groups``
        when ``fit`` gets them (keep renderings of one picture in one fold).
    cv_repeats : int, default 1
        With an int ``cv``: score every set on this many shuffled k-fold draws.
    finalist_repeats : int, default 2
        With an int ``cv``: the sets the index can serve are scored again on this many further
        draws before the sweep, so the served sets carry the lowest-variance estimates.
    cascade : bool, default False
        Learn per-prefix confidence thresholds (out of fold) and stop computing features once a
        prefix's model is sure (``explain`` shows where each image stopped).
    cascade_loss : float, default 0.0
        The out-of-fold accuracy (a fraction of the items) a cascade may give up for the
        features it saves. A prefix's early answer counts as a loss where it is wrong and the
        whole set is right, and never as a gain: at 0 the cascade stops early only where no
        such item was seen out of fold.
    cascade_price : float, optional
        Instead of ``cascade_loss``: the out-of-fold accuracy worth one second of mean
        extraction time per image. Each set's thresholds maximise accuracy minus price times
        mean cost (each item's cost is that of the prefix it stops at, at its own size), so
        ``cascade_price=10`` gives up 0.01 of accuracy for every millisecond saved on average.
    cascade_relative_price : float, optional
        Instead of ``cascade_loss``: the out-of-fold accuracy worth a set's whole extraction
        time. Each item's cost counts as the fraction of its set's cost (at its size) paid
        before it stopped, so ``cascade_relative_price=0.05`` gives up 0.01 of accuracy for
        every fifth of the cost saved, on cheap sets and dear ones alike.
    cascade_mean_cost : float, optional
        Instead of ``cascade_loss``: a mean extraction time per image (seconds) for each set's
        cascade; its thresholds are the most accurate out of fold that meet it, found by
        bisection on the price. A set that costs less than this in full, or whose cascade
        cannot get that cheap, keeps its plain walk.
    cascade_saving : float in [0, 1], optional
        Instead of ``cascade_loss``: the share of each set's extraction time its cascade saves
        out of fold (each image's cost a fraction of the whole set's at its size), at the most
        accurate thresholds that do. A set whose cascade cannot save that much keeps its plain walk.
    cascade_per_class : bool, default False
        One confidence threshold per prefix and predicted class instead of one per prefix. It
        needs many training items per class: chosen from a few hundred, per-class thresholds
        fit the noise of the out-of-fold predictions.
    extrapolate : {"warn", "raise", "allow"}, default "warn"
        A prediction for an image outside the timed sizes: warn once, raise, or stay silent.
    scoring : str or callable, default "accuracy"
        The score maximised; its values must lie in ``[0, 1]``.
    cost_quantile : float in [0, 1] or "max", default 0.5
        The quantile of each feature's measured times its cost curve follows: the median by
        default, since serving measures the real clock and falls back or upgrades as features
        finish; ``"max"`` is the paper's worst-case provisioning.
    cost_degree : int, default 2
        Degree of the cost polynomials (non-negative coefficients).
    calibrate_costs : bool, default True
        Raise each curve by the overhead a request pays on top of the timing pass's primed CPU
        time (cold caches, wall clock), measured on the training extraction
        (:mod:`polydom.calibration`).
    cost_guard : float in [0.5, 1] or None, default 0.9
        The late-share tolerance, as ``1 - cost_guard``: anytime serving starts a feature only
        if the time used plus its predicted cost times this quantile of measured / predicted
        (over the training extraction, at the item's size) fits the budget, and only if the
        start raises the expected on-time accuracy (:mod:`polydom.index.anytime`, *what is at
        stake*); None: its predicted cost alone. A feature started at the edge of the budget
        overruns it with probability about ``1 - cost_guard`` (``docs/start-rule.md``).
    learn_guards : bool, default True
        Let serving replace the fit's guards by the same quantile as the median and upper
        quartile of the measured / predicted times of the features it computes predict (per
        feature and size band, once 20 calls were seen; before that, the calls of every feature
        in the band may raise a feature's guard): the machine that serves is not the one that
        was timed. A minority of preempted calls moves neither statistic; they lower the chance
        to finish, which the start rule weighs (:mod:`polydom.index.servingguards`).
    speculate : bool, default False
        Where the guards stop the anytime walk but the next feature's predicted cost still fits
        and would serve a more accurate set, compute it anyway on a worker thread and answer at
        the deadline with what was computed if it has not finished (it is left to finish
        unused). Replayed on the demo's recorded times it raised the on-time mean over cells by
        0.024-0.047 with no answer late. Served for real (``benchmarks/speculation.py``, one
        image after another on two cores) it is neither free nor exactly on time: the hand-off
        to the worker and the timed wait's wake-up cost tens of microseconds, and an abandoned
        computation shares the machine with the next requests. At 0.5 ms, on 300 held-out
        images each, it answered 6.0% (digits) and 2.0% (Fashion-MNIST) of them late where the
        walk without it answered 3.0% and 1.0% late, and its on-time accuracy was 0.803 and 0.617
        against 0.873 and 0.620 without; at 2 ms the on-time accuracy was the same with and
        without it (0.910 and 0.733). So it is opt-in. Read at prediction time; PolyDom indexes
        only (Greedy walks its own sequence).
    backend : str, default "polydom"
        A name from :func:`polydom.backends.buildable` (``"polydom"``, ``"greedy"``,
        ``"greedy-acc"``, ``"greedy-cost"``). The Greedy backends expand at ``n0`` = the median
        training item size and walk their sequence on the real clock when predicting.
    lambdas : sequence of float, optional
        The λ grid, for the backends that take one (``backend="greedy"``).
    timing_sides : sequence of int, optional
        Square sides to time the features at, on resized copies of the largest training images,
        beside the training extraction's own calls. ``None``: only the sides the training
        images lack (too few distinct sizes for ``cost_degree``, or neighbouring sizes more
        than 2x apart in side; never beyond the largest image), within a cap of a quarter of
        the extraction's compute time (``docs/timing-pass.md``).
    timing_repeats : int, default 5
        Calls per resized image at each timed side (with ``timing_images``; the cap may take
        fewer where the sides were not named).
    timing_images : int, default 8
        How many of the largest training images are resized and timed at each side.
    cache_dir : str or path, optional
        Cache feature matrices and trained feature sets here, keyed by fingerprints of the data,
        the features and the learner: a refit trains only the sets not trained before.
    warm_start : bool, default False
        Reuse the previous fit's feature matrix and measured costs when the images, features and
        timing parameters are unchanged: a refit with another ``alpha`` or ``backend`` only builds.
    n_jobs : int, optional
        Parallel feature extraction and training (joblib; ``-1``: all cores).
    random_state : int, optional
        Seeds the folds, the choice of timing images and every unset ``random_state`` of the
        learner: fits with the same seed give the same index and predictions.
    progress : bool, optional
        Progress bars (tqdm) for extraction, timing and training; ``None``: on a terminal only.

    Attributes
    ----------
    index_ : PolyDomIndex or GreedyIndex
        The index: ``index_.lookup(size, budget)``.
    classes_ : ndarray
    feature_names_ : tuple of str
        The index's feature order.
    feature_columns_ : dict of str to slice
        Each feature's column range in the feature matrix (a set's vector keeps this order).
    cost_fits_ : dict of str to CostFit
        Timings and fitted cost curve of each feature.
    cost_curves_ : dict of str to CostCurve
    n0_ : float
        Median training item size (the Greedy expansion size).
    timing_sides_ : tuple of int
        The square sides the costs were measured at.
    fit_stats_ : dict
        Seconds spent extracting, timing and building; ``expanded`` (sets the build used, ``{}``
        included), ``trained`` (in this fit) and ``reused`` (from the cache); ``features_cached``.
        How many sets of the lattice were trained fully, partly (screened only) or not at all is
        in ``index_.stats`` (``fully_trained``, ``partly_trained``, ``not_trained``).
    planner_ : polydom.serving.ServingPlanner
        Serves images from the version of ``index_`` served (per set: its features, model and
        lean predictor), with the guards serving learns.
    path_, version_ : str
        Set by :meth:`save` and :meth:`load`: the index directory and the published version.

    Notes
    -----
    *One version per request.* Every fitted attribute but ``index_`` is read from one immutable
    :class:`~polydom.servingstate.ServingState` -- the version served, its feature order and
    columns, ``classes_``, cost fits, the planner with its plans, learned guards and cascades --
    which a fit, :meth:`load`, :meth:`recost` or a refresh replaces whole, in one assignment.
    ``predict``, ``predict_proba``, ``explain`` and ``score`` read it once at their start, so
    each answers wholly from one version; predicting changes no attribute (the guards serving
    learns live in that state's planner, not in anything ``get_params`` or ``clone`` sees).

    *Refreshing.* A loaded classifier's ``index_.refresh()`` (or :meth:`refresh`) adopts the
    newest version at its path. The next request, or attribute read, rebuilds the serving state
    from that version's own saved classifier state -- a refit with its features in another order,
    a feature added or other classes is served as :meth:`load` would serve it -- or, where the
    version cannot be served (not saved by a classifier, damaged, a model refused), raises
    :class:`~polydom.classifier_state.ClassifierStateError` at every request until a servable
    version is adopted. The parameters stay this classifier's: ``budget`` and ``speculate`` still
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
    ...     features=["intensity_hist", "thumbnail"], cv=2, timing_images=2, timing_repeats=1,
    ...     random_state=0, progress=False).fit(images, labels, groups=groups)
    >>> clf.predict(images[:3], budget=0.005).shape    # 5 ms of feature extraction per image
    (3,)
    >>> clf.explain(images[:1], budget=0.0)[0].features  # no time: the majority-class model
    ()
    """

    _constraints = CONSTRAINTS  # declared in polydom.classifier_params, checked when fit starts

    def __init__(self, features=None, estimator=None, *, learners=None, budget=None, alpha=1.0, e="auto",
                 tolerance=0.0, scores="bounded", cv=5, cv_repeats=1, finalist_repeats=2, cascade=False, cascade_loss=0.0,
                 cascade_price=None, cascade_relative_price=None, cascade_mean_cost=None, cascade_saving=None, cascade_per_class=False, extrapolate="warn", scoring="accuracy", cost_quantile=0.5, cost_degree=2,
                 calibrate_costs=True, cost_guard=0.9, learn_guards=True, speculate=False, backend="polydom",
                 lambdas=None, timing_sides=None, timing_repeats=5, timing_images=8, cache_dir=None,
                 warm_start=False, n_jobs=None, random_state=None, progress=None):
        self.features = features
        self.estimator = estimator
        self.learners = learners
        self.budget = budget
        self.alpha = alpha
        self.e = e
        self.tolerance = tolerance
        self.scores = scores
        self.cv = cv
        self.cv_repeats = cv_repeats
        self.finalist_repeats = finalist_repeats
        self.cascade = cascade
        self.cascade_loss = cascade_loss
        self.cascade_price = cascade_price
        self.cascade_relative_price = cascade_relative_price
        self.cascade_mean_cost = cascade_mean_cost
        self.cascade_saving = cascade_saving
        self.cascade_per_class = cascade_per_class
        self.extrapolate = extrapolate
        self.scoring = scoring
        self.cost_quantile = cost_quantile
        self.cost_degree = cost_degree
        self.calibrate_costs = calibrate_costs
        self.cost_guard = cost_guard
        self.learn_guards = learn_guards
        self.speculate = speculate
        self.backend = backend
        self.lambdas = lambdas
        self.timing_sides = timing_sides
        self.timing_repeats = timing_repeats
        self.timing_images = timing_images
        self.cache_dir = cache_dir
        self.warm_start = warm_start
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.progress = progress

    def _check_params(self) -> None:
        """The constraint table, then the rules that relate two parameters."""
        check_params(self.get_params(deep=False), self._constraints)

    def fit(self, images, y, *, groups=None):
        """Measure costs, train the feature sets the lattice explores, and build the index.

        Parameters
        ----------
        images : sequence of array_like
            Training images: ``(H, W)``, ``(H, W, 3)`` or ``(H, W, 4)`` arrays of dtype bool,
            uint8, uint16 or float in ``[0, 1]``, at least 8 pixels a side; sizes may differ.
        y : array_like of shape (n_images,)
            Class labels.
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
        images = check_images(images, purpose="training image is required")
        y = check_labels(y, len(images))
        groups = check_groups(groups, len(images))
        settings = FitSettings.from_params(self.get_params(deep=False))
        result = run_fit(images, y, groups, settings, getattr(self, "_reusable", None) if self.warm_start else None)
        state = ServingState.build(
            result.index, features={f.name: f for f in result.features}, classes=result.classes,
            columns=result.columns, cost_fits=result.fits, n0=result.n0, timing_sides=result.timing_sides,
            fit_stats=result.stats, cascade=result.cascade,
        )
        self._adopt_state(result.index, state)
        self._reusable = result.warm if self.warm_start else None  # what the next warm fit may skip
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
    def load(cls, path, *, trusted=None) -> "CostSensitiveClassifier":
        """Open a classifier saved with :meth:`save`.

        Parameters
        ----------
        path : str or os.PathLike
        trusted : iterable of str or type, optional
            Model types to trust beyond polydom's list (see :func:`polydom.load`).

        Raises
        ------
        ValueError
            The index at ``path`` was not saved by a ``CostSensitiveClassifier``; otherwise as
            :func:`polydom.load`.
        """
        return load_classifier(cls, path, trusted)

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
        index moved to a new version (:func:`polydom.servingstate.follow`).

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
            state = follow(self, state_from_version, ClassifierStateError)
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
            Default: ``timing_repeats``.

        Returns
        -------
        self
        """
        state = self._state()  # NotFittedError before fit; one version throughout
        images = check_images(images, purpose="image is required to time the features")
        sides = tuple(state.timing_sides if sides is None else sides)
        repeats = self.timing_repeats if repeats is None else repeats
        check_param("repeats", repeats, [Integer(low=1)])
        fits = measure_feature_costs(list(state.planner.features.values()), images, sides, repeats=repeats,
                                     quantile=self.cost_quantile, degree=self.cost_degree, progress=self.progress)
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
            return state, state.planner, images, budgets, {"speculate": bool(self.speculate)}
        if budget is not None:
            raise ValueError("give budget (seconds per image) or total_budget (seconds for the batch), not both")
        return state, BatchServer(state.planner), images, total_budget, {}

    def predict(self, images, budget=None, *, total_budget=None) -> np.ndarray:
        """Predict each image's class within its budget, computing only the chosen features.

        Parameters
        ----------
        images : sequence of array_like
        budget : float or array_like of shape (n_images,), optional
            Seconds of feature extraction allowed per image; default the ``budget`` parameter
            (``None``: no limit).
        total_budget : float, optional
            Seconds for the whole batch instead (not with ``budget``; the ``budget`` parameter
            does not apply): planned before any feature is computed, then re-planned with the time
            left as images are served (:mod:`polydom.batchserving`).

        Returns
        -------
        ndarray of shape (n_images,)
        """
        state, server, images, budgets, options = self._request(images, budget, total_budget)
        return server.predict(images, budgets, state.classes.dtype, **options)

    @available_if(estimator_has("predict_proba"))
    def predict_proba(self, images, budget=None, *, total_budget=None) -> np.ndarray:
        """Class probabilities of each image within its budget, or of the batch within ``total_budget``
        (as :meth:`predict`); columns follow ``classes_``.

        Available when the learner has ``predict_proba`` (the default hinge-loss SGD has not).
        """
        state, server, images, budgets, options = self._request(images, budget, total_budget)
        return server.predict_proba(images, budgets, state.classes, **options)

    def explain(self, images, budget=None, *, total_budget=None) -> list[Explanation]:
        """Predict as :meth:`predict` does; per image, an :class:`Explanation` of what was computed
        and how long it took. With ``total_budget``, a list that also carries the batch's realised
        spend (``.summary``, a :class:`~polydom.batchserving.BatchSpend`) and its first ``.plan``."""
        _, server, images, budgets, options = self._request(images, budget, total_budget)
        return server.explain(images, budgets, **options)

    def score(self, images, y, sample_weight=None, budget=None, *, total_budget=None) -> float:
        """Accuracy of :meth:`predict` on ``images`` within ``budget`` (or ``total_budget``)."""
        from sklearn.metrics import accuracy_score

        y = np.asarray(y)
        if y.ndim != 1 or len(y) != len(images):
            raise ValueError(f"y must hold one label per image ({len(images)}), got shape {y.shape}")
        predicted = self.predict(images, budget=budget, total_budget=total_budget)
        return float(accuracy_score(y, predicted, sample_weight=sample_weight))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False  # a sequence of images, not a feature matrix
        return tags
