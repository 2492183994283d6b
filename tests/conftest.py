"""Fixtures shared across the test folders."""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The checkout: ``examples/`` and the package folders live here."""
    return ROOT


@pytest.fixture(scope="session")
def subprocess_env() -> dict:
    """The environment for a child Python that must import this checkout's polydom."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env
