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
    """The environment for a child Python: this one's. The child imports the polydom installed
    in this environment -- started with ``-P`` (or from a script outside the checkout), so that
    the checkout's own folders, which are not the installed package's layout, never shadow it."""
    return dict(os.environ)


class _CostlyBackend:
    """A minimal backend whose cheapest option costs something (real indexes start at 0)."""

    domain = (0.0, 10.0)
    models = {}
    option_kind = None  # no precomputed option tables: planning asks options_at size by size
    std_error = {}

    def measured_range(self):
        return self.domain

    def __init__(self):
        import polydom

        self.space = polydom.build({"x": [1.0]}, lambda s: 0.5 + 0.1 * len(s)).space

    def options_at(self, size):
        return [0, 1], [1.0 + size, 2.0 + size], [0.5, 0.6]


@pytest.fixture
def costly_backend():
    """Planners' and stream budgets' edge cases: every option of every item has a cost."""
    return _CostlyBackend()
