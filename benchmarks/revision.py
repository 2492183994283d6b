"""A module of this repository as of a git revision, for benchmarks that time the working tree
against it in one process (``--against REV``)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import tempfile
from pathlib import Path

#: The folders of polydom's library, whose changes a benchmark's source line reports.
LIBRARY = ("polydom", "index", "lattice", "greedy", "featurizers")


def short_name(revision: str) -> str:
    """The commit ``revision`` names, abbreviated (HEAD moves; a commit does not)."""
    return subprocess.run(["git", "rev-parse", "--short", revision], check=True, capture_output=True,
                          text=True).stdout.strip()


#: Where modules lived before they moved into their concept's package (``index/serving/``,
#: ``index/costs/``): a revision older than the move has them here.
FORMER_PATHS = {"index/serving/anytime.py": "index/anytime.py", "index/serving/guards.py": "index/servingguards.py"}


def module_at(revision: str, path: str):
    """The file ``path`` (relative to the repository root) as of ``revision``, imported under a
    name of its own, so that it runs beside the working tree's version of the same module. A
    revision from before the module moved gives it from its former path."""
    shown = subprocess.run(["git", "show", f"{revision}:{path}"], capture_output=True, text=True)
    if shown.returncode != 0 and path in FORMER_PATHS:
        path = FORMER_PATHS[path]
        shown = subprocess.run(["git", "show", f"{revision}:{path}"], check=True, capture_output=True, text=True)
    shown.check_returncode()
    source = shown.stdout
    name = Path(path).stem + "_at_" + short_name(revision)
    file = Path(tempfile.mkdtemp()) / f"{name}.py"
    file.write_text(source)
    # Named inside the installed package its folder maps to, so that its relative imports
    # (``from .protocol import ...``) find the working tree's siblings.
    folders = Path(path).parent.parts
    package = ".".join(("polydom",) + (folders[1:] if folders[:1] == ("polydom",) else folders))
    spec = importlib.util.spec_from_file_location(f"{package}.{name}", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def source_of(package) -> tuple[str, list[str]] | None:
    """``(short commit, library files that differ from it)`` of the checkout ``package`` (an
    imported module) was loaded from -- not necessarily the running script's -- or None when it
    is not a git checkout. The numbers a benchmark prints are for that source."""
    where = Path(package.__file__).resolve().parent

    def git(*command):
        # Only trailing whitespace: porcelain lines start with a status column that may be a space.
        return subprocess.run(["git", *command], cwd=where, capture_output=True, text=True,
                              timeout=10).stdout.rstrip()

    try:
        commit, top = git("rev-parse", "--short", "HEAD"), git("rev-parse", "--show-toplevel")
        changed = git("status", "--porcelain", "--", *(os.path.join(top, d) for d in LIBRARY)).splitlines()
    except (OSError, subprocess.SubprocessError):
        return None
    if not commit:
        return None
    return commit, [line[3:] for line in changed]
