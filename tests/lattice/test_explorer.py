"""The bidirectional explorer against the paper's Figure 2 lattice and exhaustive checks."""

import itertools
import random

import networkx as nx
import pytest

from polydom.lattice import ExpansionCache, FeatureSpace, audit_monotonicity, explore, lattice_graph, naive_expand_all

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
