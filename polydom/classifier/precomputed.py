"""Build an index from feature matrices you already have.

Users often have features computed already (and a fair comparison with other methods needs the
very same matrices). :func:`fit_features` takes one matrix per feature, the items' labels and the
features' cost curves, and runs polydom's learning and indexing on them: the same raced learners,
folds, standard errors and finalist rescoring as :class:`~polydom.CostSensitiveClassifier`, without
images. Two defaults differ from the classifier's: the index ranks sets by their measured scores
(:func:`polydom.build`'s default; pass ``scores="monotone"`` to rank as the classifier does), and
``random_state`` is 0. What it learned stays inspectable: the folds, the learner chosen per set,
every score.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["FeatureFit", "fit_features"]


@dataclass(frozen=True)
class FeatureFit:
    """What :func:`fit_features` built and learned.

    Attributes
    ----------
    index : CostSensitiveIndex
        ``index.lookup(size, budget)``; models take the chosen set's columns in feature order.
    learner : polydom.classifier.blackbox.FeatureSetLearner
        ``learner.splits`` (the folds), ``learner.chosen`` (learner name per set),
        ``learner.fold_scores`` (per set), ``learner.cache`` (accuracy, model and standard error
        per set), ``learner.race``.
    columns : dict of str to slice
        Each feature's columns in the stacked matrix, in feature order.
    """

    index: Any
    learner: Any
    columns: dict

    def scores(self) -> dict[frozenset, tuple[float, float | None]]:
        """Every trained set's cross-validated accuracy and its standard error."""
        return {s: (e.accuracy, e.std_error) for s, e in self.learner.cache.items()}

    def matrix_of(self, features, matrices: Mapping[str, np.ndarray]) -> np.ndarray:
        """The model input of a set: its features' matrices side by side, in feature order."""
        chosen = frozenset(features)
        parts = [np.asarray(matrices[n], dtype=float).reshape(len(next(iter(matrices.values()))), -1)
                 for n in self.columns if n in chosen]
        return np.hstack(parts) if parts else np.zeros((len(next(iter(matrices.values()))), 0))


def fit_features(
    matrices: Mapping[str, np.ndarray],
    y,
    costs: Mapping[str, Any],
    *,
    groups=None,
    learners=None,
    cv: int = 5,
    cv_repeats: int = 1,
    finalist_repeats: int = 2,
    scoring="accuracy",
    random_state: int | None = 0,
    n_jobs: int | None = None,
    **build_options,
) -> FeatureFit:
    """Learn and index from precomputed per-feature matrices.

    Parameters
    ----------
    matrices : mapping of str to array of shape (n_items,) or (n_items, d_f)
        One matrix per feature; the mapping's order is the feature order.
    y : array of shape (n_items,)
        Labels.
    costs : mapping of str to cost curve
        Each feature's cost as a polynomial in the item size (see :func:`polydom.build`), e.g.
        fitted from your own timings with :func:`polydom.index.costs.fitting.fit_cost_curve`.
    groups : array of shape (n_items,), optional
        Items of one group (renderings of one picture) stay in one fold.
    learners : classifier, list, or None
        As for :class:`~polydom.CostSensitiveClassifier` (``None``: the default raced learners).
    cv, cv_repeats, finalist_repeats, scoring, n_jobs
        As for the classifier.
    random_state : int or None, default 0
        Seeds the folds and the learners, as the classifier's does (whose default is None).
    **build_options
        Passed to :func:`polydom.build` (``alpha``, ``e``, ``tolerance``, ``backend``, ``n0``, ...).

    Returns
    -------
    FeatureFit

    Raises
    ------
    ValueError
        Matrices of different lengths, labels of another length, or ``costs`` naming other
        features than ``matrices``.
    """
    import polydom

    from .blackbox import FeatureSetLearner, make_splits
    from .pipeline import learner_estimator

    names = list(matrices)
    if not names:
        raise ValueError("matrices is empty: give at least one feature")
    if sorted(costs) != sorted(names):
        raise ValueError(f"costs must name the same features as matrices; matrices {names}, costs {list(costs)}")
    y = np.asarray(y)
    blocks, columns, at = [], {}, 0
    for name in names:
        m = np.asarray(matrices[name], dtype=float)
        m = m.reshape(len(m), -1)
        if len(m) != len(y):
            raise ValueError(f"feature {name!r} has {len(m)} rows but there are {len(y)} labels")
        blocks.append(m)
        columns[name] = slice(at, at + m.shape[1])
        at += m.shape[1]
    X = np.hstack(blocks)
    every = make_splits(cv, y, groups, random_state, repeats=cv_repeats + finalist_repeats)
    first = len(every) // (cv_repeats + finalist_repeats) * cv_repeats
    learner = FeatureSetLearner(X, y, columns, learner_estimator(learners, random_state), every[:first],
                                scoring=scoring, rescore_splits=every[first:], n_jobs=None)
    index = polydom.build({n: costs[n] for n in names}, learner, n_jobs=n_jobs, **build_options)
    return FeatureFit(index, learner, columns)
