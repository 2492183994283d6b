"""Training confidence cascades for a built index from its black box's out-of-fold predictions.

For every servable set with a chain of two or more prefixes, each prefix's winning learner gives
out-of-fold class probabilities on the training items (the folds that scored the sets, so the
data that scores a model never trained it), each item's cost of stopping at each prefix is the
prefix's predicted cost at the item's own size, and :mod:`polydom.index.cascade` learns the
thresholds (one per stage, or per stage and predicted class). Held-out data is never read here.

Each early stage's fold models also become its :class:`~polydom.index.cascade.Committee` when
all of them are softmax-linear (:func:`polydom.classifier.lean.linear_proba_arrays`): serving then decides
with the models whose confidence the thresholds were learned on.
"""

from __future__ import annotations

import numpy as np

from polydom.classifier.lean import linear_proba_arrays
from polydom.index.cascade import Cascades, Committee, fit_thresholds, fit_to_target
from polydom.index.costs.curve import set_cost_matrix
from polydom.index.costs.poly import horner
from polydom.index.serving.anytime import chain_prefixes

__all__ = ["CASCADE_FOLDS", "train_cascades"]


#: Folds of the out-of-fold probabilities the thresholds are learned from. The served prefix models
#: are trained on every training item; a fold model on fewer items is less sure of itself, so
#: held-out items clear a threshold more often than out-of-fold ones did (why: ``docs/decisions/cascades.md``).
CASCADE_FOLDS = 10


def train_cascades(index, learner, sizes, *, price=None, relative_price=None, target_accuracy=None, mean_cost=None,
                   saving=None, allowed_loss=0.0, per_class=False, splits=None):
    """Cascade thresholds for every servable set of ``index``.

    Parameters
    ----------
    index : PolyDomIndex
        With prefix chains.
    learner : FeatureSetLearner
        The black box the index was built with (its folds, learners and out-of-fold probabilities).
    sizes : array of shape (n_items,)
        Each training item's size, in the order of ``learner.y``.
    price : float, optional
        Accuracy given up per unit of mean cost (seconds, when costs are seconds).
    relative_price : float, optional
        Instead of a price: accuracy given up per whole set's cost saved. Each item's cost of
        stopping at a prefix is counted as a fraction of the whole set's cost at the item's
        size, so one value weighs a cheap set's savings like a dear set's (a price per second
        weighs the dear sets of large budgets most: the one that keeps their accuracy saves
        little on cheap sets, and the one that saves on cheap sets gives up accuracy on dear ones).
    target_accuracy, mean_cost : float, optional
        Instead of a price: the cheapest cascade at this out-of-fold (assured) accuracy, or the
        most accurate at this mean cost (per set).
    saving : float in [0, 1], optional
        Instead of a price: the most accurate cascade that saves this share of each set's cost
        out of fold (each item's cost a fraction of the whole set's at its size). A set whose
        cascade cannot save that much keeps its plain walk.
    allowed_loss : float, default 0.0
        With none of the above: each set's target is its own out-of-fold accuracy minus
        ``allowed_loss`` (a fraction of the items). At 0 a prefix may answer only where, out of
        fold, no item it got wrong was one the whole set got right
        (:mod:`polydom.index.cascade` explains the assured accuracy this counts in).
    per_class : bool, default False
        Refine each stage's threshold per predicted class (see :func:`fit_thresholds
        <polydom.index.cascade.fit_thresholds>`).
    splits : sequence of (train, test) index arrays, optional
        The folds of the out-of-fold probabilities (every item in one test fold); by default
        the learner's scoring folds. The classifier passes :data:`CASCADE_FOLDS` grouped folds.

    Returns
    -------
    Cascades
    """
    if sum(v is not None for v in (price, relative_price, target_accuracy, mean_cost, saving)) > 1:
        raise ValueError("give at most one of price, relative_price, target_accuracy, mean_cost and saving")
    sizes = np.asarray(sizes, dtype=float)
    classes = np.unique(learner.y)
    y = np.searchsorted(classes, learner.y)
    space = index.space
    thresholds, committees = {}, {}
    for mask in index.candidates:
        order = index.chains.get(mask, ())
        if len(order) < 2:
            continue
        prefixes = chain_prefixes(order)[1:]
        oof = [learner.oof_proba(_with_columns(learner, space.frozenset(p)), splits) for p in prefixes]
        if any(o is None for o in oof):
            continue  # a learner without probabilities cannot say how sure it is
        proba = [o[0] for o in oof]
        coef = set_cost_matrix(index.costs, prefixes)
        costs = np.stack([horner(np.repeat(row[None, :], len(sizes), axis=0), sizes) for row in coef], axis=1)
        if price is not None:
            fit = fit_thresholds(proba, costs, y, float(price), per_class=per_class)
        elif relative_price is not None:
            fit = fit_thresholds(proba, _shares(costs), y, float(relative_price), per_class=per_class)
        elif saving is not None:
            fit = _saving(proba, _shares(costs), y, float(saving), per_class)
        elif mean_cost is not None:
            fit = fit_to_target(proba, costs, y, mean_cost=float(mean_cost), per_class=per_class)
        else:
            plain = float(np.mean(proba[-1].argmax(axis=1) == y))
            target = target_accuracy if target_accuracy is not None else plain - allowed_loss
            fit = fit_to_target(proba, costs, y, target_accuracy=float(target), per_class=per_class)
        thresholds[mask] = fit.thresholds
        for prefix in prefixes[:-1]:  # the last stage always answers: no decision to take
            if prefix not in committees:
                committees[prefix] = _committee(learner, _with_columns(learner, space.frozenset(prefix)), splits, classes)
    return Cascades(thresholds, classes.tolist(), {m: c for m, c in committees.items() if c is not None})


def _with_columns(learner, features) -> frozenset:
    """``features`` less the steps among them (they add no columns, :mod:`polydom.steps`): a
    chain's first prefix may hold a step alone, and is then the empty set's prior."""
    return frozenset(f for f in features if learner.columns[f].stop > learner.columns[f].start)


def _saving(proba, shares, y, saving, per_class):
    """The most accurate thresholds (assured, out of fold) whose mean share of the set's cost is at
    most ``1 - saving``, then the cheapest at that accuracy: where stopping loses nothing, a
    cascade saves more than asked rather than stopping just enough."""
    fit = fit_to_target(proba, shares, y, mean_cost=1.0 - saving, per_class=per_class)
    if fit.mean_cost > 1.0 - saving:
        return fit  # cannot save that much: the plain walk
    cheapest = fit_to_target(proba, shares, y, target_accuracy=fit.assured_accuracy, per_class=per_class)
    return cheapest if cheapest.mean_cost < fit.mean_cost else fit


def _shares(costs):
    """Each item's prefix costs as fractions of its whole set's cost (the last column)."""
    return costs / np.maximum(costs[:, -1:], np.finfo(float).tiny)


def _committee(learner, features, splits, classes) -> Committee | None:
    """The prefix's fold models as a committee, or None unless every one is softmax-linear over
    all ``classes`` (checked on the training rows it reads)."""
    X = learner.X[:, learner.columns_of(features)]
    arrays = []
    models = learner.fold_models(features, splits)
    for model in models:
        found = linear_proba_arrays(model, X) if np.array_equal(getattr(model, "classes_", None), classes) else None
        if found is None:
            return None
        arrays.append(found)
    if not arrays:
        return None
    try:
        committee = Committee(*(np.stack(parts) for parts in zip(*arrays)))
    except ValueError:
        return None
    # What serving computes is the folded form: it must give the members' mean on real rows too.
    rows = X[: min(len(X), 64)]
    expected = np.mean([model.predict_proba(rows) for model in models], axis=0)
    if not np.allclose([committee.proba(row) for row in rows], expected, rtol=0.0, atol=1e-9):
        return None
    return committee
