"""One error root: what bad input or a failing disk raises is a ``PolydomError`` that keeps its
built-in base and says what went wrong."""

import os
import subprocess

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

import polydom


@pytest.fixture(scope="module")
def index():
    rng = np.random.default_rng(0)
    X = rng.random((200, 400))
    y = (X[:, 0] > 0.5).astype(int)
    model = LogisticRegression(max_iter=50).fit(X, y)  # a few kilobytes of coefficients per set
    costs = {f"f{i}": [1e-4 * (i + 1)] for i in range(6)}
    return polydom.build(costs, lambda s: polydom.Expansion(accuracy=0.5 + 0.05 * len(s), model=model))


@pytest.mark.parametrize("budgets", [1e-3 + 1j, [1e-3, 2j], np.array([1e-3, 1e-3], dtype=complex)])
def test_a_complex_budget_is_a_polydom_type_error(index, budgets):
    with pytest.raises(polydom.PolydomError, match="real numbers|real number") as caught:
        index.lookup_many([1.0, 2.0], budgets)
    assert isinstance(caught.value, TypeError)
    with pytest.raises(polydom.PolydomError):
        index.lookup(1.0, 1e-3 + 1j)


def test_a_full_disk_says_so_and_publishes_nothing(index, tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        with pytest.raises(polydom.PolydomError, match="the disk is full") as caught:
            index.save(mount / "idx")
        assert isinstance(caught.value, OSError)
        assert not os.path.exists(mount / "idx")
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)
