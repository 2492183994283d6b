"""The black box on the real path: cross-validated score and a final model for any feature set.

The feature matrix is computed once per item for all features; a feature set's columns are the
concatenation of its features' column ranges, in feature order, so training a set never computes
a feature again. Every set is scored on the same folds (paired comparisons: the lattice compares
sets with each other), then refitted on all the training rows to give the model a lookup returns.
The empty set is a majority-class :class:`~sklearn.dummy.DummyClassifier`, scored the same way.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from polydom.index.values import Expansion

__all__ = ["FeatureSetLearner", "default_estimator", "make_splits"]


def default_estimator(random_state=None):
    """The paper's learner: standard scaling, then a linear SVM trained by SGD with an L1 penalty.

    ``make_pipeline(StandardScaler(), SGDClassifier(loss="hinge", penalty="l1",
    random_state=random_state))``.
    """
    from sklearn.linear_model import SGDClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), SGDClassifier(loss="hinge", penalty="l1", random_state=random_state))


def make_splits(cv, y, groups=None, random_state=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """The train/test folds every feature set is scored on.

    Parameters
    ----------
    cv : int or cross-validation splitter
        An int ``k >= 2`` gives stratified k-fold, grouped (``StratifiedGroupKFold``) when
        ``groups`` is given so that renderings of one picture never straddle a fold, shuffled
        when ``random_state`` is given. A splitter is used as is (``split(X, y, groups)``).
    y : array of shape (n,)
    groups : array of shape (n,), optional
    random_state : int, optional

    Returns
    -------
    list of (train_indices, test_indices)
    """
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold, check_cv

    dummy_x = np.zeros((len(y), 1))
    if isinstance(cv, numbers.Integral) and not isinstance(cv, bool):
        if cv < 2:
            raise ValueError(f"cv must be >= 2 folds, got {cv}")
        shuffle = random_state is not None
        if groups is not None:
            splitter = StratifiedGroupKFold(int(cv), shuffle=shuffle, random_state=random_state if shuffle else None)
        else:
            splitter = StratifiedKFold(int(cv), shuffle=shuffle, random_state=random_state if shuffle else None)
    else:
        splitter = check_cv(cv, y, classifier=True)
    splits = [(np.asarray(tr), np.asarray(te)) for tr, te in splitter.split(dummy_x, y, groups)]
    if not splits:
        raise ValueError(f"the cross-validation splitter {cv!r} produced no folds")
    return splits


class FeatureSetLearner:
    """Train and score one model per feature set over a precomputed feature matrix.

    Called as ``learner(frozenset_of_names) -> Expansion(accuracy, model)``: the mean
    cross-validated score over the folds, and the estimator refitted on all rows. Results are
    cached by set, so asking twice trains once; :attr:`fits` counts the sets actually trained.

    Parameters
    ----------
    X : ndarray of shape (n_items, n_columns)
        Every feature of every training item.
    y : array of shape (n_items,)
    columns : mapping of str to slice
        Each feature's column range in ``X``, in feature order.
    estimator : scikit-learn classifier
        Cloned for every fit; never fitted itself.
    splits : list of (train, test) index arrays
        From :func:`make_splits`.
    scoring : str or callable, default "accuracy"
        A scikit-learn scorer name or ``scorer(estimator, X, y)``; its values must lie in
        ``[0, 1]`` (accuracy, balanced accuracy, F1, ...).
    n_jobs : int, optional
        The folds and the final fit of a batch run in parallel through joblib (the caller's
        ``joblib.parallel_config`` chooses the engine). Leave it ``None`` when the lattice
        already trains sets in parallel (``polydom.build(..., n_jobs=...)``).

    Attributes
    ----------
    cache : dict of frozenset to Expansion
    fits : int
        Sets trained (cache misses), the empty set included.
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
    ):
        from sklearn.metrics import check_scoring

        self.X = X
        self.y = np.asarray(y)
        self.columns = dict(columns)
        self.estimator = estimator
        self.splits = list(splits)
        self.scoring = scoring
        self._scorer = check_scoring(estimator, scoring=scoring)
        self.n_jobs = n_jobs
        self.cache: dict[frozenset, Expansion] = {}
        self.fits = 0

    # ------------------------------------------------------------------ black box

    def __call__(self, features: Iterable[str]) -> Expansion:
        """Accuracy and model of one set (trained on first request)."""
        return self.many([frozenset(features)])[0]

    def many(self, sets: Sequence[Iterable[str]]) -> list[Expansion]:
        """Accuracies and models of several sets; uncached ones are trained as one parallel batch."""
        sets = [frozenset(s) for s in sets]
        todo = [s for s in dict.fromkeys(sets) if s not in self.cache]
        if todo:
            self._train(todo)
        return [self.cache[s] for s in sets]

    def columns_of(self, features: Iterable[str]) -> np.ndarray:
        """Column indices of a set: its features' ranges concatenated in feature order."""
        features = frozenset(features)
        unknown = features - self.columns.keys()
        if unknown:
            raise ValueError(f"unknown features {sorted(unknown)}; known: {list(self.columns)}")
        ranges = [np.arange(sl.start, sl.stop) for name, sl in self.columns.items() if name in features]
        return np.concatenate(ranges) if ranges else np.zeros(0, dtype=np.intp)

    # ------------------------------------------------------------------ training

    def _model_for(self, features: frozenset):
        from sklearn.base import clone
        from sklearn.dummy import DummyClassifier

        if not features:
            return DummyClassifier(strategy="most_frequent")
        return clone(self.estimator)

    def _fit_one(self, features: frozenset, Xs: np.ndarray, train, test):
        """Fit on ``train`` rows; return the score on ``test`` (or the model when ``test`` is None)."""
        model = self._model_for(features)
        if train is None:
            model.fit(Xs, self.y)
            return model
        model.fit(Xs[train], self.y[train])
        return float(self._scorer(model, Xs[test], self.y[test]))

    def _train(self, todo: list[frozenset]) -> None:
        from joblib import Parallel, delayed

        sliced = {s: self.X[:, self.columns_of(s)] for s in todo}
        tasks = [(s, tr, te) for s in todo for tr, te in self.splits] + [(s, None, None) for s in todo]
        if self.n_jobs in (None, 1):
            out = [self._fit_one(s, sliced[s], tr, te) for s, tr, te in tasks]
        else:
            out = Parallel(n_jobs=self.n_jobs)(delayed(self._fit_one)(s, sliced[s], tr, te) for s, tr, te in tasks)
        k = len(self.splits)
        n_scores = k * len(todo)
        for i, s in enumerate(todo):
            scores = out[i * k : (i + 1) * k]
            accuracy = float(np.mean(scores))
            if not (math.isfinite(accuracy) and 0.0 <= accuracy <= 1.0):
                raise ValueError(
                    f"scoring={self.scoring!r} gave {accuracy!r} for features {sorted(s)}; polydom maximises "
                    f"a score in [0, 1] -- use accuracy, balanced_accuracy, f1_macro or similar"
                )
            self.cache[s] = Expansion(accuracy=accuracy, model=out[n_scores + i])
        self.fits += len(todo)

    def __repr__(self) -> str:
        return f"<FeatureSetLearner {len(self.columns)} features, {len(self.y)} items, {self.fits} sets trained>"
