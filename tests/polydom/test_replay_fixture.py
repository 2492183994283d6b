"""A saved classifier replays recorded times to the answers the code of its day served
(``tests/fixtures/make_replay.py`` wrote them before the backend contract and the module splits):
refactors change no answer."""

import shutil
import warnings
from pathlib import Path

import numpy as np

import polydom
from polydom.demo.evaluation import serve_grid

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "replay"


def test_a_saved_index_replays_recorded_times_to_the_same_answers(tmp_path):
    shutil.copytree(FIXTURE / "index", tmp_path / "index", symlinks=True)
    recorded = np.load(FIXTURE / "answers.npz")
    clf = polydom.CostSensitiveClassifier.load(tmp_path / "index")
    for _ in range(2):  # the second pass follows the walks' traces (polydom.index.serving.walktrace)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", polydom.PolydomWarning)  # sizes beyond the timed ones
            grid = serve_grid(clf, recorded["X"], recorded["seconds"], recorded["sizes"], recorded["y"],
                              recorded["budgets"])
        assert np.array_equal(grid.keys, recorded["keys"])
        assert np.array_equal(grid.correct, recorded["correct"])
        assert np.allclose(grid.measured, recorded["measured"], rtol=0, atol=1e-15)
    assert len(np.unique(recorded["keys"])) > 2  # the budgets reach several sets
