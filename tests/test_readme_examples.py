"""Every Python example of the README runs as written, each in a fresh process, in order, in one
scratch folder: a block that opens with ``# NAME.py`` is written as that file (the custom-feature
module the later blocks import), every other block runs and prints a non-empty answer. So the
fit example's feature loads in a fresh process, as a user's would."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _python_blocks():
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory, subprocess_env):
    """A scratch folder where every Python example ran, in order (the command line's examples read
    what they saved)."""
    tmp_path = tmp_path_factory.mktemp("readme")
    _run_python_blocks(tmp_path, subprocess_env)
    return tmp_path


def test_every_python_example_runs_as_written(scratch):
    assert (scratch / "build" / "index").is_dir() and (scratch / "myfeatures.py").is_file()


def _run_python_blocks(tmp_path, subprocess_env):
    blocks = _python_blocks()
    assert len(blocks) >= 6
    env = {**subprocess_env, "PYTHONPATH": str(tmp_path)}
    for number, block in enumerate(blocks, 1):
        first = block.splitlines()[0]
        named = re.fullmatch(r"# (\w+\.py)", first)
        if named:
            (tmp_path / named.group(1)).write_text(block)
            continue
        done = subprocess.run([sys.executable, "-P", "-c", block], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=180)
        assert done.returncode == 0, f"README block {number}:\n{block}\n{done.stderr}"
        assert done.stdout.strip(), f"README block {number} printed nothing"


def _command_line_block() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Command line"):]
    return re.search(r"```bash\n(.*?)```", section, flags=re.S).group(1)


def test_the_command_line_block_runs_as_written(scratch, subprocess_env):
    """After the Python examples (which save ``build/index``), each line of the README's
    command-line block runs in the same scratch folder, from a copy of the project's
    ``examples/`` as a user at the project root has it; the demo takes ``--quick``."""
    tmp_path = scratch
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = {**subprocess_env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{subprocess_env.get('PATH', '')}"}
    lines = [line.split("  #")[0].strip() for line in _command_line_block().splitlines() if line.strip()]
    assert any(line.startswith("polydom demo") for line in lines)
    for line in lines:
        command = line + " --quick" if line.startswith("polydom demo") else line
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, f"README command {line!r}:\n{done.stderr}"
        # A command's answer is on stdout; build and demo report on stderr as they work.
        assert ">" in line or (done.stdout + done.stderr).strip(), f"README command {line!r} printed nothing"
