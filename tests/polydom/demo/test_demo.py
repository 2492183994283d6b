"""``polydom demo`` (quick mode), ``polydom recost``, and the examples, run as a user would."""

import subprocess
import sys

import pytest

import polydom
from polydom.cli import main

@pytest.fixture(scope="module")
def demo_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "out"
    assert main(["demo", "--quick", "--out", str(out), "--n-jobs", "1"]) == 0
    return out


def test_demo_writes_the_report_plots_and_index(demo_out):
    report = (demo_out / "report.md").read_text()
    for section in ("## What was run", "## Fitted cost curves", "## Accuracy vs budget", "## Budget violations",
                    "## Expansions", "## Index size", "## Latency"):
        assert section in report
    for backend in ("PolyDom α=1", "PolyDom α=1.2", "Greedy", "GreedyAcc", "GreedyCost"):
        assert f"| {backend} |" in report
    assert "NaiveExpandAll" in report and "identically: **yes**" in report
    assert "lean labels identical to scikit-learn's: **yes**" in report
    for png in ("cost_curves", "accuracy_vs_budget", "violations_by_size", "accuracy_by_size", "expansions"):
        path = demo_out / f"{png}.png"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
        assert f"]({png}.png)" in report
    clf = polydom.CostSensitiveClassifier.load(demo_out / "index")
    assert clf.index_.backend == "polydom" and clf.alpha == 1.0


def test_demo_second_run_reuses_the_cache(demo_out, capsys):
    assert main(["demo", "--quick", "--out", str(demo_out), "--n-jobs", "1"]) == 0
    err = capsys.readouterr().err
    assert "PolyDom α=1: 0 sets trained" in err
    assert "Features cached from an earlier run: training yes, held-out yes" in (demo_out / "report.md").read_text()


def test_recost_command_republishes_without_training(demo_out, capsys):
    index = demo_out / "index"
    before = polydom.load(index)
    assert main(["recost", str(index), "--repeats", "1"]) == 0
    captured = capsys.readouterr()
    assert "nothing was trained" in captured.err and "->" in captured.out
    assert before.refresh() is True  # a new version was published at the same path
    assert before.explored == polydom.load(index).explored


def test_recost_command_on_a_plain_index_fails_cleanly(tmp_path, capsys):
    polydom.build({"a": [1.0]}, lambda fs: 0.5).save(tmp_path / "plain")
    assert main(["recost", str(tmp_path / "plain")]) == 1
    assert "not saved by CostSensitiveClassifier" in capsys.readouterr().err


@pytest.mark.parametrize("script, args", [
    ("build_script.py", ["--per-class", "3"]),
    ("image_moderation.py", ["--per-class", "3", "--requests", "5"]),
    ("realtime_lookup.py", ["--requests", "20"]),
])
def test_examples_run(script, args, tmp_path, repo_root, subprocess_env):
    if script == "build_script.py":
        args = args + ["--out", str(tmp_path / "index")]
    proc = subprocess.run([sys.executable, str(repo_root / "examples" / script), *args], cwd=tmp_path, env=subprocess_env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    if script == "build_script.py":
        assert "published" in proc.stdout and polydom.load(tmp_path / "index").backend == "polydom"
    if script == "image_moderation.py":
        assert "decided within budget" in proc.stdout
    if script == "realtime_lookup.py":
        assert "refresh() picked it up: True" in proc.stdout
