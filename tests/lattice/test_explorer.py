"""The bidirectional explorer against the paper's Figure 2 lattice and exhaustive checks."""

import math
import random

import networkx as nx
import pytest

from polydom.lattice import ExpansionCache, FeatureSpace, audit_monotonicity, explore, lattice_graph, naive_expand_all
from polydom.lattice.featureset import canonical_key

FIG2 = {
    "": 0.50, "1": 0.78, "2": 0.70, "3": 0.75, "4": 0.60,
    "12": 0.86, "13": 0.80, "14": 0.78, "23": 0.75, "24": 0.75, "34": 0.75,
    "123": 0.86, "124": 0.90, "134": 0.83, "234": 0.75, "1234": 0.96,
}
SPACE = FeatureSpace(["f1", "f2", "f3", "f4"])


def fig2_accuracy(mask: int) -> float:
    return FIG2["".join(str(i + 1) for i in range(4) if mask >> i & 1)]


def names(masks):
    return {"".join(sorted(s.replace("f", "") for s in SPACE.frozenset(m))) for m in masks}


@pytest.mark.parametrize("mode", ["all", "snapshot"])
def test_figure2_alpha1_prunes_f2f3_and_f3f4(mode):
    result = explore(SPACE, fig2_accuracy, alpha=1.0, sandwich=mode)
    assert len(result.accuracy) == 14
    assert result.calls == 14
    missing = set(SPACE.all_masks()) - set(result.accuracy)
    assert names(missing) == {"23", "34"}


@pytest.mark.parametrize("mode", ["all", "snapshot", "literal"])
def test_figure2_alpha_1_1_expands_11(mode):
    result = explore(SPACE, fig2_accuracy, alpha=1.1, sandwich=mode)
    assert len(result.accuracy) == 11
    missing = set(SPACE.all_masks()) - set(result.accuracy)
    assert names(missing) == {"13", "14", "23", "24", "34"}
    middle = [m for m in result.accuracy if m.bit_count() == 2]
    assert names(middle) == {"12"}


def test_literal_mode_loses_the_pair_and_expands_everything():
    # Alg. 2 as printed drops f2f3f4 from the top frontier before the middle layer.
    result = explore(SPACE, fig2_accuracy, alpha=1.0, sandwich="literal")
    assert len(result.accuracy) == 16


def test_each_set_is_trained_once_and_cache_is_shared():
    calls = []

    def expand(mask):
        calls.append(mask)
        return fig2_accuracy(mask)

    cache = ExpansionCache(expand)
    first = explore(SPACE, cache, alpha=1.1)
    second = explore(SPACE, cache, alpha=1.0)
    assert len(calls) == len(set(calls)) == 14
    assert first.calls == 11 and second.calls == 3
    assert cache.calls == 14


def test_processing_order_is_deterministic():
    a = explore(SPACE, fig2_accuracy, alpha=1.1, sandwich="literal")
    b = explore(SPACE, fig2_accuracy, alpha=1.1, sandwich="literal")
    assert list(a.accuracy) == list(b.accuracy)
    assert list(a.accuracy)[:2] == [SPACE.full, 0]


def test_naive_expand_all_counts_every_set():
    result = naive_expand_all(SPACE, fig2_accuracy)
    assert result.calls == 16 and set(result.accuracy) == set(SPACE.all_masks())


def _random_monotone(n, rng, plateau=False):
    base = {m: (round(rng.random(), 1) if plateau else rng.random()) for m in range(1 << n)}
    acc = {}
    for m in sorted(base, key=int.bit_count):
        acc[m] = max([base[m]] + [acc[m & ~(1 << i)] for i in range(n) if m >> i & 1])
    return acc


@pytest.mark.parametrize("seed", range(25))
@pytest.mark.parametrize("mode", ["all", "snapshot", "literal"])
def test_pruned_sets_are_alpha_dominated_by_an_expanded_subset(seed, mode):
    """Soundness of pruning: every unexpanded set has an expanded subset within a factor alpha."""
    rng = random.Random(seed)
    n = rng.randint(1, 7)
    alpha = rng.choice([1.0, 1.1, 1.2])
    acc = _random_monotone(n, rng, plateau=seed % 2 == 0)
    space = FeatureSpace([f"x{i}" for i in range(n)])
    result = explore(space, acc.__getitem__, alpha=alpha, sandwich=mode)
    for m in space.all_masks():
        if m in result.accuracy:
            continue
        assert any(s & m == s and alpha * a >= acc[m] for s, a in result.accuracy.items()), m


def test_relaxed_e_prunes_less():
    rng = random.Random(3)
    acc = _random_monotone(6, rng)
    space = FeatureSpace([f"x{i}" for i in range(6)])
    strict = explore(space, acc.__getitem__, alpha=1.2, e=0.0)
    relaxed = explore(space, acc.__getitem__, alpha=1.2, e=0.05)
    assert len(relaxed.accuracy) >= len(strict.accuracy)


@pytest.mark.parametrize("bad", [dict(alpha=0.9), dict(alpha=float("nan")), dict(e=-0.1), dict(sandwich="frontier")])
def test_bad_parameters(bad):
    with pytest.raises(ValueError):
        explore(SPACE, fig2_accuracy, **bad)


def test_feature_space_rejects_bad_names():
    with pytest.raises(TypeError, match="strings"):
        FeatureSpace(["a", 3])
    with pytest.raises(ValueError, match="duplicate"):
        FeatureSpace(["a", "a"])
    with pytest.raises(ValueError, match="at least one"):
        FeatureSpace([])
    with pytest.raises(ValueError, match="unknown feature 'z'"):
        SPACE.mask(["f1", "z"])


def test_children_and_parents():
    m = SPACE.mask(["f1", "f3"])
    assert {SPACE.frozenset(c) for c in SPACE.children(m)} == {frozenset({"f1"}), frozenset({"f3"})}
    assert {SPACE.frozenset(p) for p in SPACE.parents(m)} == {frozenset({"f1", "f2", "f3"}), frozenset({"f1", "f3", "f4"})}


def test_monotonicity_audit_against_pairs():
    acc = {0: 0.5, 1: 0.7, 2: 0.6, 3: 0.65}  # {f1} 0.7 > {f1,f2} 0.65: one violation of 0.05
    audit = audit_monotonicity(acc)
    assert audit.pairs == 5  # {}<1, {}<2, {}<3, 1<3, 2<3
    assert audit.violations.tolist() == pytest.approx([0.05])
    assert audit.distances.tolist() == [1]
    assert audit.max_violation == pytest.approx(0.05)
    assert audit.median_by_distance() == {1: pytest.approx(0.05)}
    x, f = audit.cdf()
    assert f[-1] == 1.0


def test_monotone_lattice_has_no_violations():
    audit = audit_monotonicity({m: fig2_accuracy(m) for m in SPACE.all_masks()})
    assert audit.max_violation == 0.0 and audit.pairs == 3**4 - 2**4


def test_lattice_graph_marks_nodes():
    result = explore(SPACE, fig2_accuracy, alpha=1.0)
    cand = [SPACE.mask(["f1"])]
    g = lattice_graph(result, candidates=cand, full=True)
    assert g.number_of_nodes() == 16 and g.number_of_edges() == 32
    statuses = nx.get_node_attributes(g, "status")
    assert statuses[SPACE.mask(["f1"])] == "candidate"
    assert statuses[SPACE.mask(["f2", "f3"])] == "pruned"
    assert statuses[SPACE.full] == "expanded"
    assert sum(s != "pruned" for s in statuses.values()) == 14
    assert all(g.nodes[v]["size"] == g.nodes[u]["size"] + 1 for u, v in g.edges)


# -- streaming: sets asked for as soon as they are decided -------------------------------------

def _reference_explore(space, acc, alpha, e, mode, covering):
    """The layer-by-layer loop as it was before streaming (modes "all" and "snapshot"): every
    layer tested against the sets expanded before it, then trained as one batch."""
    expanded, pruned, rounds = {}, set(), 0
    top_front, bot_front = {}, {}

    def sandwiched(s, bottom, top):
        low = max((a for m, a in bottom.items() if m & s == m and m != s), default=-math.inf)
        high = min((a for m, a in top.items() if m & s == s and m != s), default=math.inf)
        return low > -math.inf and high < math.inf and alpha * (low - e) >= high

    active = {"top": {space.full}, "bottom": {0}}
    while active["top"] or active["bottom"]:
        rounds += 1
        snap_top, snap_bot = dict(top_front), dict(bot_front)
        grown = {"top": set(), "bottom": set()}
        for direction in ("top", "bottom"):
            bottom, top = (snap_bot, snap_top) if mode == "snapshot" else (expanded, expanded)
            newly = []
            for s in sorted(active[direction], key=canonical_key):
                if s in expanded:
                    continue
                (pruned.add(s) if sandwiched(s, bottom, top) else newly.append(s))
            for s in newly:
                expanded[s] = acc[s]
                if direction == "top":
                    grown["top"].update(space.children(s))
                    top_front[s] = acc[s]
                    for p in space.parents(s):
                        top_front.pop(p, None)
                else:
                    grown["bottom"].update(space.parents(s))
                    bot_front[s] = acc[s]
                    for c in space.children(s):
                        bot_front.pop(c, None)
            for f in newly if covering else ():
                if direction == "bottom" and f in bot_front:
                    covers = [m for m in top_front if m & f == f and m != f]
                    if covers and all(alpha * (acc[f] - e) >= top_front[m] for m in covers):
                        grown["bottom"] -= {p for p in space.parents(f) if any(p & m == p and p != m for m in covers)}
                elif direction == "top" and f in top_front:
                    covers = [m for m in bot_front if m & f == m and m != f]
                    if covers and all(alpha * (bot_front[m] - e) >= acc[f] for m in covers):
                        grown["top"] -= {c for c in space.children(f) if any(c & m == m and c != m for m in covers)}
        active = grown
    return list(expanded.items()), pruned - set(expanded), rounds


class _Streaming:
    """A black box that trains asynchronously and finishes sets in a seeded random order: some
    at once (seen by a non-blocking collect), the rest a random handful per blocking collect.
    It records what was in flight whenever sets were asked for."""

    value_bounds = (0.0, 1.0)

    def __init__(self, acc, seed, fail_after=None, workers=None):
        self.acc, self.rng = acc, random.Random(seed)
        if workers is not None:  # says how many workers it has: idle ones get speculative sets
            self.workers = workers
        self.in_flight, self.done = [], []
        self.asked_while = []  # (sets asked for, sets in flight then)
        self.collects, self.fail_after, self.cancelled = 0, fail_after, False

    def __call__(self, mask):
        return self.acc[mask]

    def submit(self, masks):
        self.asked_while.append((list(masks), list(self.in_flight)))
        self.in_flight += masks
        self._finish(self.rng.randint(0, len(self.in_flight) // 2))

    def collect(self, block=True):
        if block and not self.done:
            assert self.in_flight, "a blocking collect with nothing in flight"
            self.collects += 1
            if self.fail_after is not None and self.collects > self.fail_after:
                raise RuntimeError("the engine failed")
            self._finish(self.rng.randint(1, len(self.in_flight)))
        out, self.done = self.done, []
        return out

    def guess(self, masks):  # only used when it says how many workers it has
        self.submit(masks)

    def claim(self, masks):
        self.claimed = getattr(self, "claimed", []) + list(masks)

    def cancel(self):
        self.cancelled = True
        self.in_flight = []

    def _finish(self, k):
        self.rng.shuffle(self.in_flight)
        finished, self.in_flight = self.in_flight[:k], self.in_flight[k:]
        self.done += [(m, self.acc[m]) for m in finished]


def _random_lattice(rng, n):
    acc = {m: rng.choice([rng.random(), round(rng.random(), 1), 0.0, 1.0]) for m in range(1 << n)}
    if rng.random() < 0.5:  # nearly monotone, where sandwiches are common
        for m in sorted(acc, key=int.bit_count):
            acc[m] = max([acc[m]] + [acc[m & ~(1 << i)] for i in range(n) if m >> i & 1])
    return acc


@pytest.mark.parametrize("seed", range(120))
def test_streaming_exploration_is_the_layer_by_layer_loop(seed):
    """Whatever order results come back in, the explored sets (and their order), the pruned sets
    and the rounds are those of the layer-by-layer loop -- and so are a plain black box's."""
    rng = random.Random(seed)
    n = rng.randint(1, 8)
    acc = _random_lattice(rng, n)
    space = FeatureSpace([f"x{i}" for i in range(n)])
    mode = rng.choice(["all", "snapshot"])
    alpha, e = rng.choice([1.0, 1.05, 1.2]), rng.choice([0.0, 0.02, 0.1, 1.0])
    covering = rng.random() < 0.8
    expected = _reference_explore(space, acc, alpha, e, mode, covering)
    for black_box in (acc.__getitem__, ExpansionCache(_Streaming(acc, seed))):
        result = explore(space, black_box, alpha=alpha, e=e, sandwich=mode, covering=covering)
        assert (list(result.accuracy.items()), result.pruned, result.rounds) == expected
        assert result.calls == len(expected[0])
    assert not black_box.pending
    # With workers to spare, sets are started before their tests decide them: the same loop,
    # and every call beyond it is a speculative set nobody asked for.
    cache = ExpansionCache(_Streaming(acc, seed, workers=rng.choice([2, 4, 16])))
    result = explore(space, cache, alpha=alpha, e=e, sandwich=mode, covering=covering)
    assert (list(result.accuracy.items()), result.pruned, result.rounds) == expected
    assert not cache.pending and not cache.speculative & result.accuracy.keys()
    assert result.calls == len(expected[0]) + len(cache.speculative & cache.accuracy.keys())


def test_speculation_uses_idle_workers_only_and_pays_off():
    # Scores far from monotone (e=0 prunes, and each layer's tests wait on the last one's
    # results). A set started on speculation is only ever put on a worker that is free.
    n, workers = 7, 8
    rng = random.Random(5)
    acc = {m: 0.4 + 0.3 * m.bit_count() / n + 0.3 * rng.random() for m in range(1 << n)}
    space = FeatureSpace([f"x{i}" for i in range(n)])
    started = []

    class Counting(_Streaming):
        def guess(self, masks):
            # The stream's own count: what it is training and what it finished but has not handed back.
            assert len(self.in_flight) + len(self.done) + len(masks) <= self.workers
            started.extend(masks)
            super().guess(masks)

    spare = ExpansionCache(Counting(acc, 2, workers=workers))
    result = explore(space, spare, alpha=1.0, e=0.0)
    assert result.pruned and started  # something to wait on, and idle workers used meanwhile
    used = [m for m in started if m in result.accuracy]
    assert used, "no speculative set was ever asked for"
    assert list(result.accuracy.items()) == list(explore(space, acc.__getitem__, alpha=1.0, e=0.0).accuracy.items())


def test_a_set_is_asked_for_while_its_layer_neighbours_still_train():
    # e=1 prunes nothing: the layer-by-layer loop would ask for a layer only when the one before
    # it is back, so nothing would be in flight whenever it asks. Streaming asks for a set of the
    # next layer as soon as its own test is decided.
    n = 6
    rng = random.Random(1)
    acc = {m: 0.3 + 0.6 * rng.random() for m in range(1 << n)}
    space = FeatureSpace([f"x{i}" for i in range(n)])
    stream = _Streaming(acc, 3)
    result = explore(space, ExpansionCache(stream), alpha=1.0, e=1.0)
    assert len(result.accuracy) == 1 << n
    overlapping = [(asked, flying) for asked, flying in stream.asked_while
                   if any(a.bit_count() != f.bit_count() for a in asked for f in flying)]
    assert overlapping, "every set was asked for with no set of another layer in flight"
    # A child asked for while one of its parents was still training (top direction).
    assert any(a & f == a and a != f for asked, flying in overlapping for a in asked for f in flying)


def test_a_failed_exploration_leaves_nothing_in_flight():
    n = 5
    acc = {m: 0.5 + 0.01 * m.bit_count() for m in range(1 << n)}
    stream = _Streaming(acc, 0, fail_after=2)
    cache = ExpansionCache(stream)
    with pytest.raises(RuntimeError, match="the engine failed"):
        explore(FeatureSpace([f"x{i}" for i in range(n)]), cache, alpha=1.0, e=1.0)
    assert stream.cancelled and not cache.pending and not stream.in_flight


def test_expansion_cache_streams_and_refuses_to_wait_on_nothing():
    acc = {m: m / 16 for m in range(16)}
    cache = ExpansionCache(_Streaming(acc, 0))
    with pytest.raises(RuntimeError, match="nothing is in flight"):
        cache.collect()
    cache.submit([3, 5, 3])
    assert cache.pending | set(cache.accuracy) == {3, 5}
    assert cache.many([5, 7]) == [5 / 16, 7 / 16]
    assert cache(3) == 3 / 16 and not cache.pending and cache.calls == 3
    assert sorted(cache.arrivals()) == [3, 5, 7] and cache.arrivals() == []
    with pytest.raises(ValueError, match="value_bounds"):
        ExpansionCache(type("Odd", (_Streaming,), {"value_bounds": (1.0, 0.0)})(acc, 0))


def test_a_guess_stops_being_one_when_asked_for():
    acc = {m: m / 16 for m in range(16)}
    cache = ExpansionCache(_Streaming(acc, 0, workers=3))
    assert cache.speculate([1, 2, 4, 8]) == [1, 2, 4]  # three workers, all idle
    assert cache.speculative == {1, 2, 4} and cache.idle_workers() == 3 - len(cache.pending)
    idle = cache.idle_workers()  # the stream finishes a few at each submission
    assert cache.speculate([8]) == ([8] if idle else [])
    cache.submit([2])
    assert cache(4) == 4 / 16
    assert not {2, 4} & cache.speculative
    assert ExpansionCache(_Streaming(acc, 0)).speculate([1]) == []  # no workers said: no guesses


def test_a_guess_the_black_box_does_not_take_is_not_guessed_again():
    acc = {m: m / 16 for m in range(16)}

    class Declining(_Streaming):
        def guess(self, masks):
            self.done += [(m, None) for m in masks]  # failed, or not taken

    cache = ExpansionCache(Declining(acc, 0, workers=4))
    assert cache.speculate([5]) == [5]
    cache.submit([3])
    while cache.pending:
        cache.collect()
    assert cache.declined == {5} and 5 not in cache.accuracy and not cache.speculative
    assert cache.speculate([5, 6]) == [6]  # 5 is not tried again ...
    assert cache(5) == 5 / 16  # ... but asked for, it is trained
