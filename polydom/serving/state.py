"""One fitted classifier's serving state, as one immutable snapshot per index version.

A request of :class:`~polydom.classifier.estimator.CostSensitiveClassifier` reads many things: the index,
its feature order, each feature's columns, ``classes_``, the planner with its plans, its learned
guards and the cascades. A loaded index can move to a new version (``index_.refresh()``), a
refit that may order its features otherwise, add one or predict other classes. So all of it
lives in one :class:`ServingState`, built whole from one version and swapped in by one
assignment; a request reads the snapshot once at its start and serves from it to the end.

*Following a refresh.* A state remembers the index object it was built from (``source``) and
the version it serves (``index``, that object's :meth:`~polydom.index.base.StoredIndex._view`
when it was built). When the source's view is no longer that version, the classifier builds a
new state from the new version's own saved classifier state (:func:`follow`) -- its feature
order, columns, classes, cost fits and cascade setting, checked as strictly as at load -- or,
where the new version cannot be served (no classifier state, a damaged one, a model that fails
its checks), a :class:`Refusal` that answers every request with a
:class:`~polydom.classifier.classifier_state.ClassifierStateError` until a servable version is adopted.
"""

from __future__ import annotations

import dataclasses
import threading
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from polydom.errors import PolydomError

__all__ = ["Refusal", "ServingState", "follow", "view_of"]

#: One rebuild at a time, process-wide: rebuilds are rare (one per adopted version), and a lock
#: per classifier would be an attribute that copies, clones and pickles must leave out.
_FOLLOW_LOCK = threading.Lock()


def view_of(index):
    """The version ``index`` serves now: its :meth:`_view` (an object no refresh changes) for a
    loaded index, the index itself otherwise (built in memory, or a wrapper: tests and
    benchmarks wrap an index to replay a clock, and its view would bypass them)."""
    from polydom.index.base import StoredIndex

    return index._view() if isinstance(index, StoredIndex) else index


def _frozen_classes(classes) -> np.ndarray:
    """A read-only copy: a state's classes cannot change under a request."""
    out = np.array(classes, copy=True)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class ServingState:
    """Everything a request reads, for one version of the classifier's index.

    Attributes
    ----------
    source : index
        The index object the classifier holds (``index_``) when this state was built.
    index : index
        The version served: ``view_of(source)`` when built. Nothing changes it.
    planner : ServingPlanner
        Serves from ``index``; holds the per-set plans and the learned guards of this version.
    classes : ndarray
        ``classes_``, read-only.
    feature_names : tuple of str
        ``index.features`` less the steps the features share (``featurizers.Step``): those are
        items of the lattice, timed and costed, but add no columns.
    feature_columns : mapping of str to slice
        Each feature's column range (read-only mapping), keyed in ``feature_names`` order.
    cost_fits, cost_curves : dict of str to CostFit, CostCurve
        As fitted or loaded (the index holds the curves serving reads; these are for
        ``recost`` and ``save``).
    n0 : float
    timing_sides : tuple of int
    fit_stats : dict
        Informational; serving never reads it.
    path, version : str or None
        Where the version was published (None for a classifier never saved or loaded).
    feature_modules : tuple of str
        The modules the loader trusted to define custom features; a new version is loaded with
        the same trust.
    decode_fit : CostFit or None
        The decode step's cost (:func:`~polydom.costs.decode.fit_decode_cost`), where the
        training images came encoded.
    multilabel : bool
        Whether each answer is one 0/1 value per label; ``classes`` are then the label names.

    Notes
    -----
    Invariants: ``feature_names`` is ``index.features`` in order, less its steps, and ``feature_columns`` has one
    entry per feature, in that order; ``planner.index`` serves ``index`` (it is ``index`` unless
    a planner over the live index was assigned from outside, whose ``_view()`` was ``index``);
    every class a stored model predicts is in ``classes`` (checked when built from a saved
    version). A new state is made with :meth:`replace`, never by changing this one.
    """

    source: Any
    index: Any
    planner: Any
    classes: np.ndarray
    feature_names: tuple
    feature_columns: Mapping
    cost_fits: Mapping
    cost_curves: Mapping
    n0: float
    timing_sides: tuple
    fit_stats: dict
    path: str | None = None
    version: str | None = None
    feature_modules: tuple = ()
    decode_fit: Any = None
    multilabel: bool = False

    @classmethod
    def build(cls, source, *, features, classes, columns, cost_fits, n0, timing_sides, fit_stats, cascade,
              path=None, version=None, index=None, feature_modules=(), decode_fit=None,
              multilabel=False) -> "ServingState":
        """A state serving ``index`` (default ``view_of(source)``) with a new planner over it.

        ``features`` maps names to :class:`~polydom.featurizers.Feature` objects (at least the
        index's; the :class:`~polydom.featurizers.Step` objects they require are added);
        ``columns`` maps names to slices.
        """
        from polydom.featurizers import Step, with_steps
        from polydom.serving.planner import ServingPlanner

        index = view_of(source) if index is None else index
        features = {f.name: f for f in with_steps(features.values())}  # and the steps they share
        # The features, in the index's order; its steps add no columns and are not features.
        names = tuple(n for n in index.features if not isinstance(features.get(n), Step))
        # The classifier's own planner learns nothing: predicting leaves the fitted state as it is
        # (a service that should learn its guards asks for a Server).
        planner = ServingPlanner(index, features, cascade=bool(cascade), learn=False, decode=decode_fit)
        return cls(
            source=source, index=index, planner=planner, classes=_frozen_classes(classes), feature_names=names,
            feature_columns=types.MappingProxyType({n: columns[n] for n in names}),
            cost_fits=cost_fits, cost_curves={name: fit.curve for name, fit in cost_fits.items()},
            n0=float(n0), timing_sides=tuple(int(s) for s in timing_sides), fit_stats=fit_stats,
            path=path, version=version, feature_modules=tuple(feature_modules), decode_fit=decode_fit,
            multilabel=bool(multilabel),
        )

    def replace(self, **changes) -> "ServingState":
        """A copy with ``changes``; columns and classes are frozen as :meth:`build` freezes them."""
        if "classes" in changes:
            changes["classes"] = _frozen_classes(changes["classes"])
        if "feature_columns" in changes and not isinstance(changes["feature_columns"], types.MappingProxyType):
            changes["feature_columns"] = types.MappingProxyType(dict(changes["feature_columns"]))
        return dataclasses.replace(self, **changes)

    def current(self) -> bool:
        """Whether ``source`` still serves the version this state was built from (``O(1)``)."""
        return view_of(self.source) is self.index

    @property
    def answers(self):
        """The shape of this version's answers (:class:`~polydom.serving.answers.Answers`)."""
        from polydom.serving.answers import Answers

        return Answers(self.classes, self.multilabel)


@dataclass(frozen=True, eq=False)
class Refusal:
    """A version the classifier cannot serve: every request raises ``error``'s message anew.

    ``source``, ``index`` and ``feature_modules`` as in :class:`ServingState`: a later refresh
    of ``source`` to another version is followed again, with the same trust.
    """

    source: Any
    index: Any
    error: PolydomError
    kind: type = PolydomError
    feature_modules: tuple = ()

    def current(self) -> bool:
        return view_of(self.source) is self.index

    def raise_(self):
        """Raise a ``kind`` (:class:`~polydom.classifier.classifier_state.ClassifierStateError` for the
        classifier) anew per request: one exception object raised in several threads would share
        its traceback."""
        raise self.kind(str(self.error)) from self.error


def follow(owner, rebuild, refuse_as: type, attribute: str = "_serving"):
    """The state ``owner.<attribute>`` should serve now: itself while current, else one built
    from the source's new version by ``rebuild(source, view, where) -> (meta, state)`` and
    assigned in one step (or a :class:`Refusal` raising ``refuse_as``).

    Rebuilds are serialised (:data:`_FOLLOW_LOCK`): threads that find the state stale together
    build it once, and none assigns a state older than the one it found. The caller passes the
    rebuild (the classifier's state loader), so this module imports nothing above it.
    """
    with _FOLLOW_LOCK:
        state = owner.__dict__[attribute]
        if state.current():
            return state
        source = state.source
        view = view_of(source)
        store = view._store
        where = store.path if store is not None else "its path"
        try:
            _, fresh = rebuild(source, view, where)
        except PolydomError as exc:
            # Not servable by this classifier: refuse, loudly and at every request, rather than
            # serve the new version through the old one's columns and classes.
            fresh = Refusal(source, view, exc, refuse_as, state.feature_modules)
        owner.__dict__[attribute] = fresh
        return fresh
