"""Confidence cascades over a prefix chain: stop buying features once the model is sure.

A chain ``P_1 ⊂ P_2 ⊂ ... ⊂ P_k`` has a model per prefix. Serving computes the features of
``P_1``, predicts with its model, and stops when the predicted class's probability reaches that
stage's threshold *for that class*; otherwise it computes the next prefix's new features (the
ones already computed are reused, not paid again) and asks the next model. The last stage always
answers. Thresholds of 1 (never confident enough) serve the whole set, thresholds of 0 serve the
first prefix. A threshold of exactly 1 stops nothing, not even a probability that rounded to 1
(a shrunk LDA's often does): "serve the whole set" must not depend on how sure a model is.

Thresholds are learned from out-of-fold probabilities -- the same folds that score the sets, so
no item scores a model that saw it -- by coordinate ascent on ``assured accuracy - price * mean
cost``, where an item's cost is the predicted cost of the prefix it stops at, at its own size. A
target accuracy or mean cost is met by bisection on the price.

*Assured* accuracy counts an item that stops early as right only when both its prefix and the
whole set get it right: a stop can lose an item, never win one. Out of fold, a prefix is right
on a few items where the whole set is wrong; counting those as wins lets the search buy stops
that lose other items with them, and on new items the wins do not come back while the losses
do. For the same reason each stage has one threshold for every class by default: a threshold
per class and stage, chosen from ~100 out-of-fold items per class, finds cut-offs where no loss
happened to fall, and loses on new items (why: ``docs/decisions/cascades.md``).
``per_class=True`` refines each class's threshold from the shared one, for data large enough
to tell the classes apart.

Deciding with the fold models. The thresholds are learned on fold models' out-of-fold
probabilities, and a prefix's served model, trained on every training item, is surer of itself
than they were, so held-out items clear thresholds that out-of-fold ones did not
(why: ``docs/decisions/cascades.md``). Where every fold model's probabilities
are a softmax of linear scores (:func:`polydom.classifier.lean.linear_proba_arrays`), a prefix's
:class:`Committee` -- its fold models as arrays -- decides whether to stop, with the mean of their
probabilities: the confidence scale the thresholds were learned on. Other learners decide with the
served model. Either way the served model answers.

Invariant (checked by :func:`check_thresholds`): thresholds lie in ``[0, 1]``, one row per
stage and one column per class, and the last row is all zeros (the last stage always answers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["CascadeFit", "Cascades", "Committee", "check_thresholds", "fit_thresholds", "fit_to_target", "is_confident",
           "linear_probabilities", "replay"]


@dataclass(frozen=True)
class CascadeFit:
    """Learned thresholds and what they achieve on the data they were learned from.

    Attributes
    ----------
    thresholds : ndarray of shape (stages, classes)
    price : float
        Accuracy given up per unit of mean cost.
    accuracy, mean_cost : float
        Replayed on the out-of-fold data.
    stops : ndarray of int
        The stage each item stopped at.
    assured_accuracy : float
        The replayed accuracy with early stops that a prefix got right and the whole set wrong
        counted as wrong (the module docstring says why the fit maximises this one).
    """

    thresholds: np.ndarray
    price: float
    accuracy: float
    mean_cost: float
    stops: np.ndarray
    assured_accuracy: float


def check_thresholds(thresholds: np.ndarray) -> None:
    """Assert the module's invariant."""
    t = np.asarray(thresholds)
    assert t.ndim == 2 and t.shape[0] >= 1, "one row of thresholds per stage"
    assert np.all((t >= 0.0) & (t <= 1.0)), "thresholds lie in [0, 1]"
    assert not t[-1].any(), "the last stage always answers"


def replay(thresholds, proba: Sequence[np.ndarray], costs: np.ndarray, y: np.ndarray):
    """Run the cascade on recorded probabilities.

    Parameters
    ----------
    thresholds : array of shape (stages, classes)
    proba : sequence of arrays of shape (n, classes)
        Per stage, each item's class probabilities from that prefix's model.
    costs : array of shape (n, stages)
        Each item's predicted cost of stopping at each stage (cumulative: the prefix's cost).
    y : array of shape (n,)
        True class positions (columns of ``proba``).

    Returns
    -------
    (accuracy, mean_cost, stops)
    """
    return _replay(np.asarray(thresholds, dtype=float), _Recorded(proba, costs, y))


class _Recorded:
    """Per stage: predictions, their confidences and correctness; computed once per fit.
    ``assured`` is the correctness a stop is credited with: right only where the last stage
    is right too."""

    def __init__(self, proba, costs, y):
        n = len(y)
        self.rows = np.arange(n)
        self.pred = np.stack([p.argmax(axis=1) for p in proba])
        self.conf = np.stack([p[self.rows, pred] for p, pred in zip(proba, self.pred)])
        self.correct = (self.pred == np.asarray(y)[None, :]).astype(float)
        self.assured = np.minimum(self.correct, self.correct[-1][None, :])
        self.costs = np.asarray(costs, dtype=float)


#: The highest threshold that stops anything: a probability that rounded to 1 clears it, while 1 itself
#: stops nothing.
_SUREST = float(np.nextafter(1.0, 0.0))


def is_confident(confidence, threshold):
    """Whether a prediction this ``confidence`` stops at this ``threshold`` (1 never stops)."""
    return (confidence >= threshold) & (threshold < 1.0)


def _stops(thresholds: np.ndarray, rec: _Recorded) -> np.ndarray:
    k, n = rec.pred.shape
    stops = np.full(n, k - 1)
    undecided = np.ones(n, dtype=bool)
    for stage in range(k - 1):
        sure = is_confident(rec.conf[stage], thresholds[stage, rec.pred[stage]])
        stops[undecided & sure] = stage
        undecided &= ~sure
    return stops


def _replay(thresholds: np.ndarray, rec: _Recorded):
    stops = _stops(thresholds, rec)
    return float(rec.correct[stops, rec.rows].mean()), float(rec.costs[rec.rows, stops].mean()), stops


def fit_thresholds(
    proba: Sequence[np.ndarray], costs: np.ndarray, y: np.ndarray, price: float, *, per_class: bool = False,
    sweeps: int = 2, grid: int = 16,
):
    """Thresholds maximising ``assured accuracy - price * mean_cost`` on the given out-of-fold data.

    Coordinate ascent from "never stop early" -- the plain set -- so the result is never worse on
    this data than serving the whole set. Each stage's threshold (one for all classes) in turn
    is set to the best of ``grid + 1`` quantiles of the stage's observed confidences (and 1,
    "never stop here"), holding the others; ``sweeps`` passes over the stages. With
    ``per_class``, each (stage, class) threshold is then refined the same way over the
    quantiles of the confidences of that class's predictions.

    Returns
    -------
    CascadeFit
    """
    k, classes = len(proba), proba[0].shape[1]
    t = np.zeros((k, classes))
    t[:-1] = 1.0
    rec = _Recorded(proba, costs, y)

    def objective(th):
        stops = _stops(th, rec)
        return float(rec.assured[stops, rec.rows].mean()) - price * float(rec.costs[rec.rows, stops].mean())

    def options(seen):
        # A threshold strictly between observed confidences behaves like the next one up.
        quantiles = np.quantile(seen, np.linspace(0.0, 1.0, grid + 1)) if len(seen) else np.zeros(0)
        return np.unique(np.concatenate([np.minimum(quantiles, _SUREST), [1.0]]))

    best = objective(t)
    coordinates = [(stage, slice(None), rec.conf[stage]) for stage in range(k - 1)]
    if per_class:
        coordinates += [(stage, c, rec.conf[stage][rec.pred[stage] == c]) for stage in range(k - 1) for c in range(classes)]
    for _ in range(sweeps):
        improved = False
        for stage, column, seen in coordinates:
            for value in options(seen):
                trial = t.copy()
                trial[stage, column] = value
                if np.array_equal(trial, t):
                    continue
                score = objective(trial)
                if score > best + 1e-12:
                    best, t, improved = score, trial, True
        if not improved:
            break
    acc, cost, stops = _replay(t, rec)
    return CascadeFit(t, float(price), acc, cost, stops, float(rec.assured[stops, rec.rows].mean()))


def fit_to_target(proba, costs, y, *, target_accuracy=None, mean_cost=None, per_class: bool = False,
                  iterations: int = 12) -> CascadeFit:
    """Thresholds for the cheapest cascade meeting ``target_accuracy`` (in assured accuracy), or
    the most accurate within ``mean_cost`` (exactly one of them), by bisection on the price.

    A higher price stops earlier: mean cost falls, and accuracy with it. The bisection keeps the
    best fit that meets the target; if even price 0 (the plain set, as accurate as it gets)
    misses ``target_accuracy``, that fit is returned.
    """
    if (target_accuracy is None) == (mean_cost is None):
        raise ValueError("give exactly one of target_accuracy and mean_cost")
    scale = float(np.max(costs)) or 1.0
    lo, hi = 0.0, 10.0 / scale  # at hi a unit of accuracy is worth a tenth of the largest cost
    best = fit_thresholds(proba, costs, y, 0.0, per_class=per_class)
    if target_accuracy is not None and best.assured_accuracy < target_accuracy:
        return best
    for _ in range(iterations):
        price = (lo + hi) / 2.0
        fit = fit_thresholds(proba, costs, y, price, per_class=per_class)
        meets = fit.assured_accuracy >= target_accuracy if target_accuracy is not None else fit.mean_cost <= mean_cost
        if meets:
            better = (fit.mean_cost < best.mean_cost if target_accuracy is not None
                      else fit.assured_accuracy > best.assured_accuracy)
            if better or (mean_cost is not None and best.mean_cost > mean_cost):
                best = fit
            if target_accuracy is not None:
                lo = price
            else:
                hi = price
        else:
            if target_accuracy is not None:
                hi = price
            else:
                lo = price
    return best


def linear_probabilities(scores: np.ndarray) -> np.ndarray:
    """Class probabilities from linear scores of shape ``(rows, n_scores)``: the softmax, or with
    one score column (two classes) ``[1 - expit(s), expit(s)]`` -- what scikit-learn's linear
    discriminant analysis and multinomial logistic regression return."""
    if scores.shape[1] == 1:
        p1 = 1.0 / (1.0 + np.exp(-scores[:, 0]))
        return np.stack([1.0 - p1, p1], axis=1)
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


class Committee:
    """A prefix's fold models as arrays: the mean of their softmax-linear class probabilities.

    Parameters
    ----------
    mean, scale : ndarray of shape (members, n_inputs)
        Each member's input centring and scaling (its scalers folded into one).
    coef : ndarray of shape (members, n_inputs, n_scores)
    intercept : ndarray of shape (members, n_scores)
        ``n_scores`` is the number of classes, or 1 for two classes (the logistic of one score).

    Invariant (checked by :meth:`check`): shapes agree, every value is finite, scales are
    positive.
    """

    __slots__ = ("mean", "scale", "coef", "intercept", "_centre", "_weights", "_offset")

    def __init__(self, mean, scale, coef, intercept):
        self.mean, self.scale = np.asarray(mean, dtype=float), np.asarray(scale, dtype=float)
        self.coef, self.intercept = np.asarray(coef, dtype=float), np.asarray(intercept, dtype=float)
        self.check()
        # The scaling folded into the coefficients, every member side by side: one row times
        # one (inputs, members * scores) matrix scores all members at once (a stage's decision
        # is on the request path; why: docs/decisions/cascades.md).
        # Centring on the members' average first keeps the folded offset a small correction
        # (the members' centrings differ little) instead of a difference of large numbers.
        k, d, s = self.coef.shape
        self._centre = self.mean.mean(axis=0)
        self._weights = (self.coef / self.scale[:, :, None]).transpose(1, 0, 2).reshape(d, k * s)
        self._offset = self.intercept - np.einsum("kd,kds->ks", (self.mean - self._centre) / self.scale, self.coef)
        if not (np.isfinite(self._weights).all() and np.isfinite(self._offset).all()):
            raise ValueError("a committee's scales are too small to fold into its coefficients")

    def check(self) -> None:
        """Raise ``ValueError`` naming the first violated invariant."""
        k, d = self.mean.shape if self.mean.ndim == 2 else (0, 0)
        if self.mean.ndim != 2 or k < 1 or self.scale.shape != (k, d) or self.coef.ndim != 3 or self.coef.shape[:2] != (k, d):
            raise ValueError("a committee's centring, scaling and coefficients must be (members, inputs[, scores])")
        if self.coef.shape[2] < 1 or self.intercept.shape != (k, self.coef.shape[2]):
            raise ValueError("a committee's intercepts must be (members, scores)")
        if not all(np.isfinite(a).all() for a in (self.mean, self.scale, self.coef, self.intercept)):
            raise ValueError("a committee holds a non-finite value")
        if not (self.scale > 0.0).all():
            raise ValueError("a committee's scales must be positive")

    @property
    def n_classes(self) -> int:
        return max(2, self.coef.shape[2])

    def proba(self, x: np.ndarray) -> np.ndarray:
        """Mean class probabilities of one row ``x`` over the members. ``O(members * inputs * scores)``."""
        x = np.asarray(x, dtype=float).reshape(-1)
        if len(x) != self.mean.shape[1]:
            raise ValueError(f"the committee reads {self.mean.shape[1]} values, got {len(x)}")
        scores = ((x - self._centre) @ self._weights).reshape(self._offset.shape) + self._offset
        return linear_probabilities(scores).mean(axis=0)

    @staticmethod
    def n_values(members, inputs, scores):
        """How many stored values a committee of this shape has (:meth:`flat`); works on arrays."""
        return members * inputs * (2 + scores) + members * scores

    def flat(self) -> tuple[list[int], np.ndarray]:
        """``([members, inputs, scores], values)`` for storage."""
        k, d, s = self.coef.shape
        return [k, d, s], np.concatenate([a.ravel() for a in (self.mean, self.scale, self.coef, self.intercept)])

    @classmethod
    def from_flat(cls, shape, values: np.ndarray) -> "Committee":
        k, d, s = (int(v) for v in shape)
        if cls.n_values(k, d, s) != len(values):
            raise ValueError("a stored committee's values do not match its shape")
        sizes = np.cumsum([0, k * d, k * d, k * d * s, k * s])
        parts = [values[a:b] for a, b in zip(sizes, sizes[1:])]
        return cls(parts[0].reshape(k, d), parts[1].reshape(k, d), parts[2].reshape(k, d, s), parts[3].reshape(k, s))


class Cascades:
    """The thresholds of every servable set's cascade, over one list of class labels.

    Parameters
    ----------
    thresholds : mapping of int to array of shape (stages, classes)
        Per servable set (mask), one row per non-empty prefix of its chain.
    classes : sequence
        The class labels the columns stand for (sorted, as scikit-learn orders ``classes_``).
    committees : mapping of int to Committee, optional
        Per prefix (mask), the fold models that decide whether it stops (module docstring);
        their classes are ``classes``. Prefixes without one decide with their served model.
    """

    def __init__(self, thresholds, classes, committees=None):
        self.thresholds = {int(m): np.asarray(t, dtype=float) for m, t in thresholds.items()}
        self.classes = list(classes)
        self.committees = {int(m): c for m, c in (committees or {}).items()}
        for t in self.thresholds.values():
            check_thresholds(t)
            if t.shape[1] != len(self.classes):
                raise ValueError(f"thresholds have {t.shape[1]} columns for {len(self.classes)} classes")
        for c in self.committees.values():
            if c.n_classes != len(self.classes):
                raise ValueError(f"a committee has {c.n_classes} classes for {len(self.classes)}")

    def __bool__(self) -> bool:
        return bool(self.thresholds)

    def confident(self, mask: int, stage: int, model, x: np.ndarray, prefix: int | None = None) -> bool:
        """Whether the stage's prefix (mask ``prefix``, served by ``model``) is sure enough of
        ``x`` to stop: its committee decides where it has one, ``model`` elsewhere."""
        t = self.thresholds.get(mask)
        if t is None or stage >= len(t) - 1:
            return stage >= (len(t) - 1 if t is not None else 0)
        committee = self.committees.get(prefix) if prefix is not None else None
        if committee is not None:  # its columns are this object's classes
            p = committee.proba(x)
            best = column = int(np.argmax(p))
        else:
            p = model.predict_proba(x.reshape(1, -1))[0]
            best = int(np.argmax(p))
            label = model.classes_[best]
            column = self.classes.index(label.item() if hasattr(label, "item") else label)
        return bool(is_confident(p[best], t[stage, column]))

    def to_state(self) -> tuple[list, dict]:
        """``(classes, arrays)`` for storage: flat float64 thresholds with their masks and shapes,
        and the committees' values with their prefix masks and ``(members, inputs, scores)``."""
        masks = list(self.thresholds)
        arrays = {
            "cascade_masks": np.array(masks, dtype=np.int64),
            "cascade_stages": np.array([len(self.thresholds[m]) for m in masks], dtype=np.int64),
            "cascade_thresholds": np.concatenate([self.thresholds[m].ravel() for m in masks]) if masks else np.zeros(0),
        }
        if self.committees:
            held = sorted(self.committees)
            flats = [self.committees[m].flat() for m in held]
            arrays.update({
                "committee_masks": np.array(held, dtype=np.int64),
                "committee_shapes": np.array([v for shape, _ in flats for v in shape], dtype=np.int64),
                "committee_values": np.concatenate([values for _, values in flats]),
            })
        return [c.item() if hasattr(c, "item") else c for c in self.classes], arrays

    @classmethod
    def from_state(cls, classes, arrays) -> "Cascades":
        if "cascade_masks" not in arrays or classes is None:
            return cls({}, [])
        flat, at, out = arrays["cascade_thresholds"], 0, {}
        for m, stages in zip(arrays["cascade_masks"].tolist(), arrays["cascade_stages"].tolist()):
            size = stages * len(classes)
            out[m] = flat[at : at + size].reshape(stages, len(classes))
            at += size
        committees = {}
        if "committee_masks" in arrays:
            shapes = arrays["committee_shapes"].reshape(-1, 3)
            values, at = arrays["committee_values"], 0
            for m, shape in zip(arrays["committee_masks"].tolist(), shapes.tolist()):
                size = Committee.n_values(*shape)
                committees[m] = Committee.from_flat(shape, values[at : at + size])
                at += size
        return cls(out, classes, committees)
