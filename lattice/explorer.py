"""Bidirectional lattice exploration (the paper's EXPAND-ENUMERATE, Algorithm 2) and NaiveExpandAll.

The explorer walks the lattice of feature subsets one layer from the top and one from the bottom
per round, expanding (training a model for) every set that is not *sandwiched*. A set ``s`` is
sandwiched when two expanded sets ``lo ⊊ s ⊊ hi`` satisfy ``alpha * (a(lo) - e) >= a(hi)``
(Property 3.11): then ``lo`` alpha-dominates ``s`` and ``s`` need not be trained.

Which pairs count is the ``sandwich`` mode:

``"all"`` (default)
    any pair of expanded sets. Reproduces the paper's Figure 2 and Figure 6.
``"snapshot"``
    pairs from the bottom and top frontiers as they stood at the start of the round.
``"literal"``
    pairs from the live frontiers, updated while a layer is processed (Algorithm 2 as printed;
    it does not reproduce Figure 2 and is kept for ablations only).

A pruned set does not propagate: its children (or parents) are not queued from it, which is how
the Covering-Property keeps unreachable parts of the lattice unvisited. Layers are processed in
:func:`~lattice.featureset.canonical_key` order, so results never depend on set hashing (which
varies between processes).

The lattice knows nothing about costs: it sees accuracies only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from .featureset import FeatureSpace, canonical_key

__all__ = ["ExpansionCache", "Exploration", "explore", "naive_expand_all", "SANDWICH_MODES"]

SANDWICH_MODES = ("all", "snapshot", "literal")


class ExpansionCache:
    """Calls the black box at most once per feature set and counts the calls.

    Parameters
    ----------
    expand : callable
        ``expand(mask) -> float``: train and score a model on exactly the features in ``mask``.
        Whatever else the caller needs (the model) it keeps itself, keyed by mask.
    expand_many : callable, optional
        ``expand_many(masks) -> list of float``: the same for a batch, in order. The explorer
        hands it a whole lattice layer at once, so it may train the sets in parallel.

    Attributes
    ----------
    accuracy : dict[int, float]
        Every set trained so far.
    calls : int
        Number of sets the black box was asked to train.
    """

    def __init__(self, expand: Callable[[int], float], expand_many: Callable[[list[int]], list[float]] | None = None):
        self._expand = expand
        self._expand_many = expand_many
        self.accuracy: dict[int, float] = {}
        self.calls = 0

    def __call__(self, mask: int) -> float:
        acc = self.accuracy.get(mask)
        if acc is None:
            acc = self._expand(mask)
            self.calls += 1
            self.accuracy[mask] = acc
        return acc

    def many(self, masks: list[int]) -> list[float]:
        """Accuracies of ``masks``, training the uncached ones as one batch."""
        todo = [m for m in dict.fromkeys(masks) if m not in self.accuracy]
        if todo:
            if self._expand_many is None:
                for m in todo:
                    self(m)
            else:
                results = list(self._expand_many(todo))
                if len(results) != len(todo):
                    raise RuntimeError(f"expand_many returned {len(results)} results for {len(todo)} sets")
                self.calls += len(todo)
                self.accuracy.update(zip(todo, results))
        return [self.accuracy[m] for m in masks]


@dataclass
class Exploration:
    """What an exploration saw.

    Attributes
    ----------
    space : FeatureSpace
    accuracy : dict[int, float]
        The expanded sets of this exploration, in expansion order, with their accuracies.
    pruned : set[int]
        Sets that were reached, tested, and found sandwiched (never expanded).
    rounds : int
        Number of top/bottom round pairs.
    calls : int
        Black-box calls made during this exploration (cache hits excluded).
    """

    space: FeatureSpace
    accuracy: dict[int, float] = field(default_factory=dict)
    pruned: set[int] = field(default_factory=set)
    rounds: int = 0
    calls: int = 0
    alpha: float = 1.0
    e: float = 0.0
    mode: str = "all"

    @property
    def expanded(self) -> list[int]:
        """Expanded masks in expansion order."""
        return list(self.accuracy)

    def expanded_sets(self) -> dict[frozenset[str], float]:
        """The expanded sets by name, with their accuracies."""
        return {self.space.frozenset(m): a for m, a in self.accuracy.items()}


class _ExpandedArrays:
    """Expanded masks and accuracies in growable numpy arrays, for vectorised subset tests."""

    def __init__(self, capacity: int = 64):
        self.masks = np.zeros(capacity, dtype=np.int64)
        self.acc = np.zeros(capacity, dtype=np.float64)
        self.n = 0

    def add(self, mask: int, acc: float) -> None:
        if self.n == len(self.masks):
            self.masks = np.concatenate([self.masks, np.zeros_like(self.masks)])
            self.acc = np.concatenate([self.acc, np.zeros_like(self.acc)])
        self.masks[self.n] = mask
        self.acc[self.n] = acc
        self.n += 1

    def best_low_min_high(self, s: int) -> tuple[float, float]:
        m = self.masks[: self.n]
        a = self.acc[: self.n]
        inter = m & s
        strict = m != s
        sub = (inter == m) & strict
        sup = (inter == s) & strict
        low = a[sub].max() if sub.any() else -math.inf
        high = a[sup].min() if sup.any() else math.inf
        return float(low), float(high)


def _frontier_low_high(s: int, bottom: dict[int, float], top: dict[int, float]) -> tuple[float, float]:
    low = max((a for m, a in bottom.items() if m & s == m and m != s), default=-math.inf)
    high = min((a for m, a in top.items() if m & s == s and m != s), default=math.inf)
    return low, high


def explore(
    space: FeatureSpace,
    expand: Callable[[int], float] | ExpansionCache,
    *,
    alpha: float = 1.0,
    e: float = 0.0,
    sandwich: str = "all",
    covering: bool = True,
) -> Exploration:
    """Explore the lattice of ``space`` bidirectionally with sandwich pruning.

    Parameters
    ----------
    space : FeatureSpace
    expand : callable or ExpansionCache
        ``expand(mask) -> accuracy``. Wrapped in an :class:`ExpansionCache` unless it is one, so
        each set is trained at most once; pass a shared cache to reuse training across runs.
    alpha : float, default 1.0
        Approximation factor, ``>= 1``.
    e : float, default 0.0
        Monotonicity tolerance, ``>= 0`` (Axiom 3.10).
    sandwich : {"all", "snapshot", "literal"}
        Which expanded pairs may sandwich a set (module docstring).
    covering : bool, default True
        After each layer, drop from the next layer the neighbours that a frontier pair already
        sandwiches (the Covering-Property in frontier form). In mode ``"all"`` this only saves
        tests; in the frontier modes it is part of the paper's method.

    Returns
    -------
    Exploration

    Notes
    -----
    ``{}`` and the full set are always expanded, in round 1. Each round costs one vectorised
    subset scan per tested set, negligible beside training.
    """
    if sandwich not in SANDWICH_MODES:
        raise ValueError(f"sandwich must be one of {SANDWICH_MODES}, got {sandwich!r}")
    if not (isinstance(alpha, (int, float)) and math.isfinite(alpha) and alpha >= 1.0):
        raise ValueError(f"alpha must be a finite number >= 1, got {alpha!r}")
    if not (isinstance(e, (int, float)) and math.isfinite(e) and e >= 0.0):
        raise ValueError(f"e must be a finite number >= 0, got {e!r}")
    cache = expand if isinstance(expand, ExpansionCache) else ExpansionCache(expand)
    calls_before = cache.calls
    result = Exploration(space=space, alpha=float(alpha), e=float(e), mode=sandwich)
    acc = result.accuracy
    arrays = _ExpandedArrays() if len(space) <= 62 else None
    frontier_top: dict[int, float] = {}
    frontier_bot: dict[int, float] = {}

    def sandwiched(s: int, bottom: dict[int, float], top: dict[int, float]) -> bool:
        if sandwich == "all":
            if arrays is not None:
                low, high = arrays.best_low_min_high(s)
            else:
                low, high = _frontier_low_high(s, acc, acc)
        else:
            low, high = _frontier_low_high(s, bottom, top)
        return low > -math.inf and high < math.inf and alpha * (low - e) >= high

    def record(s: int, a: float) -> None:
        acc[s] = a
        if arrays is not None:
            arrays.add(s, a)

    active_top, active_bot = {space.full}, {0}
    while active_top or active_bot:
        result.rounds += 1
        snap_top, snap_bot = dict(frontier_top), dict(frontier_bot)
        next_top: set[int] = set()
        next_bot: set[int] = set()
        for direction in ("top", "bottom"):
            active = active_top if direction == "top" else active_bot
            grown = next_top if direction == "top" else next_bot
            if sandwich == "literal":
                # The live frontiers change while the layer is processed: strictly one at a time.
                newly = []
                for s in sorted(active, key=canonical_key):
                    if s in acc:
                        continue
                    if sandwiched(s, frontier_bot, frontier_top):
                        result.pruned.add(s)
                        continue
                    record(s, cache(s))
                    newly.append(s)
                    _advance_frontier(space, direction, s, acc[s], grown, frontier_bot, frontier_top)
            else:
                # A layer's sets all have one size, so none can sandwich another: test the whole
                # layer first, then train it as one batch. The explored sets are those of the
                # one-at-a-time loop; only the training may run in parallel.
                bottom, top = (snap_bot, snap_top) if sandwich == "snapshot" else (frontier_bot, frontier_top)
                newly = []
                for s in sorted(active, key=canonical_key):
                    if s in acc:
                        continue
                    if sandwiched(s, bottom, top):
                        result.pruned.add(s)
                    else:
                        newly.append(s)
                for s, a in zip(newly, cache.many(newly)):
                    record(s, a)
                    _advance_frontier(space, direction, s, a, grown, frontier_bot, frontier_top)
            if covering:
                _apply_covering(space, direction, newly, grown, frontier_bot, frontier_top, alpha, e)
        active_top, active_bot = next_top, next_bot
    result.pruned -= set(acc)
    result.calls = cache.calls - calls_before
    return result


def _advance_frontier(space, direction, s, a, grown, frontier_bot, frontier_top) -> None:
    """Queue the next layer's neighbours of freshly expanded ``s`` and update the frontiers."""
    if direction == "top":
        grown.update(space.children(s))
        frontier_top[s] = a
        for p in space.parents(s):
            frontier_top.pop(p, None)
    else:
        grown.update(space.parents(s))
        frontier_bot[s] = a
        for c in space.children(s):
            frontier_bot.pop(c, None)


def _apply_covering(space, direction, newly, grown, frontier_bot, frontier_top, alpha, e) -> None:
    """Drop queued neighbours of freshly expanded sets that a frontier pair sandwiches.

    For a bottom set ``F``: if every top-frontier superset ``F'`` of ``F`` satisfies
    ``alpha * (a(F) - e) >= a(F')``, each parent of ``F`` lying strictly inside one of those
    ``F'`` is sandwiched and is not queued. Symmetrically for top sets and their children.
    """
    for f in newly:
        if direction == "bottom":
            if f not in frontier_bot:
                continue
            af = frontier_bot[f]
            covers = [m for m in frontier_top if m & f == f and m != f]
            if not covers or any(alpha * (af - e) < frontier_top[m] for m in covers):
                continue
            for p in space.parents(f):
                if any(p & m == p and p != m for m in covers):
                    grown.discard(p)
        else:
            if f not in frontier_top:
                continue
            af = frontier_top[f]
            covers = [m for m in frontier_bot if m & f == m and m != f]
            if not covers or any(alpha * (frontier_bot[m] - e) < af for m in covers):
                continue
            for c in space.children(f):
                if any(c & m == m and c != m for m in covers):
                    grown.discard(c)


def naive_expand_all(space: FeatureSpace, expand: Callable[[int], float] | ExpansionCache) -> Exploration:
    """NaiveExpandAll: expand every one of the ``2**len(space)`` sets, ``{}`` included."""
    cache = expand if isinstance(expand, ExpansionCache) else ExpansionCache(expand)
    calls_before = cache.calls
    result = Exploration(space=space, mode="naive")
    for s in sorted(space.all_masks(), key=canonical_key):
        result.accuracy[s] = cache(s)
    result.rounds = len(space) + 1
    result.calls = cache.calls - calls_before
    return result


def masks_of(space: FeatureSpace, sets: Iterable[Iterable[str]]) -> list[int]:
    """Masks for several feature sets given by name."""
    return [space.mask(s) for s in sets]
