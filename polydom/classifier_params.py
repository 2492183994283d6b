"""The classifier's parameters: what each accepts, the rules relating two, and what its learners can do.

Moved out of :mod:`polydom.estimator` so that the estimator reads as its methods; the
``CostSensitiveClassifier`` declares ``_constraints = CONSTRAINTS`` and checks them with
:func:`check_params` when ``fit`` starts.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

from polydom.backends import backend_spec, buildable
from polydom.index.ranking import SCORE_MODES

from .constraints import (
    Boolean, Integer, NoneValue, Options, PathLike, Real, Satisfies, SequenceOf, validate_params,
)

__all__ = ["CONSTRAINTS", "check_params", "estimator_has"]

# Declared once, as scikit-learn declares ``_parameter_constraints`` (its constraint helpers
# are private, so these are polydom's own; see polydom.constraints). Checked when fit starts.
CONSTRAINTS = {
    "features": [NoneValue(), SequenceOf("feature names or Feature objects")],
    "estimator": [NoneValue(), Satisfies(lambda v: hasattr(v, "fit") and hasattr(v, "predict"),
                                         "a scikit-learn classifier")],
    "budget": [Real(low=0.0), NoneValue()],
    "alpha": [Real(low=1.0)],
    "learners": [NoneValue(), SequenceOf("scikit-learn classifiers or (name, classifier) pairs")],
    "e": [Real(low=0.0), Options(("auto",))],
    "tolerance": [NoneValue(), Real(low=0.0)],
    "scores": [Options(SCORE_MODES)],
    "cv": [Integer(low=2), Satisfies(lambda v: not isinstance(v, numbers.Integral), "a cross-validation splitter")],
    "cv_repeats": [Integer(low=1)],
    "finalist_repeats": [Integer(low=0)],
    "cascade": [Boolean()],
    "cascade_loss": [Real(0.0, 1.0)],
    "cascade_price": [NoneValue(), Real(low=0.0)],
    "cascade_relative_price": [NoneValue(), Real(low=0.0)],
    "cascade_saving": [NoneValue(), Real(0.0, 1.0)],
    "cascade_mean_cost": [NoneValue(), Real(low=0.0)],
    "cascade_per_class": [Boolean()],
    "extrapolate": [Options(("warn", "raise", "allow"))],
    "scoring": [NoneValue(), Satisfies(lambda v: isinstance(v, str) or callable(v), "a scorer name or callable")],
    "cost_quantile": [Real(0.0, 1.0), Options(("max",))],
    "cost_degree": [Integer(low=0)],
    "calibrate_costs": [Boolean()],
    "cost_guard": [Real(0.5, 1.0), NoneValue()],
    "learn_guards": [Boolean()],
    "speculate": [Boolean()],
    "backend": [Options(buildable())],
    "lambdas": [NoneValue(), SequenceOf("numbers")],
    "timing_sides": [NoneValue(), SequenceOf("integers >= 8", Integer(low=8))],
    "timing_repeats": [Integer(low=1)],
    "timing_images": [Integer(low=1)],
    "cache_dir": [NoneValue(), PathLike()],
    "warm_start": [Boolean()],
    "n_jobs": [NoneValue(), Integer(exclude=(0,))],
    "random_state": [NoneValue(), Integer(low=0)],
    "progress": [NoneValue(), Boolean()],
}


def check_params(params: Mapping, constraints: Mapping) -> None:
    """The constraint table, then the rules that relate two parameters."""
    validate_params(params, constraints)
    if params["estimator"] is not None and params["learners"] is not None:
        raise ValueError("give estimator (one learner) or learners (several), not both")
    if params["lambdas"] is not None and "lambdas" not in backend_spec(params["backend"]).options:
        raise ValueError(f"lambdas applies to backend='greedy' only, got backend={params['backend']!r}")
    chosen = ["cascade_loss"] if params["cascade_loss"] > 0 else []
    prices = ("cascade_price", "cascade_relative_price", "cascade_mean_cost", "cascade_saving")
    chosen += [name for name in prices if params[name] is not None]
    if len(chosen) > 1:
        raise ValueError(f"a cascade takes one of cascade_loss, {', '.join(prices)}, got {' and '.join(chosen)}")
    sides, degree = params["timing_sides"], params["cost_degree"]
    if sides is not None and len(set(sides)) < degree + 1:
        raise ValueError(f"timing_sides needs at least cost_degree + 1 = {degree + 1} distinct sides, "
                         f"got {list(sides)}")


def estimator_has(attr: str):
    """For ``available_if``: whether every learner (``None``: the default ones) has ``attr``."""
    from .blackbox import as_learners

    def check(self) -> bool:
        chosen = self.learners if self.learners is not None else self.estimator
        return all(hasattr(est, attr) for _, est in as_learners(chosen))

    return check
