"""`polydom build SPEC --out PATH`: exit codes, publication, cache reuse."""

import subprocess
import sys
import textwrap

import pytest

import polydom
from polydom.cli import main

SPEC = textwrap.dedent("""
    import polydom
    _inst = polydom.make_synthetic(6, k=None, seed=7)
    calls = []

    def _expand(features):
        calls.append(features)
        return _inst.expand(features)

    SPEC = {"costs": _inst.costs, "expand": _expand, "cache_key": "synthetic-6-7"}

    def FACTORY():
        return SPEC

    def _broken(features):
        if len(features) > 2:
            raise RuntimeError("learner crashed on " + ",".join(sorted(features)))
        return 0.5

    BROKEN = {"costs": _inst.costs, "expand": _broken}
    NOTHING = {"labels": [1, 2]}
""")


@pytest.fixture()
def spec_file(tmp_path):
    path = tmp_path / "spec.py"
    path.write_text(SPEC)
    return path


def test_build_publishes_an_index_that_answers_like_build(spec_file, tmp_path, capsys):
    out = tmp_path / "index"
    assert main(["build", f"{spec_file}:SPEC", "--out", str(out)]) == 0
    assert "published" in capsys.readouterr().err
    loaded = polydom.load(out)
    inst = polydom.make_synthetic(6, k=None, seed=7)
    direct = polydom.build(inst.costs, inst.expand)
    for size, budget in [(1.0, 50.0), (30.0, 900.0), (200.0, 1e5)]:
        assert loaded.lookup(size, budget) == direct.lookup(size, budget)


def test_factory_options_and_cache(spec_file, tmp_path, capsys):
    out, cache = tmp_path / "index", tmp_path / "cache"
    args = ["build", f"{spec_file}:FACTORY", "--out", str(out), "--alpha", "1.2", "--cache", str(cache)]
    assert main(args) == 0
    first = capsys.readouterr().err
    assert main(args) == 0
    second = capsys.readouterr().err
    assert "trained=0" in second and "trained=0" not in first
    assert polydom.load(out).params["alpha"] == 1.2


def test_scores_option_ranks_by_the_monotone_fit(spec_file, tmp_path):
    out = tmp_path / "index"
    assert main(["build", f"{spec_file}:SPEC", "--out", str(out), "--scores", "monotone"]) == 0
    loaded = polydom.load(out)
    inst = polydom.make_synthetic(6, k=None, seed=7)
    direct = polydom.build(inst.costs, inst.expand, scores="monotone")
    assert loaded.params["scores"] == "monotone" and loaded.measured == direct.measured
    for size, budget in [(1.0, 50.0), (30.0, 900.0), (200.0, 1e5)]:
        assert loaded.lookup(size, budget) == direct.lookup(size, budget)


@pytest.mark.parametrize("option, e", [([], "auto"), (["--e", "auto"], "auto"), (["--e", "0.02"], 0.02)])
def test_e_defaults_to_the_library_and_takes_auto_or_a_number(spec_file, tmp_path, option, e):
    out = tmp_path / "index"
    assert main(["build", f"{spec_file}:SPEC", "--out", str(out), *option]) == 0
    loaded = polydom.load(out)
    inst = polydom.make_synthetic(6, k=None, seed=7)
    direct = polydom.build(inst.costs, inst.expand, e=e)
    assert loaded.params["e"] == e == direct.params["e"]
    assert loaded.stats.get("e_used") == direct.stats.get("e_used")
    for size, budget in [(1.0, 50.0), (30.0, 900.0), (200.0, 1e5)]:
        assert loaded.lookup(size, budget) == direct.lookup(size, budget)


IMAGES_SPEC = textwrap.dedent("""
    from polydom.featurizers.datasets import load_digits_images

    def DIGITS():
        images, labels, _ = load_digits_images(sides=(16, 24), n_per_class=4)
        return {"images": images, "labels": labels, "features": ["thumbnail", "intensity_hist"], "cv": 2,
                "random_state": 0}
""")


@pytest.mark.parametrize("option, e", [([], "auto"), (["--e", "0.01"], 0.01)])
def test_an_images_build_keeps_the_classifiers_e_unless_given(tmp_path, option, e):
    spec = tmp_path / "images.py"
    spec.write_text(IMAGES_SPEC)
    out = tmp_path / "index"
    assert main(["build", f"{spec}:DIGITS", "--out", str(out), *option]) == 0
    fitted = polydom.CostSensitiveClassifier.load(out)
    assert fitted.selection.e == e and fitted.index_.params["e"] == e


def test_time_budget_reports_the_alpha_reached(spec_file, tmp_path, capsys):
    out = tmp_path / "index"
    assert main(["build", f"{spec_file}:SPEC", "--out", str(out), "--time-budget", "60"]) == 0
    assert "alpha_reached=1.0" in capsys.readouterr().err
    assert polydom.load(out).params["e"] == 0.0  # a progressive build's own default
    assert main(["build", f"{spec_file}:SPEC", "--out", str(out), "--time-budget", "60", "--e", "auto"]) == 0
    assert polydom.load(out).params["e"] == "auto"


@pytest.mark.parametrize("spec, words", [
    ("no_such_module_here:SPEC", "cannot import"),
    ("{file}:MISSING", "no attribute 'MISSING'"),
    ("{file}:NOTHING", "neither costs"),
    ("{file}", "module:attribute"),
    ("/no/such/file.py:SPEC", "does not exist"),
])
def test_bad_spec_exits_2_and_publishes_nothing(spec_file, tmp_path, capsys, spec, words):
    out = tmp_path / "index"
    assert main(["build", spec.format(file=spec_file), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]
    assert not out.exists()


@pytest.mark.parametrize("option", [["--alpha", "0.5"], ["--e", "-1"], ["--e", "most"], ["--e", "inf"], ["--n-jobs", "0"],
                                    ["--time-budget", "0"],
                                    ["--scores", "monotone", "--time-budget", "5"],
                                    ["--scores", "monotone", "--backend", "greedy", "--n0", "10"]])
def test_bad_option_values_exit_2(spec_file, tmp_path, capsys, option):
    out = tmp_path / "index"
    assert main(["build", f"{spec_file}:SPEC", "--out", str(out), *option]) == 2
    assert option[0] in capsys.readouterr().err
    assert not out.exists()


def test_failing_learner_exits_1_and_publishes_nothing(spec_file, tmp_path, capsys):
    out = tmp_path / "index"
    assert main(["build", f"{spec_file}:BROKEN", "--out", str(out)]) == 1
    assert "learner crashed" in capsys.readouterr().err
    assert not out.exists()


def test_console_script_exit_code(spec_file, tmp_path):
    out = tmp_path / "index"
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "polydom.cli", "build", f"{spec_file}:SPEC", "--out", str(out), "--backend", "greedy"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2 and "--n0" in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "polydom.cli", "build", f"{spec_file}:SPEC", "--out", str(out), "--backend", "greedy", "--n0", "1"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert polydom.load(out).backend == "greedy"


def test_an_images_build_refuses_blas_threads_its_classifier_would_not_use(tmp_path, capsys):
    spec = tmp_path / "images.py"
    spec.write_text(IMAGES_SPEC)
    out = tmp_path / "index"
    assert main(["build", f"{spec}:DIGITS", "--out", str(out), "--blas-threads", "0"]) == 2
    assert "--blas-threads cannot be used with an images SPEC" in capsys.readouterr().err
    assert not out.exists()
