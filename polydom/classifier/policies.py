"""The classifier's expert settings, grouped by concern: how sets are chosen, how costs are
measured, when a prediction may stop early, and how requests are served.

Each group is a small object with good defaults; ``CostSensitiveClassifier(selection=None)``
uses ``Selection()``. They follow scikit-learn's parameter protocol (``get_params`` /
``set_params``), so a search tunes ``selection__alpha`` as it tunes any nested estimator's
parameter, and ``clone`` copies them. Each checks its values when the classifier's ``fit``
starts (:meth:`Policy.check`), naming the group and the value.

* :class:`Selection` -- the index: backend, approximation, ranking of the trained sets.
* :class:`Timing` -- the cost curves: which quantile they follow, how they are measured.
* :class:`Cascade` -- confidence cascades (``cascade=Cascade()`` turns them on).
* :class:`Serving` -- the late-share tolerance, learned guards, speculation, extrapolation.
"""

from __future__ import annotations

from sklearn.base import BaseEstimator

from polydom.index.ranking import SCORE_MODES
from polydom.index.search import SEARCH_MODES

from .constraints import Boolean, Integer, NoneValue, Options, Real, Satisfies, SequenceOf, validate_params

__all__ = ["Policy", "Selection", "Timing", "Cascade", "Serving"]


class Policy(BaseEstimator):
    """A group of settings: scikit-learn's parameter protocol, a constraint table, a check."""

    _constraints: dict = {}

    def check(self) -> None:
        """Raise ``ValueError`` / ``TypeError`` naming this group and the first bad value."""
        try:
            validate_params(self.get_params(deep=False), self._constraints)
            self._check_relations()
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{type(self).__name__}: {exc}") from None

    def _check_relations(self) -> None:
        """Rules that relate two values of the group."""

    def __eq__(self, other) -> bool:
        # Settings are values: two groups of one kind with the same settings are equal.
        return type(other) is type(self) and other.get_params(deep=False) == self.get_params(deep=False)

    __hash__ = None

    def to_json(self) -> dict:
        """The settings as JSON values (tuples as lists), with the group's name."""
        params = {k: list(v) if isinstance(v, tuple) else v for k, v in self.get_params(deep=False).items()}
        return {"policy": type(self).__name__, "params": params}

    @staticmethod
    def from_json(data) -> "Policy":
        """The inverse of :meth:`to_json`; ``ValueError`` for anything else."""
        groups = {cls.__name__: cls for cls in (Selection, Timing, Cascade, Serving)}
        if not (isinstance(data, dict) and data.get("policy") in groups and isinstance(data.get("params"), dict)):
            raise ValueError(f"not a saved policy: {data!r}")
        cls = groups[data["policy"]]
        params = {k: tuple(v) if isinstance(v, list) else v for k, v in data["params"].items()}
        known = cls().get_params(deep=False)
        if not set(params) <= set(known):
            raise ValueError(f"{cls.__name__} has no settings {sorted(set(params) - set(known))}")
        return cls(**params)


class Selection(Policy):
    """How the index chooses among trained feature sets.

    Parameters
    ----------
    backend : str, default "polydom"
        A name from :func:`polydom.backends.buildable` (``"polydom"``, ``"greedy"``,
        ``"greedy-acc"``, ``"greedy-cost"``). The Greedy backends expand at the median training
        item size and walk their sequence on the real clock when predicting.
    alpha : float, default 1.0
        Approximation factor of the PolyDom backend (>= 1; 1 is exact). With an int ``cv`` and
        four or more features, a PolyDom build screens every set it explores on a 2-fold draw
        and trains fully only the sets whose upper bound could reach the skyline
        (``docs/decisions/screening.md``).
    e : float or "auto", default "auto"
        Monotonicity tolerance of the lattice exploration; ``"auto"`` measures it on the trained
        sets (``index_.stats["e_used"]``).
    search : {"auto", "lattice", "skyline"}, default "auto"
        How a PolyDom build chooses the sets it trains. ``"lattice"``: the paper's exploration
        with sandwich pruning (``alpha`` and ``e`` apply), exact over the lattice. ``"skyline"``:
        only the neighbourhoods of the sets the index could serve (one feature added, dropped or
        swapped), until every servable set is a local optimum; it trains a few thousand sets at
        sixteen features where the lattice holds 131,072. ``"auto"``: the lattice up to ten
        items (nine features and the grey step), the skyline above (``docs/decisions/skyline-search.md``).
    tolerance : float or None, default 0.0
        Among affordable sets within ``tolerance`` of the best, serve the cheapest. ``0``: the
        most accurate (the paper's rule); ``None``: within one standard error of the difference.
    scores : {"bounded", "monotone", "measured"}, default "bounded"
        What the PolyDom index ranks trained sets by (``docs/decisions/score-ranking.md``).
    cv_repeats : int, default 1
        With an int ``cv``: score every set on this many shuffled k-fold draws.
    finalist_repeats : int, default 2
        With an int ``cv``: the sets the index can serve are scored again on this many further
        draws before the sweep.
    scoring : str or callable, default "accuracy"
        The score maximised; its values must lie in ``[0, 1]``. Fitted with several labels per
        image, ``"accuracy"`` is the label-weighted accuracy (each label's accuracy weighted by
        ``label_weights``); any scikit-learn scorer that takes multilabel targets
        (``"f1_macro"``, ``"jaccard_samples"``, ...) or a callable may be given instead.
    label_weights : sequence of float or dict, optional
        With several labels per image: how much each label's accuracy counts when feature sets are
        ranked, one weight per label or ``{label: weight}`` (labels left out weigh 0). Default
        equal. ``docs/decisions/multilabel.md`` says why this is the default score.
    lambdas : sequence of float, optional
        The λ grid of ``backend="greedy"``.
    """

    _constraints = {
        "backend": [Satisfies(lambda v: _buildable(v), "a buildable backend name")],
        "alpha": [Real(low=1.0)],
        "e": [Real(low=0.0), Options(("auto",))],
        "search": [Options(SEARCH_MODES)],
        "tolerance": [NoneValue(), Real(low=0.0)],
        "scores": [Options(SCORE_MODES)],
        "cv_repeats": [Integer(low=1)],
        "finalist_repeats": [Integer(low=0)],
        "scoring": [NoneValue(), Satisfies(lambda v: isinstance(v, str) or callable(v), "a scorer name or callable")],
        "lambdas": [NoneValue(), SequenceOf("numbers")],
        "label_weights": [NoneValue(), SequenceOf("numbers", Real()),
                          Satisfies(lambda v: isinstance(v, dict), "a dict of label to weight")],
    }

    def __init__(self, backend="polydom", alpha=1.0, e="auto", tolerance=0.0, scores="bounded", cv_repeats=1,
                 finalist_repeats=2, scoring="accuracy", lambdas=None, search="auto", label_weights=None):
        self.backend = backend
        self.alpha = alpha
        self.e = e
        self.search = search
        self.tolerance = tolerance
        self.scores = scores
        self.cv_repeats = cv_repeats
        self.finalist_repeats = finalist_repeats
        self.scoring = scoring
        self.lambdas = lambdas
        self.label_weights = label_weights

    def _check_relations(self) -> None:
        from polydom.backends import backend_spec

        if self.lambdas is not None and "lambdas" not in backend_spec(self.backend).options:
            raise ValueError(f"lambdas applies to backend='greedy' only, got backend={self.backend!r}")


def _buildable(name) -> bool:
    from polydom.backends import buildable

    return isinstance(name, str) and name in buildable()


class Timing(Policy):
    """How the features' cost curves are measured (``docs/decisions/timing-pass.md``).

    Parameters
    ----------
    quantile : float in [0, 1] or "max", default 0.5
        The quantile of each feature's measured times its cost curve follows; ``"max"`` is the
        paper's worst-case provisioning.
    degree : int, default 2
        Degree of the cost polynomials (non-decreasing where the index serves).
    calibrate : bool, default True
        Raise each curve by the overhead a request pays on top of its CPU time (wall clock),
        measured on the training extraction (:mod:`polydom.costs.calibration`).
    sides : sequence of int, optional
        Square sides to time the features at, on resized copies of the largest training images,
        beside the training extraction's own calls. ``None``: only the sides the training images
        lack, within a quarter of the extraction's compute time.
    repeats : int, default 5
        Calls per resized image at each timed side.
    images : int, default 8
        How many of the largest training images are resized and timed at each side.
    """

    _constraints = {
        "quantile": [Real(0.0, 1.0), Options(("max",))],
        "degree": [Integer(low=0)],
        "calibrate": [Boolean()],
        "sides": [NoneValue(), SequenceOf("integers >= 8", Integer(low=8))],
        "repeats": [Integer(low=1)],
        "images": [Integer(low=1)],
    }

    def __init__(self, quantile=0.5, degree=2, calibrate=True, sides=None, repeats=5, images=8):
        self.quantile = quantile
        self.degree = degree
        self.calibrate = calibrate
        self.sides = sides
        self.repeats = repeats
        self.images = images

    def _check_relations(self) -> None:
        if self.sides is not None and len(set(self.sides)) < self.degree + 1:
            raise ValueError(f"sides needs at least degree + 1 = {self.degree + 1} distinct sides, "
                             f"got {list(self.sides)}")


class Cascade(Policy):
    """Confidence cascades: per-prefix thresholds (out of fold) at which a prediction stops
    computing features because a prefix's model is sure. ``explain`` shows where each image
    stopped. Give at most one of ``loss``, ``price``, ``relative_price``, ``mean_cost``,
    ``saving``.

    Parameters
    ----------
    loss : float in [0, 1], default 0.0
        The out-of-fold accuracy (a fraction of the items) a cascade may give up. An early
        answer counts as a loss where it is wrong and the whole set is right; at 0 a cascade
        stops early only where no such item was seen out of fold.
    price : float, optional
        The out-of-fold accuracy worth one second of mean extraction time per image.
    relative_price : float, optional
        The out-of-fold accuracy worth a set's whole extraction time.
    mean_cost : float, optional
        A mean extraction time per image (seconds) each set's cascade must meet.
    saving : float in [0, 1], optional
        The share of each set's extraction time its cascade must save out of fold.
    per_class : bool, default False
        One threshold per prefix and predicted class (needs many training items per class).
    """

    _constraints = {
        "loss": [Real(0.0, 1.0)],
        "price": [NoneValue(), Real(low=0.0)],
        "relative_price": [NoneValue(), Real(low=0.0)],
        "mean_cost": [NoneValue(), Real(low=0.0)],
        "saving": [NoneValue(), Real(0.0, 1.0)],
        "per_class": [Boolean()],
    }

    def __init__(self, loss=0.0, price=None, relative_price=None, mean_cost=None, saving=None, per_class=False):
        self.loss = loss
        self.price = price
        self.relative_price = relative_price
        self.mean_cost = mean_cost
        self.saving = saving
        self.per_class = per_class

    def _check_relations(self) -> None:
        chosen = ["loss"] if self.loss > 0 else []
        others = ("price", "relative_price", "mean_cost", "saving")
        chosen += [name for name in others if getattr(self, name) is not None]
        if len(chosen) > 1:
            raise ValueError(f"a cascade takes one of loss, {', '.join(others)}, got {' and '.join(chosen)}")


class Serving(Policy):
    """How predictions are served (``docs/decisions/start-rule.md``).

    Parameters
    ----------
    guard : float in [0.5, 1] or None, default None
        A per-start cap, off by default. None: the anytime walk starts a feature when doing so
        raises the expected on-time accuracy of the answer -- the chance that it finishes in the
        time left, read from its measured cost law at this size, times the accuracy it leads to,
        against what the walk serves if it stops (a late answer counts as wrong). A number ``q``
        adds the older cap: a start must also fit the budget at its cost's ``q`` quantile, so no
        start runs late more than ``1 - q`` of the time however much it would gain.
    late_share : float in (0, 0.5] or None, default None
        A late-share budget for a :meth:`~polydom.CostSensitiveClassifier.server`: the share of
        answers that may come late (0.02: a service level of 2%). The server prices lateness and
        adjusts the price from the answers it serves, per size and budget band, so that the late
        share tends to this (:mod:`polydom.index.serving.lateness`). None: no budget, only the walk's
        own weighing. The classifier's own ``predict`` learns nothing, so it does not apply there.
    learn_guards : bool, default True
        Let a :meth:`~polydom.CostSensitiveClassifier.server` learn each feature's cost law from
        the requests it serves (per size band, from 20 calls on).
    speculate : bool, default False
        Where the walk stops but the next feature's predicted cost still fits, compute
        it on a worker thread and answer at the deadline with what was computed
        (``docs/decisions/start-rule.md``). Opt-in: it answered more requests late on two cores.
    extrapolate : {"warn", "raise", "allow"}, default "warn"
        A prediction for an image outside the timed sizes: warn once, raise, or stay silent.
    """

    _constraints = {
        "guard": [Real(0.5, 1.0), NoneValue()],
        "late_share": [Real(1e-6, 0.5), NoneValue()],
        "learn_guards": [Boolean()],
        "speculate": [Boolean()],
        "extrapolate": [Options(("warn", "raise", "allow"))],
    }

    def __init__(self, guard=None, late_share=None, learn_guards=True, speculate=False, extrapolate="warn"):
        self.guard = guard
        self.late_share = late_share
        self.learn_guards = learn_guards
        self.speculate = speculate
        self.extrapolate = extrapolate

