"""Every Python example of the README runs as written, each in a fresh process, in order, in one
scratch folder: a block that opens with ``# NAME.py`` is written as that file (the custom-feature
module the later blocks import), every other block runs and prints a non-empty answer. So the
fit example's feature loads in a fresh process, as a user's would."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _python_blocks():
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


def test_every_python_example_runs_as_written(tmp_path, subprocess_env):
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
