"""The learners a feature set may get, and the folds that score them.

:func:`default_learners` is polydom's raced list; :func:`as_learners` names any list a user
gives; :func:`make_splits` draws the (repeated, grouped, stratified) folds every set is scored on;
:func:`standard_error` is the corrected standard error of a cross-validated mean.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

__all__ = ["as_learners", "default_estimator", "default_learners", "make_splits", "standard_error", "without_fit_only_state"]


def default_estimator(random_state=None):
    """The paper's learner: standard scaling, then a linear SVM trained by SGD with an L1 penalty.

    ``make_pipeline(StandardScaler(), SGDClassifier(loss="hinge", penalty="l1",
    random_state=random_state))``.
    """
    from sklearn.linear_model import SGDClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), SGDClassifier(loss="hinge", penalty="l1", random_state=random_state))


def default_learners() -> list[tuple[str, object]]:
    """polydom's default learners, raced per feature set: stable, regularised, deterministic.

    * ``"lda"``: standard scaling, then linear discriminant analysis with Ledoit-Wolf shrinkage
      -- closed form, fast, and strong with few training items per class;
    * ``"logreg"``: standard scaling, then multinomial logistic regression with ``C=0.1``.

    Neither has a random state, so a build is reproducible (why these two: ``docs/decisions/learners.md``).
    """
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return [
        ("lda", make_pipeline(StandardScaler(), LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto"))),
        ("logreg", make_pipeline(StandardScaler(), LogisticRegression(C=0.1, max_iter=300, tol=1e-3))),
    ]


def as_learners(estimator) -> list[tuple[str, object]]:
    """``[(name, estimator), ...]`` from one estimator, a list of estimators or of named pairs.

    ``None`` gives :func:`default_learners`. Names default to the estimator's class name (the
    last step's, for a pipeline), made unique with a position suffix.
    """
    if estimator is None:
        return default_learners()
    items = list(estimator) if isinstance(estimator, (list, tuple)) else [estimator]
    if not items:
        raise ValueError("learners is empty: give at least one scikit-learn classifier")
    out, seen = [], set()
    for i, item in enumerate(items):
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
            name, est = item
        else:
            last = item.steps[-1][1] if hasattr(item, "steps") else item
            name, est = type(last).__name__, item
        if not (hasattr(est, "fit") and hasattr(est, "predict")):
            raise TypeError(f"learner {name!r} is not a scikit-learn classifier (needs fit and predict): {est!r}")
        if name in seen:
            name = f"{name}-{i}"
        seen.add(name)
        out.append((name, est))
    return out


def without_fit_only_state(model):
    """``model`` (fitted) without state that only its fit needed; returned for chaining.

    scikit-learn's ``LinearDiscriminantAnalysis`` keeps the within-class covariance
    (``covariance_``, ``p x p`` for ``p`` columns) whenever its solver is ``"lsqr"`` or
    ``"eigen"``; ``predict``, ``predict_proba``, ``decision_function`` and (``"eigen"``)
    ``transform`` never read it. At a few hundred columns it is most of a stored model, written
    to the fit cache and the index for every set (sizes: ``docs/decisions/learners.md``). It is
    dropped here, inside pipelines and per-label models (``OneVsRestClassifier``) too, from
    subclasses of scikit-learn's LDA as well; with the ``"svd"`` solver it is kept only when
    asked for (``store_covariance=True``), so it is left alone. Predictions are unchanged. Other
    estimators are returned as they are.
    """
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.pipeline import Pipeline

    if isinstance(model, Pipeline):
        for _, step in model.steps:
            without_fit_only_state(step)
    elif isinstance(model, OneVsRestClassifier):
        for inner in model.estimators_:
            without_fit_only_state(inner)
    elif isinstance(model, LinearDiscriminantAnalysis) and model.solver != "svd" and hasattr(model, "covariance_"):
        del model.covariance_
    return model


def standard_error(scores: Sequence[float], test_fraction: float, n_items: int | None = None) -> float:
    """Standard error of the mean of cross-validation scores, corrected for overlapping training sets.

    ``sqrt((1/J + n_test/n_train) * s^2)`` for ``J`` scores with sample variance ``s^2`` (the
    corrected resampled-t variance of Nadeau and Bengio): folds share most of their training
    items, so their scores are correlated and the naive ``s / sqrt(J)`` is too small.

    With ``n_items`` (the items the scores were measured on, each once per pass over the folds)
    the result is at least the binomial standard error of an accuracy measured on that many items,
    ``sqrt(p (1 - p) / n_items)`` with ``p`` the mean score pulled towards 1/2 by one success and
    one failure (Laplace). Folds can agree exactly -- two feature sets whose models make the same
    mistakes -- and a standard error of 0 or of round-off size would give one set all the weight
    of a weighted fit (:func:`polydom.lattice.monotone_scores`); no score measured on ``n_items``
    items is known better than that floor.
    """
    scores = np.asarray(scores, dtype=float)
    floor = 0.0
    if n_items is not None and n_items > 0 and len(scores):
        p = (float(scores.mean()) * n_items + 1.0) / (n_items + 2.0)
        floor = math.sqrt(p * (1.0 - p) / n_items)
    if len(scores) < 2:
        return floor
    ratio = test_fraction / max(1e-12, 1.0 - test_fraction)
    return max(floor, float(math.sqrt((1.0 / len(scores) + ratio) * scores.var(ddof=1))))


def make_splits(cv, y, groups=None, random_state=None, repeats: int = 1) -> list[tuple[np.ndarray, np.ndarray]]:
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
    repeats : int, default 1
        With an int ``cv``: the k-fold split is drawn this many times with different shuffles
        (seeded from ``random_state``, 0 when it is None), ``k * repeats`` folds in all.
        Repeats lower the variance of every score, which is what selection among many
        sets needs.

    Returns
    -------
    list of (train_indices, test_indices)
    """
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold, check_cv

    dummy_x = np.zeros((len(y), 1))
    if isinstance(repeats, bool) or not isinstance(repeats, numbers.Integral) or repeats < 1:
        raise ValueError(f"repeats must be a positive integer, got {repeats!r}")
    if isinstance(cv, numbers.Integral) and not isinstance(cv, bool):
        if cv < 2:
            raise ValueError(f"cv must be >= 2 folds, got {cv}")
        kfold = StratifiedGroupKFold if groups is not None else StratifiedKFold
        if repeats == 1:
            shuffle = random_state is not None
            splitters = [kfold(int(cv), shuffle=shuffle, random_state=random_state if shuffle else None)]
        else:
            seeds = np.random.RandomState(0 if random_state is None else random_state).randint(0, 2**31 - 1, repeats)
            splitters = [kfold(int(cv), shuffle=True, random_state=int(seed)) for seed in seeds]
    else:
        if repeats != 1:
            raise ValueError("repeats applies to an integer cv; pass a repeated splitter instead")
        splitters = [check_cv(cv, y, classifier=True)]
    splits = [(np.asarray(tr), np.asarray(te)) for sp in splitters for tr, te in sp.split(dummy_x, y, groups)]
    if not splits:
        raise ValueError(f"the cross-validation splitter {cv!r} produced no folds")
    return splits
