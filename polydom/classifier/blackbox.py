"""The black box on the real path: cross-validated score and a final model for any feature set.

The feature matrix is computed once per item for all features; a feature set's columns are the
concatenation of its features' column ranges, in feature order, so training a set never computes
a feature again. Every set is scored on the same folds (paired comparisons: the lattice compares
sets with each other), then refitted on all the training rows to give the model a lookup returns.
The empty set is a majority-class :class:`~sklearn.dummy.DummyClassifier`, scored the same way.

Several learners may be given: each set gets the best of them. They race: all are scored on the
first fold, those clearly behind the leader there (by more than one binomial standard error of
a fold's accuracy) stop, and only the rest are scored on the remaining folds -- so training time
grows with the learners that are close, not with the length of the list. Each set's score comes
with a standard error (the corrected resampled-t variance of Nadeau and Bengio, which accounts for
the overlap of cross-validation training sets), so the index can tell real differences from noise.

*Screening* (``screen_splits``, what the classifier's PolyDom builds use): a set is first scored
on a cheap whole draw -- a 2-fold split, every item scored once by a model trained on half the
items -- with every learner, and the best of them wins the set; nothing is refitted. Only the sets
the index could serve are then *finished* (:meth:`FeatureSetLearner.finish`): the winner scored on
the full folds and refitted on every row. This is DAUB's allocation (train on a part of the data,
stop a candidate whose upper bound cannot reach the best) applied to the cost-accuracy skyline:
:func:`polydom.index.build.build_polydom` finishes a set only while its bound could put it on
the skyline.

The matrices are small: fits run with one thread in the BLAS and OpenMP pools of each process
(:attr:`FeatureSetLearner.LIBRARY_THREADS`), and parallelism comes from ``n_jobs``, over sets
and folds (``docs/decisions/library-threads.md``).

A build fits a learner thousands of times; one that warns (a ``ConvergenceWarning``) would print
the same lines for every fit. Fits run under a :class:`WarningTally`, which counts the warnings
by category and message instead, and the build reports them once (:class:`LearnerWarning`).
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from polydom.index.values import Expansion

from .fastlda import fold_predictions, is_default_lda
from .learners import as_learners, default_estimator, default_learners, make_splits, standard_error, without_fit_only_state
from .warntally import CountingExpand, LearnerWarning, WarningTally
from .errors import ScoringError  # noqa: F401 - defined with the package's errors

__all__ = [
    "ScoringError", "FeatureSetLearner", "as_learners", "default_estimator", "default_learners", "make_splits", "standard_error",
    "LearnerWarning", "WarningTally", "CountingExpand",
]


_found_pools: dict = {"modules": -1, "controller": None}


def _thread_pools():
    """This process's BLAS and OpenMP pools (threadpoolctl, installed with scikit-learn). Looking
    them up costs about 2 ms and limiting found ones some microseconds, so they are looked up
    again only when a module was imported since the last look (an extension module can bring a
    library of its own)."""
    from threadpoolctl import ThreadpoolController

    if _found_pools["modules"] != len(sys.modules):
        _found_pools.update(controller=ThreadpoolController(), modules=len(sys.modules))
    return _found_pools["controller"]


def _fit(model, Xs: np.ndarray, y: np.ndarray, train, test, fast_accuracy: bool, scorer):
    """Fit a clone of ``model`` on the ``train`` rows of ``Xs``; its score on ``test`` (the model,
    fitted on every row, when ``test`` is None), with the keys of the warnings the fit raised
    (:class:`WarningTally`). ``fast_accuracy``: plain accuracy, the default LDA's fold scores
    from :mod:`~polydom.classifier.fastlda`."""
    from sklearn.base import clone

    if test is not None and fast_accuracy and is_default_lda(model):
        # The same predictions as the pipeline's, without its per-fit overhead (fastlda).
        predicted = fold_predictions(Xs[train], y[train], Xs[test])
        if predicted is not None:
            return float(np.mean(predicted == y[test])), []
    caught: list = []
    with WarningTally().catching(caught):
        model = clone(model)
        if train is None:  # the set's model, kept in the fit cache and the index
            return without_fit_only_state(model.fit(Xs, y)), caught
        model.fit(Xs[train], y[train])
        if fast_accuracy:  # accuracy_score's value without its checks of the targets
            return float(np.mean(model.predict(Xs[test]) == y[test])), caught
        return float(scorer(model, Xs[test], y[test])), caught


def _fit_in_a_row(Xs: np.ndarray, y: np.ndarray, fits, fast_accuracy: bool, scorer, threads: int | None) -> list:
    """:func:`_fit` for each ``(model, train, test)`` of one set, in order, the pools held to
    ``threads`` (a worker's job)."""
    with _pools_held_to(threads):
        return [_fit(model, Xs, y, train, test, fast_accuracy, scorer) for model, train, test in fits]


def _pools_held_to(threads: int | None):
    """A context holding this process's BLAS and OpenMP pools to ``threads`` (None: as they
    are), on the process's main thread only.

    Threads of a threading engine fit as the pools are set: a BLAS library's threads are set for
    the whole process, so limits saved and restored by batches running at once would leave the
    process limited or not depending on who finished last (and OpenBLAS 0.3.30 did not take a
    limit set from another thread once the main thread had set one).
    """
    if threads is None or threading.current_thread() is not threading.main_thread():
        return contextlib.nullcontext()
    return _thread_pools().limit(limits=threads)


class FeatureSetLearner:
    """Train and score the best of several learners per feature set over a precomputed matrix.

    Called as ``learner(frozenset_of_names) -> Expansion(accuracy, model, std_error)``: the
    mean cross-validated score of the best learner for the set, its corrected standard error
    (:func:`standard_error`), and that learner refitted on all rows. Results are cached by set,
    so asking twice trains once.

    Parameters
    ----------
    X : ndarray of shape (n_items, n_columns)
        Every feature of every training item.
    y : array of shape (n_items,) or (n_items, n_labels)
        Class labels, or a multilabel indicator matrix (with per-label learners and scoring).
    columns : mapping of str to slice
        Each feature's column range in ``X``, in feature order.
    estimator : classifier, list of classifiers or of (name, classifier), or None
        The learners (see :func:`as_learners`; None: :func:`default_learners`). Cloned for
        every fit; never fitted themselves.
    splits : list of (train, test) index arrays
        From :func:`make_splits`; every set and learner is scored on the same folds.
    scoring : str or callable, default "accuracy"
        A scikit-learn scorer name or ``scorer(estimator, X, y)``; its values must lie in
        ``[0, 1]`` (accuracy, balanced accuracy, F1, ...).
    n_jobs : int, optional
        The sets of a batch are fitted in parallel through joblib, one job per set (the caller's
        ``joblib.parallel_config`` chooses the engine). Leave it ``None`` when the lattice
        already trains sets in parallel.
    rescore_splits : list of (train, test) index arrays, optional
        More folds for :meth:`rescore` (the finalists' second opinion), e.g. further repeats
        from :func:`make_splits`. Without them :meth:`rescore` returns the cached results.
    screen_splits : list of (train, test) index arrays, optional
        A cheap draw (e.g. :func:`make_splits` with ``cv=2``) to *screen* sets on: a call then
        returns the screening score, standard error and no model, and :meth:`finish` trains
        the sets that need it on ``splits``. None: every call trains fully.
    finish_jobs : int, optional
        Parallel fits within :meth:`finish` (joblib), whose sets come in batches from the
        building process rather than from the lattice's workers.
    empty_model : classifier, optional
        The empty set's model (unfitted); default a majority-class ``DummyClassifier``. A
        multilabel fit gives one answering each label by its prior
        (:func:`polydom.classifier.multilabel.empty_set_model`).

    Attributes
    ----------
    learners : list of (str, estimator)
    cache : dict of frozenset to Expansion
    chosen : dict of frozenset to str
        The learner that won each set.
    fold_scores : dict of frozenset to ndarray
        The winner's score on every fold.
    fits : int
        Sets trained (cache misses), the empty set included.
    screens : bool
        Whether calls screen (``screen_splits`` given).
    finished : set of frozenset
        Sets trained on the full folds (every set, without screening).
    race : dict
        ``started`` (learner-set pairs scored on the first fold), ``dropped`` (pairs stopped
        there as clearly worse), ``contested`` and ``wins`` (sets decided among several learners,
        and who won them) and ``retired`` (learners that stopped entering; see
        :meth:`_retire_losers`).
    warnings : WarningTally
        What the fits warned, counted instead of printed, worker processes' fits included.
    """

    def __init__(
        self,
        X: np.ndarray,
        y: np.ndarray,
        columns: Mapping[str, slice],
        estimator,
        splits: Sequence[tuple[np.ndarray, np.ndarray]],
        *,
        scoring="accuracy",
        n_jobs: int | None = None,
        rescore_splits: Sequence[tuple[np.ndarray, np.ndarray]] = (),
        screen_splits: Sequence[tuple[np.ndarray, np.ndarray]] | None = None,
        finish_jobs: int | None = None,
        empty_model=None,
    ):
        from sklearn.metrics import check_scoring

        self.X = X
        self.y = np.asarray(y)
        self.columns = dict(columns)
        self.estimator = estimator
        self.learners = as_learners(estimator)
        self.splits = list(splits)
        self.scoring = scoring
        self._scorer = check_scoring(self.learners[0][1], scoring=scoring)
        # Fold scores of the default LDA come from fastlda where the score is plain accuracy.
        self._fast_accuracy = self.FAST_LDA and scoring in (None, "accuracy") and self.y.ndim == 1
        self.n_jobs = n_jobs
        self.cache: dict[frozenset, Expansion] = {}
        self.chosen: dict[frozenset, str] = {}
        self.fold_scores: dict[frozenset, np.ndarray] = {}
        self.fits = 0
        self.race = {"started": 0, "dropped": 0, "contested": 0, "wins": {}, "retired": []}
        self.rescore_splits = list(rescore_splits)
        self.rescored: set[frozenset] = set()
        self.screen_splits = None if screen_splits is None else list(screen_splits)
        self.finish_jobs = finish_jobs
        self.empty_model = empty_model
        self.finished: set[frozenset] = set()
        self._oof: dict = {}  # set (or set and folds) -> (proba, classes, the fold models behind them)
        self.warnings = WarningTally()
        self._set_warnings: dict[frozenset, list] = {}
        sizes = [(len(tr), len(te)) for tr, te in self.splits]
        self._test_fraction = float(np.mean([te / (tr + te) for tr, te in sizes]))
        # Items a pass over the folds scores (the floor of every standard error, learners.standard_error).
        self._n_items = int(round(np.mean([tr + te for tr, te in sizes])))

    # ------------------------------------------------------------------ black box

    def __call__(self, features: Iterable[str]) -> Expansion:
        """Accuracy, standard error and model of one set (trained on first request)."""
        return self.many([frozenset(features)])[0]

    def many(self, sets: Sequence[Iterable[str]]) -> list[Expansion]:
        """Results for several sets; uncached ones are trained as one parallel batch."""
        sets = [frozenset(s) for s in sets]
        todo = [s for s in dict.fromkeys(sets) if s not in self.cache]
        if todo:
            self._train(todo)
        return [self.cache[s] for s in sets]

    def __getstate__(self) -> dict:
        """What a worker process needs: the data, folds and learners, and the race so far -- not
        the results gathered here (their models would be shipped with every batch).

        Taken while this process may still be remembering results of earlier batches (joblib
        pickles tasks on a thread of its own), so every mutable part is copied first; copying a
        dict or a list is atomic in CPython.
        """
        state = self.__dict__.copy()
        race = dict(self.race)
        race["wins"], race["retired"] = dict(race["wins"]), list(race["retired"])
        state.update(cache={}, chosen={}, fold_scores={}, _oof={}, rescored=set(), finished=set(), race=race,
                     warnings=WarningTally(), _set_warnings={})
        return state

    def remember(self, features: Iterable[str], result: Expansion) -> None:
        """Take back a set trained by a copy of this learner in another process (or read from an
        expansion cache): its result, and -- when the copy reported them -- its winning learner
        and fold scores, which also count in the race (so retirement carries across batches)."""
        features = frozenset(features)
        if features in self.cache:
            return
        self.cache[features] = result
        info = result.info if isinstance(result.info, dict) else {}
        self.warnings.add(info.get("warnings", ()))
        if "learner" in info:
            self.chosen[features] = info["learner"]
            if info.get("stage") != "screened":
                self.fold_scores[features] = np.asarray(info["folds"], dtype=float)
                self.finished.add(features)
            if features and info.get("contested"):
                self.race["contested"] += 1
                self.race["wins"][info["learner"]] = self.race["wins"].get(info["learner"], 0) + 1
                self._retire_losers()

    @property
    def screens(self) -> bool:
        """Whether a call screens a set rather than training it fully."""
        return self.screen_splits is not None

    def _known(self, features: frozenset) -> bool:
        """Whether the winner and full fold scores of a cached set are known here."""
        return features in self.chosen and (not features or features in self.fold_scores)

    def finish(self, sets: Sequence[Iterable[str]]) -> list[Expansion]:
        """Train screened sets fully: their winning learner on the full folds, refitted on every row.

        A set not screened in this process (trained by a worker, read from an expansion cache)
        is screened here first, for its winner. Finished sets are returned as they are.
        """
        sets = [frozenset(s) for s in sets]
        todo = [s for s in dict.fromkeys(sets) if s not in self.finished]
        unknown = [s for s in todo if s not in self.chosen]
        if unknown:
            self._screen(unknown)
        if todo:
            scores, models = self._score_winners(todo, self.splits, refit=True, n_jobs=self.finish_jobs)
            for s in todo:
                model = models[s]
                info = {"learner": self.chosen[s], "folds": scores[s].tolist(), "stage": "finished",
                        "warnings": self._set_warnings.pop(s, [])}
                self.cache[s] = Expansion(float(scores[s].mean()), model,
                                          standard_error(scores[s], self._test_fraction, self._n_items), info)
                self.fold_scores[s] = scores[s]
                self.finished.add(s)
            self.fits += len(todo)
        return [self.cache[s] for s in sets]

    def _score_winners(self, todo: list[frozenset], splits, *, refit: bool = False, n_jobs: int | None = None):
        """Each set's winning learner scored on ``splits`` and, with ``refit``, fitted on every
        row: ``({set: fold scores}, {set: model})`` (no models without ``refit``)."""
        sliced = {s: self.X[:, self.columns_of(s)] for s in todo}
        chosen = {s: self._learner(s) for s in todo}
        tasks = [(s, chosen[s], tr, te) for s in todo for tr, te in splits]
        if refit:
            tasks += [(s, chosen[s], None, None) for s in todo]
        done = iter(self._run(tasks, sliced, n_jobs=n_jobs))
        scores = {s: np.array([next(done) for _ in splits]) for s in todo}
        return scores, ({s: next(done) for s in todo} if refit else {})

    def rescore(self, sets: Sequence[Iterable[str]]) -> list[Expansion]:
        """Score sets again on :attr:`rescore_splits` with the learner each already won with.

        The new fold scores join the old ones, so the mean and its standard error rest on more
        folds. Meant for the finalists -- the sets an index can serve -- whose maximal scores
        are the most optimistic of all (the winner's curse); each set is rescored once. The
        model is kept: it was fitted on every row already.
        """
        sets = [frozenset(s) for s in sets]
        self._learn_unknown(sets)
        todo = [s for s in dict.fromkeys(sets) if s not in self.rescored and s and self.rescore_splits]
        if todo:
            # On the finishing workers: the finalists are rescored in this process, after the search.
            extra, _ = self._score_winners(todo, self.rescore_splits, n_jobs=self.finish_jobs)
            for s in todo:
                folds = np.concatenate([self.fold_scores[s], extra[s]])
                old = self.cache[s]
                self.cache[s] = Expansion(float(folds.mean()), old.model, standard_error(folds, self._test_fraction, self._n_items))
                self.fold_scores[s] = folds
                self.rescored.add(s)
                self._set_warnings.pop(s, None)  # counted in self.warnings; the set's info is out already
        return [self.cache[s] for s in sets]

    def oof_proba(self, features: Iterable[str], splits=None) -> tuple[np.ndarray, np.ndarray] | None:
        """Out-of-fold class probabilities of a set's winning learner, for every training item.

        Uses the first folds that cover every item once (the first repeat of the scoring folds,
        or of ``splits`` when given), so each item's probabilities come from a model that never
        saw it. ``(proba, classes)`` with ``proba`` of shape ``(n_items, n_classes)`` over
        ``classes`` (sorted labels); None when the learner has no ``predict_proba``.
        """
        from sklearn.base import clone

        features = frozenset(features)
        key = self._oof_key(features, splits)
        if key in self._oof:
            return self._oof[key][:2]
        self._learn_unknown([features])
        model = self._learner(features)
        if not hasattr(model, "predict_proba"):
            return None
        classes = np.unique(self.y)
        proba = np.full((len(self.y), len(classes)), np.nan)
        Xs = self.X[:, self.columns_of(features)]
        fold_models = []
        for train, test in self.splits if splits is None else splits:
            if not np.isnan(proba[test, 0]).any():
                continue  # covered by an earlier fold: a later repeat
            with self.warnings.catching(), _pools_held_to(self.LIBRARY_THREADS):
                fitted = clone(model).fit(Xs[train], self.y[train])
            fold_models.append(fitted)
            cols = np.searchsorted(classes, fitted.classes_)
            block = np.zeros((len(test), len(classes)))
            block[:, cols] = fitted.predict_proba(Xs[test])
            proba[test] = block
        if np.isnan(proba[:, 0]).any():
            raise ValueError("the cross-validation folds do not cover every item; out-of-fold probabilities need them to")
        self._oof[key] = proba, classes, fold_models
        return proba, classes

    def fold_models(self, features: Iterable[str], splits=None) -> list:
        """The fitted models behind :meth:`oof_proba` (one per fold it used), fitting them if
        needed; empty when the learner has no ``predict_proba``."""
        if self.oof_proba(features, splits) is None:
            return []
        return list(self._oof[self._oof_key(features, splits)][2])

    @staticmethod
    def _oof_key(features: Iterable[str], splits):
        features = frozenset(features)
        return features if splits is None else (features, tuple(test.tobytes() for _, test in splits))

    def _learn_unknown(self, sets: list[frozenset]) -> None:
        """Train here the sets whose winner or fold scores are not known in this process (those
        read from an expansion cache), keeping the result that was already reported."""
        unknown = [s for s in dict.fromkeys(sets) if not self._known(s)]
        if unknown:
            kept = {s: self.cache.pop(s) for s in unknown if s in self.cache}
            if self.screens:
                self.finished.difference_update(unknown)
                self.chosen = {s: name for s, name in self.chosen.items() if s not in unknown}
                self.finish(unknown)
            else:
                self._train(unknown)
            for s, result in kept.items():
                self.cache[s] = result

    def columns_of(self, features: Iterable[str]) -> np.ndarray:
        """Column indices of a set: its features' ranges concatenated in feature order."""
        features = frozenset(features)
        unknown = features - self.columns.keys()
        if unknown:
            raise ValueError(f"unknown features {sorted(unknown)}; known: {list(self.columns)}")
        ranges = [np.arange(sl.start, sl.stop) for name, sl in self.columns.items() if name in features]
        return np.concatenate(ranges) if ranges else np.zeros(0, dtype=np.intp)

    # ------------------------------------------------------------------ training

    #: Whether, when the score is plain accuracy, fold scores of the default LDA learner come from
    #: :func:`polydom.classifier.fastlda.fold_predictions` (the same predictions, without scikit-learn's
    #: per-fit overhead) and every learner's accuracy is counted from its predictions, without the scorer's
    #: checks of the targets (the same value); off, every fold fits and scores through scikit-learn.
    FAST_LDA = True
    #: Threads of the BLAS and OpenMP pools while a set's models are fitted (None: the libraries'
    #: own, one per core). The matrices are small: on 2 cores a default fit took 2.1 to 2.7 times
    #: as long with two threads, 4.3 times with the cores busy (``docs/decisions/library-threads.md``).
    LIBRARY_THREADS: int | None = 1
    #: Sets decided with the full field before a learner that keeps losing may retire.
    RETIRE_AFTER = 12
    #: The share of those sets a learner must win to stay in the race.
    RETIRE_BELOW = 0.1

    def _empty(self):
        """The empty set's (unfitted) model."""
        from sklearn.dummy import DummyClassifier

        return DummyClassifier(strategy="most_frequent") if self.empty_model is None else self.empty_model

    def _candidates(self, features: frozenset) -> list[tuple[str, object]]:
        if not features:
            return [("prior", self._empty())]
        return [(name, est) for name, est in self.learners if name not in self.race["retired"]]

    def _learner(self, features: frozenset):
        """The (unfitted) learner that won ``features``, retired or not."""
        if not features:
            return self._empty()
        return dict(self.learners)[self.chosen[features]]

    def _retire_losers(self) -> None:
        """Retire learners that won fewer than :attr:`RETIRE_BELOW` of the first contested sets.

        Learners keep their rank across feature sets of one problem more often than not, so a
        learner that almost never wins the first :attr:`RETIRE_AFTER` sets is not worth a fold on
        every later one. Sets are trained in a fixed order, so retirement is deterministic.
        """
        contested = self.race["contested"]
        if contested < self.RETIRE_AFTER or len(self.learners) - len(self.race["retired"]) < 2:
            return
        for name, _ in self.learners:
            if self.race["wins"].get(name, 0) < self.RETIRE_BELOW * contested and name not in self.race["retired"]:
                if len(self.learners) - len(self.race["retired"]) > 1:
                    self.race["retired"].append(name)

    def _run(self, tasks: list[tuple], sliced: dict, n_jobs: int | None = None) -> list:
        """``tasks`` of ``(set, estimator, train, test)`` through :func:`_fit`, each set's in a
        row (:func:`_fit_in_a_row`), results in the tasks' order; the warnings of each fit are
        counted for this learner and for its set. ``n_jobs``: instead of :attr:`n_jobs`."""
        n_jobs = self.n_jobs if n_jobs is None else n_jobs
        # One job per set: on a worker the set's columns travel once, and the learner (the whole
        # matrix) not at all; each process holds its own pools to LIBRARY_THREADS.
        jobs: dict = {}
        for at, (s, est, tr, te) in enumerate(tasks):
            jobs.setdefault(s, []).append((at, est, tr, te))
        work = [(sliced[s], self.y, [fit[1:] for fit in fits], self._fast_accuracy, self._scorer, self.LIBRARY_THREADS)
                for s, fits in jobs.items()]
        if n_jobs in (None, 1) or len(tasks) < 2:
            results = [_fit_in_a_row(*job) for job in work]
        else:
            from joblib import Parallel, delayed

            results = Parallel(n_jobs=n_jobs)(delayed(_fit_in_a_row)(*job) for job in work)
        done = [None] * len(tasks)
        for fits, outs in zip(jobs.values(), results):
            for (at, *_), out in zip(fits, outs):
                done[at] = out
        for (s, *_), (_, caught) in zip(tasks, done):
            if caught:
                counts = [(category, message, 1) for category, message in caught]
                self.warnings.add(counts)
                self._set_warnings.setdefault(s, []).extend(counts)
        return [value for value, _ in done]

    def _screen(self, todo: list[frozenset]) -> None:
        """Score every learner on the whole screening draw; the best wins the set (no refit)."""
        sliced = {s: self.X[:, self.columns_of(s)] for s in todo}
        entrants = [(s, name, est) for s in todo for name, est in self._candidates(s)]
        tasks = [(s, est, tr, te) for s, _, est in entrants for tr, te in self.screen_splits]
        done = iter(self._run(tasks, sliced))
        scores = {(s, name): np.array([next(done) for _ in self.screen_splits]) for s, name, _ in entrants}
        n_items = int(sum(len(te) for _, te in self.screen_splits))
        for s in todo:
            ranked = [(float(scores[(s, name)].mean()), -i, name) for i, (t, name, _) in enumerate(entrants) if t == s]
            mean, _, name = max(ranked)
            self._check_score(s, mean)
            contested = bool(s) and len(ranked) > 1
            if contested:
                self.race["started"] += len(ranked)
                self.race["contested"] += 1
                self.race["wins"][name] = self.race["wins"].get(name, 0) + 1
            folds = scores[(s, name)]
            info = {"learner": name, "folds": folds.tolist(), "contested": contested, "stage": "screened",
                    "warnings": self._set_warnings.pop(s, [])}
            # Each item is scored once on a whole draw: the floor is the binomial error on all of them.
            self.cache[s] = Expansion(mean, None, standard_error(folds, 0.5, n_items), info)
            self.chosen[s] = name
        self._retire_losers()
        self.fits += len(todo)

    def _check_score(self, s: frozenset, mean: float) -> None:
        if not (math.isfinite(mean) and 0.0 <= mean <= 1.0):
            raise ScoringError(
                f"scoring={self.scoring!r} gave {mean!r} for features {sorted(s)}; polydom maximises "
                f"a score in [0, 1] -- use accuracy, balanced_accuracy, f1_macro or similar"
            )

    def _train(self, todo: list[frozenset]) -> None:
        if self.screens:
            self._screen(todo)
            return
        sliced = {s: self.X[:, self.columns_of(s)] for s in todo}
        first, rest = self.splits[0], self.splits[1:]
        entrants = [(s, name, est) for s in todo for name, est in self._candidates(s)]
        # Round 1: every learner on the first fold.
        opening = self._run([(s, est, *first) for s, _, est in entrants], sliced)
        scores: dict[tuple, list[float]] = {(s, name): [v] for (s, name, _), v in zip(entrants, opening)}
        survivors = []
        for s in todo:
            field = [(name, est) for t, name, est in entrants if t == s]
            lead = max(scores[(s, name)][0] for name, _ in field)
            # One binomial standard error of one fold's accuracy at the leader's level: a learner
            # further behind than the noise of a single fold is not worth the remaining folds.
            margin = math.sqrt(max(lead * (1.0 - lead), 1e-4) / max(len(first[1]), 1))
            kept = [(name, est) for name, est in field if scores[(s, name)][0] >= lead - margin]
            if len(field) > 1:
                self.race["started"] += len(field)
                self.race["dropped"] += len(field) - len(kept)
            survivors += [(s, name, est) for name, est in kept]
        # Round 2: the survivors on the remaining folds.
        tasks = [(s, est, tr, te) for s, _, est in survivors for tr, te in rest]
        later = iter(self._run(tasks, sliced))
        for s, name, _ in survivors:
            scores[(s, name)] += [next(later) for _ in rest]
        winners, contested = {}, {}
        for s in todo:
            ranked = [(float(np.mean(scores[(s, name)])), -i, name, est)
                      for i, (t, name, est) in enumerate(survivors) if t == s]
            mean, _, name, est = max(ranked, key=lambda r: r[:2])
            contested[s] = bool(s) and len(self.learners) - len(self.race["retired"]) > 1
            if contested[s]:
                self.race["contested"] += 1
                self.race["wins"][name] = self.race["wins"].get(name, 0) + 1
            self._check_score(s, mean)
            winners[s] = (mean, name, est)
        self._retire_losers()
        # The winner of each set, refitted on every row, is the model a lookup returns.
        models = self._run([(s, winners[s][2], None, None) for s in todo], sliced)
        for s, model in zip(todo, models):
            mean, name, _ = winners[s]
            folds = np.asarray(scores[(s, name)])
            # The set's warnings travel with it, so a build training in worker processes can
            # count them in the building process (remember).
            info = {"learner": name, "folds": folds.tolist(), "contested": contested[s],
                    "warnings": self._set_warnings.pop(s, [])}
            self.cache[s] = Expansion(mean, model, standard_error(folds, self._test_fraction, self._n_items), info)
            self.chosen[s] = name
            self.fold_scores[s] = folds
            self.finished.add(s)
        self.fits += len(todo)

    def __repr__(self) -> str:
        return (
            f"<FeatureSetLearner {len(self.columns)} features, {len(self.y)} items, "
            f"{len(self.learners)} learners, {self.fits} sets trained>"
        )
