"""The classifier's parameters: what each accepts, the rules relating two, and what its learners can do.

Moved out of :mod:`polydom.classifier.estimator` so that the estimator reads as its methods; the
``CostSensitiveClassifier`` declares ``_constraints = CONSTRAINTS`` and checks them with
:func:`check_params` when ``fit`` starts.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

from .constraints import Boolean, Integer, NoneValue, PathLike, Real, Satisfies, SequenceOf, validate_params
from .policies import Cascade, Selection, Serving, Timing

__all__ = ["CONSTRAINTS", "check_params", "estimator_has"]


def _is_learners(value) -> bool:
    """One classifier, or a non-empty list of classifiers or of (name, classifier) pairs: what
    :func:`~polydom.classifier.learners.as_learners` accepts."""
    from .learners import as_learners

    try:
        as_learners(value)
    except (TypeError, ValueError):
        return False
    return True


# Declared once, as scikit-learn declares ``_parameter_constraints`` (its constraint helpers
# are private, so these are polydom's own; see polydom.classifier.constraints). Checked when fit starts.
CONSTRAINTS = {
    "features": [NoneValue(), SequenceOf("feature names or Feature objects")],
    "learners": [NoneValue(), Satisfies(_is_learners, "a scikit-learn classifier, or a list of classifiers or of "
                                                      "(name, classifier) pairs")],
    "budget": [Real(low=0.0), NoneValue()],
    "cv": [Integer(low=2), Satisfies(lambda v: not isinstance(v, numbers.Integral), "a cross-validation splitter")],
    "selection": [NoneValue(), Satisfies(lambda v: isinstance(v, Selection), "a polydom.Selection")],
    "timing": [NoneValue(), Satisfies(lambda v: isinstance(v, Timing), "a polydom.Timing")],
    "cascade": [NoneValue(), Satisfies(lambda v: isinstance(v, Cascade), "a polydom.Cascade")],
    "serving": [NoneValue(), Satisfies(lambda v: isinstance(v, Serving), "a polydom.Serving")],
    "cache_dir": [NoneValue(), PathLike()],
    "n_jobs": [NoneValue(), Integer(exclude=(0,))],
    "random_state": [NoneValue(), Integer(low=0)],
    "progress": [NoneValue(), Boolean()],
}


def check_params(params: Mapping, constraints: Mapping) -> None:
    """The constraint table (each group checks its own values, :meth:`polydom.classifier.policies.Policy.check`)."""
    validate_params(params, constraints)


def estimator_has(attr: str):
    """For ``available_if``: whether every learner (``None``: the default ones) has ``attr``."""
    from .blackbox import as_learners

    def check(self) -> bool:
        return all(hasattr(est, attr) for _, est in as_learners(self.learners))

    return check
