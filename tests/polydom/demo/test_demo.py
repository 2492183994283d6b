"""``polydom demo`` (quick mode), ``polydom recost``, and the examples, run as a user would."""

import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import polydom
from polydom.cli import main
from polydom.demo import demo_settings, report
from polydom.demo import variants as job
from polydom.demo.data import load_demo_data, size_ranges


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    from polydom.demo import run_demo

    out = tmp_path_factory.mktemp("demo") / "out"
    return run_demo(out, quick=True, n_jobs=1, progress=False)


@pytest.fixture(scope="module")
def demo_out(demo_run):
    from pathlib import Path

    return Path(demo_run.out)


def _section(text: str, title: str) -> str:
    start = text.index(title)
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def test_the_report_opens_with_a_recommendation_then_the_evidence(demo_out):
    text = (demo_out / "report.md").read_text()
    sections = ["## Recommendation", "## What ", "## Accuracy on time", "## Late answers, replayed and real",
                "## Fit and deploy"]
    positions = [text.index(s) for s in sections]
    assert positions == sorted(positions) and positions[0] < 600
    assert re.search(r"## What .+ served, by image size", text)
    advice = _section(text, "## Recommendation")
    assert re.search(r"\*\*Use .+?, (at every budget|except at)", advice)
    assert re.search(r"fit wall time PolyDom \d+ s, PolyDom, 2% late \d+ s, PolyDom, 1% late \d+ s, Greedy \d+ s", advice) and "µs" in advice
    assert "replayed" in advice and "real" in advice


def _equal(r):
    """``r`` with every variant answering exactly as the default did."""
    import copy

    r = copy.deepcopy(r)
    for name in r.replayed:
        r.replayed[name].correct[:] = r.replayed[job.DEFAULT].correct
    return r


def test_the_recommendation_follows_the_numbers(demo_run):
    """The default unless another variant is significantly better on the mean; budgets where one is
    significantly better are named."""
    r = _equal(demo_run)
    budget = report._budget(r.settings.budgets[0])
    assert report.recommendation(r)[0].startswith("**Use PolyDom, the default, at every budget")
    n = r.replayed["Greedy"].correct.shape[1]
    quarter = np.arange(n) % 4 == 0
    polydoms = [name for name in r.replayed if name != "Greedy"]
    # Greedy ahead at the first budget, behind by as much at the last: no better on the mean.
    r.replayed["Greedy"].correct[0], r.replayed["Greedy"].correct[-1] = True, quarter
    for name in polydoms:
        r.replayed[name].correct[0], r.replayed[name].correct[-1] = quarter, True
    first = report.recommendation(r)[0]
    assert first.startswith(f"**Use PolyDom, the default, except at {budget} (Greedy)**"), first
    # Ahead at every budget: Greedy is the recommendation, with the setting that asks for it.
    r.replayed["Greedy"].correct[:] = True
    for name in polydoms:
        r.replayed[name].correct[:] = quarter
    assert report.best_variant(r) == "Greedy"
    assert report.recommendation(r)[0].startswith('**Use Greedy (`selection=polydom.Selection(backend="greedy")`)')


def test_late_answers_replayed_and_real_are_compared_with_numbers(demo_run):
    r = _equal(demo_run)
    real = r.real[job.DEFAULT]
    real.late[:] = False
    r.replayed[job.DEFAULT].late[:] = False
    assert report.late_gaps(r) == []
    real.late[1] = True  # every real answer late at the second budget, none replayed
    gaps = report.late_gaps(r)
    assert gaps == [(r.settings.budgets[1], 0.0, 1.0)]
    advice = " ".join(report.recommendation(r))
    assert "disagree on late answers" in advice and "0.0% replayed, 100.0% real: " in advice
    assert "The worst cell's late share, served for real: PolyDom 100.0%, PolyDom, 2% late " in advice
    # The strict variant kept every cell on time: the advice names it for services that need that.
    r.real["PolyDom, 2% late"].late[:] = False
    assert "Where late answers must stay at 2.0% or below: PolyDom, 2% late" in " ".join(report.recommendation(r))


def test_every_accuracy_has_a_standard_error_and_cells_cover_every_size_and_budget(demo_run, demo_out):
    text = _section((demo_out / "report.md").read_text(), "## Accuracy on time")
    rows = [line for line in text.splitlines() if re.match(r"\| \d+×\d+ \|", line)]
    assert len(rows) == len(demo_run.range_names) * len(demo_run.settings.budgets)
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert all(" ± " in c for c in cells[3:6]), row


def test_the_loaded_index_serves_what_the_fit_served_and_answers_on_time_are_right(demo_run, demo_out):
    assert demo_run.round_trip
    clf = polydom.CostSensitiveClassifier.load(demo_out / "index")
    assert clf.index_.backend == "polydom"
    assert set(demo_run.real) == {"PolyDom", "PolyDom, 2% late", "PolyDom, 1% late"}
    for served in (*demo_run.replayed.values(), *demo_run.real.values()):
        assert not (served.correct & served.late).any()  # a late answer is never counted right
    # The served sets change with the size where the budget lets them.
    sets = demo_run.replayed[job.DEFAULT].features
    assert all(len(row) == len(demo_run.held_out_sizes) for row in sets)


def test_size_ranges_split_evenly_and_unknown_data_sets_are_refused():
    which, names = size_ranges(np.array([784.0, 784.0, 12544.0]))
    assert names == ["28×28", "112×112"] and which.tolist() == [0, 0, 1]
    sizes = np.geomspace(3e4, 4e6, 300)
    which, names = size_ranges(sizes)
    assert len(names) == 3 and np.bincount(which).min() >= 99 and names == ["0.03–0.15 MP", "0.15–0.78 MP", "0.78–4 MP"]
    with pytest.raises(ValueError, match="dataset must be one of"):
        load_demo_data("mnist")
    assert demo_settings("photos").budgets[-1] >= 1.0


def test_the_demo_command_writes_the_report(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["demo", "--quick", "--out", str(out), "--n-jobs", "1", "--no-cache"]) == 0
    assert "report written to" in capsys.readouterr().err
    assert (out / "report.md").read_text().startswith("# polydom demo: digits")
    assert main(["demo", "--quick", "--seed", "-1"]) == 2
    assert "--seed must be >= 0" in capsys.readouterr().err


def _sigint_as_default():
    """Give a child the default SIGINT disposition before it starts Python.

    A test run started as a background job of a non-interactive shell (``pytest ... &``) has
    SIGINT ignored, and an ignored signal stays ignored across ``exec``: the child would never
    see Ctrl-C and would run to the end (exit 0).
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_demo_prints_progress_without_a_terminal_and_ctrl_c_ends_in_one_line(tmp_path, subprocess_env):
    out = tmp_path / "out"
    # Signalled as soon as training begins, so the run has its training and serving still to do.
    proc = subprocess.Popen([sys.executable, "-P", "-m", "polydom.cli", "demo", "--quick", "--out", str(out), "--n-jobs", "1"],
                            stderr=subprocess.PIPE, text=True, env=subprocess_env, cwd=tmp_path, start_new_session=True,
                            preexec_fn=_sigint_as_default)
    try:
        seen = []
        deadline = time.monotonic() + 300
        for line in proc.stderr:
            seen.append(line)
            if "polydom: training feature sets: 1 trained (at most 16)" in line:
                break
            assert time.monotonic() < deadline, "".join(seen)
        assert any(line.startswith("polydom: computing 4 features of") for line in seen), seen
        # Training is under way: signal at once rather than after a fixed sleep.
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C on a terminal signals the whole foreground group
        _, rest = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, rest
    assert "Traceback" not in rest and "KeyboardInterrupt" not in rest
    lines = rest.strip().splitlines()
    cache = re.escape(str(out / "cache" / "expansions"))
    assert re.fullmatch(rf"polydom demo: interrupted; \d+ sets? cached in {cache}; run again to resume", lines[-1]), rest
    assert all(line.startswith("polydom: training feature sets:") for line in lines[:-1]), rest


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


def test_build_spec_example_does_not_flood_stderr_with_warnings(tmp_path, repo_root, subprocess_env):
    proc = subprocess.run([sys.executable, "-P", "-m", "polydom.cli", "build", f"{repo_root / 'examples' / 'build_spec.py'}:SPEC",
                           "--out", str(tmp_path / "index")], cwd=tmp_path, env=subprocess_env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Warning" not in proc.stderr.replace("note: the black box warned", ""), proc.stderr
    other = [line for line in proc.stderr.splitlines() if not line.startswith("polydom build: train")]
    assert len(other) <= 2, proc.stderr  # at most a note and the "published" line
