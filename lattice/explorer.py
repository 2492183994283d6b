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

With a black box that trains asynchronously (:class:`ExpansionCache` over one with ``submit`` and
``collect``, as polydom's parallel builds have), a set is asked for as soon as its test is
decided, not when its layer's turn comes: while sets are in flight the explorer reasons with
intervals (a pending accuracy lies in the black box's ``value_bounds``), decides every test on
which all outcomes agree, and waits only for the sets the others depend on. Before it waits, it
gives the black box's idle workers (if it says how many it has) the sets likeliest to be asked
for next (:meth:`_LayerLoop.speculate`); a guess decides nothing. The explored sets, the pruned
sets and their order are those of the layer-by-layer loop, whatever order the results come back
in.

The lattice knows nothing about costs: it sees accuracies only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from .expansioncache import ExpansionCache
from .featureset import FeatureSpace, canonical_key

__all__ = ["ExpansionCache", "Exploration", "explore", "naive_expand_all", "SANDWICH_MODES"]

SANDWICH_MODES = ("all", "snapshot", "literal")


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
        Black-box calls made during this exploration (cache hits excluded; sets started on idle
        workers and never asked for included).
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
    """Expanded masks with their accuracy intervals in growable numpy arrays, for vectorised
    subset tests. A known accuracy is the interval ``[a, a]``; a pending one the black box's
    bounds, with ``pending`` set."""

    def __init__(self, capacity: int = 64):
        self.masks = np.zeros(capacity, dtype=np.int64)
        self.lo = np.zeros(capacity, dtype=np.float64)
        self.hi = np.zeros(capacity, dtype=np.float64)
        self.pending = np.zeros(capacity, dtype=bool)
        self.row: dict[int, int] = {}
        self.n = 0

    def add(self, mask: int, lo: float, hi: float, pending: bool) -> None:
        if self.n == len(self.masks):
            grow = len(self.masks)
            self.masks = np.concatenate([self.masks, np.zeros(grow, dtype=np.int64)])
            self.lo = np.concatenate([self.lo, np.zeros(grow)])
            self.hi = np.concatenate([self.hi, np.zeros(grow)])
            self.pending = np.concatenate([self.pending, np.zeros(grow, dtype=bool)])
        self.masks[self.n], self.lo[self.n], self.hi[self.n], self.pending[self.n] = mask, lo, hi, pending
        self.row[mask] = self.n
        self.n += 1

    def resolve(self, mask: int, acc: float) -> None:
        r = self.row[mask]
        self.lo[r] = self.hi[r] = acc
        self.pending[r] = False

    def bounds(self, s: int) -> tuple[float, float, float, float, np.ndarray]:
        """``(low_lo, low_hi, high_lo, high_hi, comparable)``: bounds of the best strict subset's
        and the worst strict superset's accuracy (``-inf`` / ``inf`` when there is none)."""
        m = self.masks[: self.n]
        inter = m & s
        strict = m != s
        sub = (inter == m) & strict
        sup = (inter == s) & strict
        if sub.any():
            low_lo, low_hi = float(self.lo[: self.n][sub].max()), float(self.hi[: self.n][sub].max())
        else:
            low_lo = low_hi = -math.inf
        if sup.any():
            high_lo, high_hi = float(self.lo[: self.n][sup].min()), float(self.hi[: self.n][sup].min())
        else:
            high_lo = high_hi = math.inf
        return low_lo, low_hi, high_lo, high_hi, sub | sup

    def blockers(self, comparable: np.ndarray) -> list[int]:
        return [int(x) for x in self.masks[: self.n][comparable & self.pending[: self.n]]]


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

    With a black box that streams (an :class:`ExpansionCache` over one with ``submit`` and
    ``collect``), a set is trained as soon as its fate is certain, not when its layer's turn
    comes: a test that involves sets still training is decided from the black box's
    ``value_bounds`` when every outcome in them agrees, and waits for the sets it involves
    otherwise. The explored sets, the pruned sets and their order are those of the layer-by-layer
    loop, whatever order the results come back in.
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
    if sandwich == "literal":
        _explore_literal(space, cache, result, alpha, e, covering)
    else:
        try:
            _explore_layers(space, cache, result, alpha, e, sandwich, covering)
        except BaseException:
            cache.cancel()  # nothing is left training for an exploration that is over
            raise
    result.pruned -= set(result.accuracy)
    result.calls = cache.calls - calls_before
    return result


def _sandwiches(low: float, high: float, alpha: float, e: float) -> bool:
    """Property 3.11 on the best subset's and the worst superset's accuracy.

    Monotone: never false for a larger ``low`` or a smaller ``high`` where it is true, so an
    interval's corners bound it.
    """
    return low > -math.inf and high < math.inf and alpha * (low - e) >= high


def _explore_layers(space, cache: ExpansionCache, result: Exploration, alpha, e, mode, covering) -> None:
    """Modes ``"all"`` and ``"snapshot"``: the layer-by-layer loop, asking for each set as soon as
    its test is decided (see :func:`explore`)."""
    _LayerLoop(space, cache, result, alpha, e, mode, covering).run()


class _LayerLoop:
    """The state of one layer-by-layer exploration: the sets expanded so far (in the loop's
    order), the frontiers, and the black box's accuracies or, for sets in flight, its bounds."""

    def __init__(self, space, cache: ExpansionCache, result: Exploration, alpha, e, mode, covering):
        self.space, self.cache, self.result = space, cache, result
        self.alpha, self.e, self.mode, self.covering = alpha, e, mode, covering
        self.bound_lo, self.bound_hi = cache.value_bounds
        self.order: list[int] = []  # expanded sets in the layer-by-layer loop's order
        self.expanded: set[int] = set()
        self.arrays = _ExpandedArrays() if mode == "all" and len(space) <= 62 else None
        self.frontier_top: set[int] = set()
        self.frontier_bot: set[int] = set()
        # The sets the next layers will test, soonest first: while the loop waits, idle workers
        # start those (``ExpansionCache.speculate``) instead of idling until a test decides them.
        self.upcoming: tuple[set[int], ...] = ()

    def interval(self, m: int) -> tuple[float, float, bool]:
        """``(lo, hi, pending)`` of an expanded set's accuracy."""
        acc = self.cache.accuracy.get(m)
        if acc is not None:
            return acc, acc, False
        assert m in self.cache.pending, f"expanded set {m} neither trained nor in flight"
        return self.bound_lo, self.bound_hi, True

    def absorb(self) -> list[int]:
        arrived = self.cache.arrivals()
        if self.arrays is not None:
            for m in arrived:
                if m in self.arrays.row:
                    self.arrays.resolve(m, self.cache.accuracy[m])
        return arrived

    def settle(self, items: list[int], decide, on_decided) -> None:
        """Decide every item; ``decide(x) -> (True | False | None, blockers)`` is retried when one
        of its blockers (sets in flight it depends on) comes back."""
        cache = self.cache
        self.absorb()  # what came back since: the tests must see it (a stale interval would wait on nothing)
        decided: set[int] = set()
        waiting: dict[int, list[int]] = {}
        todo = items
        while True:
            for x in todo:
                verdict, blockers = decide(x)
                if verdict is None:
                    assert blockers and all(b in cache.pending for b in blockers), "an undecided test waits on nothing"
                    for b in blockers:
                        waiting.setdefault(b, []).append(x)
                else:
                    decided.add(x)
                    on_decided(x, verdict)
            on_decided(None, None)  # end of a pass: submit what it decided, together
            if len(decided) == len(items):
                return
            arrived = self.absorb()
            while not any(b in waiting for b in arrived):
                self.speculate([x for x in items if x not in decided])
                cache.collect()
                arrived = self.absorb()
            todo = sorted({x for b in arrived for x in waiting.pop(b, ()) if x not in decided}, key=canonical_key)

    def speculate(self, undecided: list[int]) -> None:
        """Before a wait, give idle workers the sets likeliest to be asked for next: the ones
        whose tests wait now, then the next layers' sets in the order they will be tested.
        Nothing is decided from them; a set is expanded only when its own test says so."""
        room = self.cache.idle_workers()
        if room <= 0:
            return
        skip = (self.cache.accuracy, self.cache.pending, self.expanded, self.result.pruned, self.cache.declined)
        picks: list[int] = []
        for group in (undecided, *(sorted(g, key=canonical_key) for g in self.upcoming)):
            likely, maybe = [], []
            for s in group:
                if any(s in done for done in skip) or s in picks:  # picks: at most ``room`` sets
                    continue
                # What the sets known now say: certainly sandwiched is no use; certainly not
                # sandwiched goes first.
                verdict, _ = self.test(s, self.expanded, self.expanded)
                if verdict is False:
                    likely.append(s)
                    if len(picks) + len(likely) == room:
                        break
                elif verdict is None:
                    maybe.append(s)
            picks += likely + maybe
            if len(picks) >= room:
                break
        if picks:
            self.cache.speculate(picks[:room])

    def test(self, s: int, bottom: set[int], top: set[int]):
        """Whether ``s`` is sandwiched: True, False, or None with the sets in flight it waits on."""
        arrays, alpha, e = self.arrays, self.alpha, self.e
        if arrays is not None:
            low_lo, low_hi, high_lo, high_hi, comparable = arrays.bounds(s)
        else:
            subsets = [m for m in bottom if m & s == m and m != s]
            supersets = [m for m in top if m & s == s and m != s]
            lows = [self.interval(m) for m in subsets]
            highs = [self.interval(m) for m in supersets]
            low_lo = max((lo for lo, _, _ in lows), default=-math.inf)
            low_hi = max((hi for _, hi, _ in lows), default=-math.inf)
            high_lo = min((lo for lo, _, _ in highs), default=math.inf)
            high_hi = min((hi for _, hi, _ in highs), default=math.inf)
        # With every accuracy known the two corners coincide and this is the plain test.
        if _sandwiches(low_lo, high_hi, alpha, e):
            return True, ()
        if not _sandwiches(low_hi, high_lo, alpha, e):
            return False, ()
        if arrays is not None:
            return None, arrays.blockers(comparable)
        return None, [m for m in subsets + supersets if m in self.cache.pending]

    def fails(self, x: tuple, y: tuple):
        """Whether ``alpha * (x - e) < y`` for intervals ``x``, ``y``: True, False or None."""
        if self.alpha * (x[1] - self.e) < y[0]:
            return True
        if not self.alpha * (x[0] - self.e) < y[1]:
            return False
        return None

    def run(self) -> None:
        """Explore round by round, top layer then bottom layer, until no layer is active; then
        wait for the sets in flight and record every expanded set's accuracy."""
        cache, result = self.cache, self.result
        active_top, active_bot = {self.space.full}, {0}
        while active_top or active_bot:
            result.rounds += 1
            snapshot = (set(self.frontier_bot), set(self.frontier_top))
            next_top: set[int] = set()
            next_bot: set[int] = set()
            self.upcoming = (active_bot, next_top)
            self.layer("top", active_top, next_top, snapshot)
            self.upcoming = (next_top, next_bot)
            self.layer("bottom", active_bot, next_bot, snapshot)
            active_top, active_bot = next_top, next_bot
        while any(m in cache.pending for m in self.order):
            cache.collect()
        cache.drop_speculative()  # what nobody asked for is not waited on
        self.absorb()
        for m in self.order:
            result.accuracy[m] = cache.accuracy[m]

    def layer(self, direction: str, active: set[int], grown: set[int], snapshot) -> None:
        """Test one layer's sets, ask for those not sandwiched, and grow the next layer."""
        cache, arrays, space = self.cache, self.arrays, self.space
        # A layer's sets all have one size, so none can sandwich another: every test reads
        # the sets expanded in earlier layers only.
        # Mode "all" reads every set expanded so far (vectorised unless masks outgrow int64).
        bottom, top = snapshot if self.mode == "snapshot" else (self.expanded, self.expanded)
        candidates = [s for s in sorted(active, key=canonical_key) if s not in self.expanded]
        verdicts: dict[int, bool] = {}
        wanted: list[int] = []

        def on_tested(s, sandwiched):
            if s is None:
                if wanted:
                    cache.submit(sorted(wanted, key=canonical_key))
                    wanted.clear()
                return
            verdicts[s] = sandwiched
            if not sandwiched:
                wanted.append(s)

        self.settle(candidates, lambda s: self.test(s, bottom, top), on_tested)
        newly = [s for s in candidates if not verdicts[s]]
        self.result.pruned.update(s for s in candidates if verdicts[s])
        for s in newly:
            self.order.append(s)
            self.expanded.add(s)
            if arrays is not None:
                lo, hi, pending = self.interval(s)
                arrays.add(s, lo, hi, pending)
            _advance_frontier(space, direction, s, grown, self.frontier_bot, self.frontier_top)
        if self.covering:
            _settle_covering(space, direction, newly, grown, self.frontier_bot, self.frontier_top, self.interval,
                             self.fails, self.settle)


def _advance_frontier(space, direction, s, grown, frontier_bot, frontier_top) -> None:
    """Queue the next layer's neighbours of freshly expanded ``s`` and update the frontiers."""
    if direction == "top":
        grown.update(space.children(s))
        frontier_top.add(s)
        frontier_top.difference_update(space.parents(s))
    else:
        grown.update(space.parents(s))
        frontier_bot.add(s)
        frontier_bot.difference_update(space.children(s))


def _settle_covering(space, direction, newly, grown, frontier_bot, frontier_top, interval, fails, settle) -> None:
    """Drop queued neighbours of freshly expanded sets that a frontier pair sandwiches.

    For a bottom set ``F``: if every top-frontier superset ``F'`` of ``F`` satisfies
    ``alpha * (a(F) - e) >= a(F')``, each parent of ``F`` lying strictly inside one of those
    ``F'`` is sandwiched and is not queued. Symmetrically for top sets and their children.
    Decided from accuracy intervals like the tests; the frontiers are those after this layer.
    """
    covers_of = {}
    for f in newly:
        if direction == "bottom" and f in frontier_bot:
            covers_of[f] = [m for m in frontier_top if m & f == f and m != f]
        elif direction == "top" and f in frontier_top:
            covers_of[f] = [m for m in frontier_bot if m & f == m and m != f]

    def decide(f):
        covers = covers_of.get(f)
        if not covers:
            return False, ()
        af = interval(f)
        undecided = False
        for m in covers:
            am = interval(m)
            # Not covering as soon as one pair fails, as the plain loop's any() says.
            broken = fails(af, am) if direction == "bottom" else fails(am, af)
            if broken:
                return False, ()
            undecided = undecided or broken is None
        if not undecided:
            return True, ()
        return None, [m for m in [f, *covers] if interval(m)[2]]

    def on_decided(f, covering):
        if f is None or not covering:
            return
        covers = covers_of[f]
        neighbours = space.parents(f) if direction == "bottom" else space.children(f)
        for p in neighbours:
            if direction == "bottom":
                if any(p & m == p and p != m for m in covers):
                    grown.discard(p)
            elif any(p & m == m and p != m for m in covers):
                grown.discard(p)

    settle(list(newly), decide, on_decided)


def _explore_literal(space, cache: ExpansionCache, result: Exploration, alpha, e, covering) -> None:
    """Mode ``"literal"``: Algorithm 2 as printed, the live frontiers changing while a layer is
    processed -- strictly one set at a time (an ablation; it never trains in parallel)."""
    acc = result.accuracy
    frontier_top: dict[int, float] = {}
    frontier_bot: dict[int, float] = {}

    def sandwiched(s: int) -> bool:
        low, high = _frontier_low_high(s, frontier_bot, frontier_top)
        return _sandwiches(low, high, alpha, e)

    active_top, active_bot = {space.full}, {0}
    while active_top or active_bot:
        result.rounds += 1
        next_top: set[int] = set()
        next_bot: set[int] = set()
        for direction in ("top", "bottom"):
            active = active_top if direction == "top" else active_bot
            grown = next_top if direction == "top" else next_bot
            newly = []
            for s in sorted(active, key=canonical_key):
                if s in acc:
                    continue
                if sandwiched(s):
                    result.pruned.add(s)
                    continue
                acc[s] = cache(s)
                newly.append(s)
                if direction == "top":
                    grown.update(space.children(s))
                    frontier_top[s] = acc[s]
                    for p in space.parents(s):
                        frontier_top.pop(p, None)
                else:
                    grown.update(space.parents(s))
                    frontier_bot[s] = acc[s]
                    for c in space.children(s):
                        frontier_bot.pop(c, None)
            if covering:
                _apply_covering(space, direction, newly, grown, frontier_bot, frontier_top, alpha, e)
        active_top, active_bot = next_top, next_bot


def _frontier_low_high(s: int, bottom: dict[int, float], top: dict[int, float]) -> tuple[float, float]:
    low = max((a for m, a in bottom.items() if m & s == m and m != s), default=-math.inf)
    high = min((a for m, a in top.items() if m & s == s and m != s), default=math.inf)
    return low, high


def _apply_covering(space, direction, newly, grown, frontier_bot, frontier_top, alpha, e) -> None:
    """The covering step on known accuracies (the literal mode's frontier dicts)."""
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
