"""Preparatory steps that features share: a set pays for the union of its features' steps.

A step (decode, greyscale, a resized copy) is listed in ``build``'s ``costs`` beside the features,
with its own cost curve, and ``requires`` names the steps each feature needs. The lattice then
holds steps as items: a set's accuracy is that of the features whose steps it holds
(:class:`UsableSets`, monotone whenever the black box is), and its cost the sum of its items'
curves. A set that holds every step its features need costs exactly the union of those steps plus
its features, so the sweep's optimum over the lattice is the optimum under union costs: the
index stays exact, and a set of two features that share a step pays for the step once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["UsableSets", "check_requires", "closure"]


def check_requires(requires, names: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """``requires`` (feature -> steps) as a dict of sorted tuples, or one clear error: every name
    must be an item of ``costs``, a step needs no step, and a feature does not need itself."""
    if requires is None:
        return {}
    if not isinstance(requires, Mapping):
        raise TypeError(f"requires must map feature names to the steps they need, got {type(requires).__name__}")
    names = list(names)
    known = set(names)
    out = {}
    for feature, steps in requires.items():
        steps = (steps,) if isinstance(steps, str) else tuple(steps)
        unknown = [n for n in (feature, *steps) if n not in known]
        if unknown:
            raise ValueError(f"requires names {unknown}, which costs does not list")
        if feature in steps:
            raise ValueError(f"feature {feature!r} requires itself")
        if steps:
            out[feature] = tuple(sorted(set(steps), key=names.index))
    needed = {s for steps in out.values() for s in steps}
    chained = sorted(needed & set(out))
    if chained:
        raise ValueError(f"steps need no steps of their own: {chained}")
    return out


def closure(features: Iterable[str], requires: Mapping[str, Iterable[str]]) -> frozenset[str]:
    """``features`` with every step they require."""
    features = frozenset(features)
    return features | frozenset(s for f in features for s in requires.get(f, ()))


class UsableSets:
    """The black box over features and steps: ``expand`` of the features whose steps are all in
    the set (steps themselves carry nothing), called once per such feature set.

    Where ``expand`` offers the optional parts of the black-box protocol (``screens`` with
    ``finish``, ``rescore``, ``remember``), so does this, on the usable sets: a classifier's
    screening learner keeps screening when its features share steps.

    Picklable (its cache travels empty), so parallel builds ship it to their workers.
    """

    def __init__(self, expand, requires: Mapping[str, Iterable[str]]):
        self.expand = expand
        self.requires = {f: frozenset(steps) for f, steps in requires.items()}
        self.steps = frozenset(s for steps in self.requires.values() for s in steps)
        self._cache: dict = {}

    def usable(self, names) -> frozenset[str]:
        """The features of ``names`` whose steps are all in ``names``."""
        names = frozenset(names)
        return frozenset(n for n in names - self.steps if self.requires.get(n, frozenset()) <= names)

    def __call__(self, names):
        key = self.usable(names)
        if self.screens:  # a screened set's result changes once it is finished: ask each time
            return self.expand(key)
        if key not in self._cache:
            self._cache[key] = self.expand(key)
        return self._cache[key]

    @property
    def screens(self) -> bool:
        return bool(getattr(self.expand, "screens", False))

    @property
    def finish(self):
        return self._on_usable("finish")

    @property
    def rescore(self):
        return self._on_usable("rescore")

    @property
    def remember(self):
        inner = getattr(self.expand, "remember", None)
        if not callable(inner):
            return None
        return lambda names, result: inner(self.usable(names), result)

    def _on_usable(self, name):
        """``expand``'s method ``name`` over the usable sets of the sets it is given, or None
        where ``expand`` has none (the recorder then does without it)."""
        inner = getattr(self.expand, name, None)
        if not callable(inner):
            return None
        return lambda sets: inner([self.usable(names) for names in sets])

    def __getstate__(self):
        return {"expand": self.expand, "requires": self.requires, "steps": self.steps, "_cache": {}}
