"""One error format and exit-code convention across the commands, documented in ``polydom --help``;
progress lines without a terminal; Ctrl-C ends with one line and status 130; learner warnings once."""

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from polydom import cli

ERROR_LINE = re.compile(r"^polydom [a-z]+: error: \S")


def test_help_documents_exit_codes_and_the_error_format(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    for fragment in ("exit status:", "  1 ", "  2 ", "  130 ", "polydom COMMAND: error: MESSAGE",
                     "polydom COMMAND: interrupted;"):
        assert fragment in out


@pytest.fixture()
def spec_file(tmp_path):
    path = tmp_path / "spec.py"
    path.write_text(textwrap.dedent("""
        import polydom
        _inst = polydom.make_synthetic(5, k=None, seed=3)
        SPEC = {"costs": _inst.costs, "expand": _inst.expand, "cache_key": "synthetic-5-3"}
    """))
    return path


@pytest.mark.parametrize("argv", [
    ["build", "{spec}:SPEC", "--out", "{out}", "--alpha", "0.5"],
    ["build", "{spec}:NOPE", "--out", "{out}"],
    ["build", "{spec}:SPEC", "--out", "{out}", "--backend", "greedy"],
    ["inspect", "{out}", "--ranges", "-1"],
    ["demo", "--out", "{out}", "--seed", "-1"],
    ["build", "{spec}:SPEC", "--out", "{out}", "--blas-threads", "-1"],
])
def test_usage_errors_of_every_command_share_one_format_and_exit_2(argv, spec_file, tmp_path, capsys):
    argv = [a.format(spec=spec_file, out=tmp_path / "out") for a in argv]
    assert cli.main(argv) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and ERROR_LINE.match(lines[0]), lines


def test_a_failed_build_has_the_same_format_and_exits_1(tmp_path, capsys):
    spec = tmp_path / "broken.py"
    spec.write_text("def _e(fs):\n    raise RuntimeError('boom')\nSPEC = {'costs': {'a': [1.0]}, 'expand': _e}\n")
    assert cli.main(["build", f"{spec}:SPEC", "--out", str(tmp_path / "out")]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("polydom build: error: ") and "boom" in lines[0]


def test_build_summarises_the_black_boxs_warnings_once(tmp_path, capsys):
    spec = tmp_path / "warns.py"
    spec.write_text(textwrap.dedent("""
        import warnings

        def _expand(features):
            warnings.warn("did not converge", RuntimeWarning)
            return 0.5 + 0.1 * len(features)

        SPEC = {"costs": {"a": [1.0], "b": [2.0], "c": [3.0]}, "expand": _expand}
    """))
    assert cli.main(["build", f"{spec}:SPEC", "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert err.count("did not converge") == 1
    assert "polydom build: note: the black box warned 8 times (shown once): 8 x RuntimeWarning: did not converge" in err


SLOW_SPEC = textwrap.dedent("""
    import os
    import time
    import polydom
    _inst = polydom.make_synthetic(7, k=None, seed=1)
    _GATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gate")
    _calls = 0

    def _expand(features):
        # Three sets, then wait at the gate until the test opens it (a resumed run finds it open):
        # the run cannot finish before the test's Ctrl-C, however loaded the machine is.
        global _calls
        _calls += 1
        if _calls > 3:
            open(_GATE + ".waiting", "a").close()
            deadline = time.monotonic() + 120
            while not os.path.exists(_GATE + ".open") and time.monotonic() < deadline:
                time.sleep(0.05)
        return _inst.expand(features)

    SPEC = {"costs": _inst.costs, "expand": _expand, "cache_key": "slow-7-1"}
""")


def sigint_as_default():
    """Give a child the default SIGINT disposition before it starts Python.

    A test run started as a background job of a non-interactive shell (``pytest ... &``) has
    SIGINT ignored, and an ignored signal stays ignored across ``exec``: the child would never
    see Ctrl-C and would run to the end (exit 0).
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class StderrLines:
    """The lines a child writes to stderr, read by a thread so that every wait has a deadline."""

    def __init__(self, proc):
        self.lines, self._proc = [], proc
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        for line in self._proc.stderr:
            self.lines.append(line)

    def wait_for(self, marker, timeout):
        """Wait until a line holds ``marker``; fail when the child ends or ``timeout`` passes first."""
        deadline = time.monotonic() + timeout
        while not any(marker in line for line in self.lines):
            assert self._proc.poll() is None or self._thread.is_alive(), "".join(self.lines)
            assert time.monotonic() < deadline, "".join(self.lines)
            time.sleep(0.02)

    def rest(self, timeout):
        """Wait for the child to end; everything it wrote after the lines already seen."""
        seen = len(self.lines)
        self._proc.wait(timeout=timeout)
        self._thread.join(timeout=timeout)
        return "".join(self.lines[seen:])


def wait_for_path(path, proc, timeout):
    """Wait until ``path`` exists; fail when the child ends or ``timeout`` passes first."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"the child ended (status {proc.returncode}) before {path.name} appeared"
        assert time.monotonic() < deadline, f"{path.name} did not appear within {timeout} s"
        time.sleep(0.02)


def test_build_progress_lines_and_ctrl_c_resume(tmp_path, subprocess_env):
    spec = tmp_path / "slow.py"
    spec.write_text(SLOW_SPEC)
    cache, out = tmp_path / "cache", tmp_path / "out"
    argv = ["build", f"{spec}:SPEC", "--out", str(out), "--cache", str(cache)]
    proc = subprocess.Popen([sys.executable, "-P", "-m", "polydom.cli", *argv], stderr=subprocess.PIPE, text=True,
                            env=subprocess_env, cwd=tmp_path, start_new_session=True, preexec_fn=sigint_as_default)
    try:
        err = StderrLines(proc)
        err.wait_for("trained (at most 128)", timeout=120)
        wait_for_path(tmp_path / "gate.waiting", proc, timeout=120)  # training is under way and cannot finish
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C on a terminal does: the whole foreground group
        seen = list(err.lines)
        rest = err.rest(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # A plain line, not a tqdm bar: stderr is a pipe here.
    assert re.search(r"polydom build: training feature sets: \d+ trained \(at most 128\), [\d.]+ (sets/s|s/set)", "".join(seen))
    assert proc.returncode == 130, "".join(seen) + rest
    assert "Traceback" not in rest and "KeyboardInterrupt" not in rest
    last = rest.strip().splitlines()[-1]
    match = re.fullmatch(rf"polydom build: interrupted; (\d+) sets cached in {re.escape(str(cache))}; run again to resume", last)
    assert match, rest
    assert not out.exists()
    kept = int(match.group(1))
    assert kept == 3  # the sets trained before the gate, each committed as it was trained
    (tmp_path / "gate.open").touch()
    done = subprocess.run([sys.executable, "-P", "-m", "polydom.cli", "build", *argv[1:]], capture_output=True, text=True,
                          env=subprocess_env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"reused={kept}" in done.stderr and f"at most {128 - kept})" in done.stderr


def test_an_images_build_reports_the_learners_warnings_once_also_from_workers(tmp_path, subprocess_env):
    spec = tmp_path / "images.py"
    spec.write_text(textwrap.dedent("""
        from sklearn.linear_model import LogisticRegression
        from polydom.featurizers.datasets import load_digits_images

        def DIGITS():
            images, labels, _ = load_digits_images(sides=(16, 32), n_per_class=6)
            return {"images": images, "labels": labels, "features": ["thumbnail", "intensity_hist", "size_meta"],
                    "cv": 2, "estimator": LogisticRegression(max_iter=2), "random_state": 0}
    """))
    proc = subprocess.run([sys.executable, "-P", "-m", "polydom.cli", "build", f"{spec}:DIGITS", "--out", str(tmp_path / "out"),
                           "--n-jobs", "2"], capture_output=True, text=True, env=subprocess_env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "ConvergenceWarning" in proc.stderr and proc.stderr.count("ConvergenceWarning") == 1, proc.stderr
    note = next(line for line in proc.stderr.splitlines() if "note: the learner warned" in line)
    # 8 sets, each fitted on 2 folds and refitted: every fit that warned is counted, workers' too.
    assert int(re.search(r"warned (\d+) times", note).group(1)) >= 8
