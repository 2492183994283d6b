"""Cell-by-cell comparisons of the demo on hand-made grids, and the section in the quick demo's report."""

import numpy as np
import pytest

from lab import cells
from polydom.demo.evaluation import GridResult


def grid(correct, measured, budgets=(1.0, 2.0), n_features=None):
    correct = np.asarray(correct, dtype=bool)
    measured = np.asarray(measured, dtype=float)
    return GridResult(np.asarray(budgets, dtype=float), correct, measured, measured.copy(),
                      np.ones(correct.shape, dtype=int) if n_features is None else np.asarray(n_features))


SIZES = np.repeat([100, 400], 6)      # two sizes, six pictures each
PICTURES = np.tile(np.arange(6), 2)


def test_a_rival_that_wins_every_picture_of_a_cell_is_ahead_there_and_nowhere_else():
    ref = grid(np.zeros((2, 12)), np.zeros((2, 12)))
    better = np.zeros((2, 12))
    better[1, :6] = 1  # budget 2, size 100: the rival right on every picture
    found = cells.versus({"ref": ref, "rival": grid(better, np.zeros((2, 12)))}, "ref", ["rival"], SIZES, PICTURES)
    assert [(c.size, c.budget) for c in found] == [(100, 1.0), (100, 2.0), (400, 1.0), (400, 2.0)]
    behind = [c for c in found if not c.within(1.0)]
    assert [(c.size, c.budget) for c in behind] == [(100, 2.0)] and behind[0].gap.value == 1.0
    assert all(c.within(1.0) and not c.ahead() for c in found if c is not behind[0])


def test_the_best_rival_of_each_cell_is_the_one_compared():
    ref = grid(np.ones((2, 12)), np.zeros((2, 12)))
    a, b = np.ones((2, 12)), np.ones((2, 12))
    a[0, :3] = 0  # a loses three pictures at budget 1, size 100
    found = cells.versus({"ref": ref, "a": grid(a, np.zeros((2, 12))), "b": grid(b, np.zeros((2, 12)))},
                         "ref", ["a", "b"], SIZES, PICTURES)
    assert found[0].rival == "b" and found[0].gap.value == 0.0 and found[0].within(1.0)


def test_violations_and_cost_saving_per_cell():
    measured = np.full((2, 12), 0.5)
    measured[0, :3] = 1.5  # three of six answers at size 100 overran budget 1
    g = grid(np.ones((2, 12)), measured)
    v = cells.violations(g, SIZES)
    assert v[(100.0, 1.0)] == 0.5 and v[(400.0, 1.0)] == 0.0 and v[(100.0, 2.0)] == 0.0
    # On time: the three late answers count wrong, and a rival that was right on time wins there.
    late = g.on_time()
    assert late.correct[0, :3].sum() == 0 and late.correct.sum() == 24 - 3 and g.correct.all()
    found = cells.versus({"late": late, "punctual": grid(np.ones((2, 12)), np.zeros((2, 12))).on_time()},
                         "late", ["punctual"], SIZES, PICTURES)
    assert [(c.size, c.budget) for c in found if not c.within(1.0)] == [(100.0, 1.0)]
    cheap = grid(np.ones((2, 12)), np.full((2, 12), 0.25), n_features=np.ones((2, 12)))
    rows = cells.cost_saving({"cheap": cheap, "g": g}, "cheap", "g", PICTURES)
    assert rows[1]["saving"] == pytest.approx(0.5) and rows[1]["gap"].value == 0.0


def test_the_saving_on_multi_feature_answers_leaves_out_answers_with_nothing_to_skip():
    two = np.zeros((2, 12), dtype=int) + 1
    two[:, :6] = 2  # size 100 answered with two features, size 400 with one
    reference = grid(np.ones((2, 12)), np.ones((2, 12)), n_features=two)
    spent = np.ones((2, 12))
    spent[:, :6] = 0.5  # the cascade stops early on every two-feature answer
    rows = cells.cost_saving({"cascade": grid(np.ones((2, 12)), spent), "ref": reference}, "cascade", "ref", PICTURES)
    assert all(r["multi"] == 0.5 for r in rows)
    assert all(r["saving"] == pytest.approx(0.25) and r["multi_saving"] == pytest.approx(0.5) for r in rows)
    alone = grid(np.ones((2, 12)), np.ones((2, 12)))  # one feature everywhere: nothing to report
    assert all(np.isnan(r["multi_saving"]) for r in cells.cost_saving({"a": alone, "b": alone}, "a", "b", PICTURES))
