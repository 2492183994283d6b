"""Every benchmark script starts as its README says (``python -P benchmarks/SCRIPT.py``): its
imports resolve, ``lab`` included, and ``--help`` exits 0."""

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py") if p.name != "revision.py")


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_script_starts_under_dash_p(script, tmp_path, subprocess_env):
    proc = subprocess.run([sys.executable, "-P", str(BENCHMARKS / script), "--help"], cwd=tmp_path,
                          env=subprocess_env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage:" in proc.stdout
