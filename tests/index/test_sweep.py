"""The kinetic sweep on the paper's Figure 3 curves and on hand-made hard cases."""

import math
import random

import numpy as np
import pytest

from polydom.index import sweep
from polydom.index.sweep import skyline_of

FIG3 = np.array([[0, 0, 3], [5, 2, 0], [30, 0, 0], [40, 0, 0]], dtype=float)
FIG3_ACC = [0.70, 0.75, 0.65, 0.80]


def test_figure3_five_crossings_three_interesting_four_ranges():
    r = sweep(FIG3, FIG3_ACC, (0.0, math.inf), validate=True)
    assert r.crossings == 5 and r.interesting_events == 3
    assert r.bounds == pytest.approx([0.0, 5 / 3, 12.5, 17.5])
    assert r.skylines == [[0, 1, 3], [1, 3], [2, 1, 3], [2, 3]]


def test_figure3_index_all_has_six_ranges_and_fourteen_entries():
    r = sweep(FIG3, FIG3_ACC, (0.0, math.inf), index_all=True)
    assert r.bounds == pytest.approx([0, 5 / 3, math.sqrt(10), math.sqrt(40 / 3), 12.5, 17.5])
    assert sum(map(len, r.skylines)) == 14


def test_double_crossing_of_one_pair_is_requeued():
    # 10 + n^2 and 7n cross at 2 and 5.
    coef = np.array([[0, 0, 0], [10, 0, 1], [0, 7, 0]], dtype=float)
    r = sweep(coef, [0.5, 0.9, 0.8], (0.0, math.inf), validate=True)
    assert r.crossings == 2
    assert r.bounds == pytest.approx([0.0, 2.0, 5.0])
    assert r.skylines == [[0, 2, 1], [0, 1], [0, 2, 1]]


def test_triple_crossing_at_one_point():
    # n, 2 + 0n... three lines through (2, 4): 4 (const), 2n, 3n - 2.
    coef = np.array([[0, 0], [4, 0], [0, 2], [-2, 3]], dtype=float)
    r = sweep(coef, [0.1, 0.5, 0.6, 0.7], (1.0, math.inf), validate=True)
    assert r.crossings == 3
    assert r.bounds == pytest.approx([1.0, 2.0])
    assert r.skylines == [[0, 3], [0, 1, 2, 3]]


def test_tangency_is_not_a_swap_and_identical_curves_never_swap():
    coef = np.array([[0, 0, 0], [1, 0, 1], [0, 2, 0], [0, 2, 0]], dtype=float)  # (n-1)^2 >= 0 touches at 1
    r = sweep(coef, [0.2, 0.9, 0.8, 0.7], (0.0, math.inf), validate=True)
    assert r.crossings == 0 and r.bounds == [0.0]
    assert r.skylines == [[0, 2, 1]]


def test_ties_in_accuracy_take_the_cheaper_curve():
    # Two curves with equal accuracy crossing at n = 1: the skyline must switch to the cheaper.
    coef = np.array([[0, 0], [1, 0], [0, 1]], dtype=float)
    r = sweep(coef, [0.5, 0.8, 0.8], (0.0, math.inf), validate=True)
    assert r.bounds == pytest.approx([0.0, 1.0])
    assert r.skylines == [[0, 2], [0, 1]]


@pytest.mark.parametrize("seed", range(60))
def test_random_integer_curves_validate_and_match_pointwise_skylines(seed):
    """Heavy ties, tangencies, identical curves and multiple crossings."""
    rng = random.Random(seed)
    k = rng.randint(2, 9)
    deg = rng.randint(1, 3)
    coef = np.array([[rng.randint(0, 6) for _ in range(deg + 1)] for _ in range(k)], dtype=float)
    if seed % 3 == 0:
        coef[-1] = coef[0]
    coef[0] = 0.0
    acc = [rng.choice([0.5, 0.6, 0.7, 0.8]) for _ in range(k)]
    r = sweep(coef, acc, (0.0, math.inf), validate=True)
    assert all(a < b for a, b in zip(r.bounds, r.bounds[1:]))
    for x in np.linspace(0, 8, 97):
        j = int(np.searchsorted(r.bounds, x, side="right") - 1)
        costs = [np.polyval(c[::-1], x) for c in coef]
        sky = r.skylines[j]
        assert all(costs[a] <= costs[b] + 1e-9 for a, b in zip(sky, sky[1:]))
        assert [acc[c] for c in sky] == sorted({acc[c] for c in sky})
        # Every curve off the skyline has a cheaper-or-equal curve at least as accurate.
        best_at = {}
        for c in range(k):
            best_at[c] = max((acc[d] for d in sky if costs[d] <= costs[c] + 1e-9), default=-1)
            assert best_at[c] >= acc[c]


def test_skyline_of_keeps_strict_running_maximum():
    assert skyline_of([3, 0, 1, 2], [0.5, 0.5, 0.7, 0.1]) == [3, 0, 2]
