"""A module of this repository as of a git revision, for benchmarks that time the working tree
against it in one process (``--against REV``)."""

from __future__ import annotations

import importlib.util
import subprocess
import tempfile
from pathlib import Path


def short_name(revision: str) -> str:
    """The commit ``revision`` names, abbreviated (HEAD moves; a commit does not)."""
    return subprocess.run(["git", "rev-parse", "--short", revision], check=True, capture_output=True,
                          text=True).stdout.strip()


def module_at(revision: str, path: str):
    """The file ``path`` (relative to the repository root) as of ``revision``, imported under a
    name of its own, so that it runs beside the working tree's version of the same module."""
    source = subprocess.run(["git", "show", f"{revision}:{path}"], check=True, capture_output=True, text=True).stdout
    name = Path(path).stem + "_at_" + short_name(revision)
    file = Path(tempfile.mkdtemp()) / f"{name}.py"
    file.write_text(source)
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
