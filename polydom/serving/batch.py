"""Serving a batch of images under one total budget: plan first, serve anytime, re-plan with the time left.

:class:`BatchServer` gives a :class:`~polydom.serving.planner.ServingPlanner`'s ``predict``,
``predict_proba`` and ``explain`` for a batch sharing ``total_budget`` seconds of feature
extraction. Every image is validated and its size read, and the batch is planned
(:class:`~polydom.serving.batchaccount.BatchAccount`), before any feature is computed. Each image is
then served by :meth:`ServingPlanner.serve <polydom.serving.planner.ServingPlanner.serve>` with the
budget its planned set needs -- the index's :meth:`select` computes on the real clock and, where
the backend is anytime, falls back to a computed prefix or upgrades within that budget -- and
its measured seconds are booked, so the rest is re-planned with the time actually left. See
:mod:`polydom.serving.batchaccount` for the plan, the re-plans and the bound on the realised spend.
"""

from __future__ import annotations

import numpy as np

from polydom.classifier.inputs import as_image_list
from polydom.costs.decode import guarded_decode
from polydom.serving.answers import Answers
from polydom.featurizers.sources import as_array, is_encoded, pixel_count
from polydom.serving.batchaccount import BatchAccount, BatchSpend, check_total_budget
from polydom.serving.planner import Explanation

__all__ = ["BatchExplanations", "BatchServer", "BatchSpend"]


class BatchExplanations(list):
    """A list of :class:`~polydom.serving.planner.Explanation`, one per image, with the batch's account.

    Attributes
    ----------
    summary : BatchSpend
        Realised spend against the total and the first plan.
    plan : BatchPlan
        The first plan (made before any feature was computed).
    """

    def __init__(self, explanations, summary: BatchSpend, plan):
        super().__init__(explanations)
        self.summary = summary
        self.plan = plan


class BatchServer:
    """A :class:`~polydom.serving.planner.ServingPlanner`'s ``predict``, ``predict_proba`` and ``explain`` for a
    batch sharing one total budget: the same call shapes, with ``total_budget`` where the planner
    takes per-image budgets.

    Parameters
    ----------
    planner : ServingPlanner
    **options
        For :class:`~polydom.serving.batchaccount.BatchAccount`: ``replan_every``, ``drift``,
        ``calibrate``, ``max_item_budget``, ``exact``.

    Attributes
    ----------
    summary_ : BatchSpend or None
        The account of the last batch served to the end (``None`` before the first).
    """

    def __init__(self, planner, **options):
        self.planner = planner
        self.options = options
        self.summary_: BatchSpend | None = None

    def _served(self, images, total_budget):
        """``(account, items)``: the batch planned, then each item served lazily as
        ``(budget, predicted cost, Served)`` and booked."""
        total = check_total_budget(total_budget)  # named before any image is looked at
        # Files and bytes stay encoded, sized from their headers: each is decoded when served,
        # inside the time its item gets, as a single request decodes (ServingPlanner.serve).
        arrays = [image if is_encoded(image) else as_array(image, index=i)
                  for i, image in enumerate(as_image_list(images))]
        sizes = [pixel_count(image, index=i) for i, image in enumerate(arrays)]
        index = self.planner.index
        account = BatchAccount(index, sizes, total, **self.options)

        def items():
            for i, array in enumerate(arrays):
                budget = account.budget(i)
                if is_encoded(array):
                    # The plan prices features only; the item also gets the time its decode reserves,
                    # and re-planning charges what it took to the items after it.
                    budget += guarded_decode(self.planner.decode, sizes[i])
                served = self.planner.serve(array, i, budget, guarded=False)
                predicted = index.cost_of(served.plan.names, served.size) if served.plan.names else 0.0
                account.record(i, served.measured, predicted, float(served.choice.accuracy))
                yield budget, predicted, served
            self.summary_ = account.summary()

        return account, items()

    def predict(self, images, total_budget: float, answers: Answers) -> np.ndarray:
        """Answers to ``images`` (:meth:`Answers.empty`), the batch within ``total_budget`` seconds of extraction."""
        account, items = self._served(images, total_budget)
        out = answers.empty(len(account))
        for i, (_, _, served) in enumerate(items):
            out[i] = served.plan.predictor.predict_one(served.x)
        return out

    def predict_proba(self, images, total_budget: float, answers: Answers) -> np.ndarray:
        """Probabilities, one column per class or label (:meth:`Answers.proba`), the batch within ``total_budget``."""
        account, items = self._served(images, total_budget)
        out = np.zeros((len(account), len(answers.classes)))
        for i, (_, _, served) in enumerate(items):
            out[i] = answers.proba(served.plan.model, served.x)
        return out

    def explain(self, images, total_budget: float) -> BatchExplanations:
        """One :class:`~polydom.serving.planner.Explanation` per image (its budget from the plan, its
        measured seconds), with the batch's :class:`BatchSpend` as ``summary``."""
        account, items = self._served(images, total_budget)
        out = []
        for i, (budget, predicted, s) in enumerate(items):
            label = s.plan.predictor.predict_one(s.x)
            out.append(Explanation(i, s.size, budget, s.plan.names, float(s.choice.accuracy), float(predicted),
                                   float(s.measured), label, s.steps, s.choice.std_error, s.computed))
        return BatchExplanations(out, account.summary(), account.plan)
