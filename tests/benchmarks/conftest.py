"""The benchmarks' own modules (``benchmarks/lab``) import as ``lab``, as they do when a script
runs from ``benchmarks/``."""

import sys
from pathlib import Path

BENCHMARKS = str(Path(__file__).resolve().parents[2] / "benchmarks")
if BENCHMARKS not in sys.path:
    sys.path.insert(0, BENCHMARKS)
