"""Serving a saved index imports neither scikit-learn nor sympy until a model is needed."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

import polydom

HEAVY = ("sklearn", "sympy", "skops", "scipy")


@pytest.fixture(scope="module")
def run_python(subprocess_env):
    """Run code in a fresh interpreter (its imports start from nothing)."""

    def run(code: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-P", "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              env=subprocess_env, timeout=120)

    return run


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4))
    y = (X.sum(axis=1) > 0).astype(int)
    names = ["a", "b", "c", "d"]

    def expand(features):
        cols = [names.index(f) for f in sorted(features)] or [0]
        model = LogisticRegression(solver="liblinear").fit(X[:, cols], y)
        return polydom.Expansion(0.5 + 0.1 * len(features), model)

    path = tmp_path_factory.mktemp("lazy") / "idx"
    polydom.build({n: [1.0 + i, 0.1 * i] for i, n in enumerate(names)}, expand).save(path)
    return path


def test_import_polydom_is_light(run_python):
    out = run_python(
        f"""
        import sys, polydom
        polydom.load, polydom.PolyDomIndex
        heavy = [m for m in {HEAVY + ("lmdb",)!r} if m in sys.modules]
        assert not heavy, heavy
        print("ok")
        """
    )
    assert out.stdout.strip() == "ok", out.stderr


def test_load_and_lookup_import_neither_sklearn_nor_sympy(saved, run_python):
    out = run_python(
        f"""
        import sys, polydom
        idx = polydom.load({str(saved)!r})
        choice = idx.lookup(2.0, 100.0)
        batch = idx.lookup_many([1.0, 2.0, 3.0], [5.0, 100.0, 0.0])
        assert batch[1] == choice and len(idx.models) == 16 and choice.key in idx.models
        idx.refresh()
        heavy = [m for m in {HEAVY!r} if m in sys.modules]
        assert not heavy, heavy
        model = choice.model  # now, and only now, scikit-learn comes in
        assert 'sklearn' in sys.modules and model.predict([[0.0] * model.n_features_in_]).shape == (1,)
        print("ok")
        """
    )
    assert out.stdout.strip() == "ok", out.stderr


def test_the_lookup_command_imports_neither(saved, run_python):
    out = run_python(
        f"""
        import sys
        from polydom.cli import main
        assert main(["lookup", {str(saved)!r}, "--size", "2", "--budget", "100", "--json"]) == 0
        heavy = [m for m in {HEAVY!r} if m in sys.modules]
        assert not heavy, heavy
        """
    )
    assert out.returncode == 0, out.stderr
    assert '"features"' in out.stdout
