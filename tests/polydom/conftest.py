"""Fixtures shared by the classifier's tests."""

import pytest


@pytest.fixture(scope="session")
def fast_params() -> dict:
    """CostSensitiveClassifier parameters that keep a fit on a few small digits to about a second."""
    from polydom import Timing

    return dict(cv=2, timing=Timing(sides=(8, 12, 16, 24, 32), images=2, repeats=1), random_state=0, progress=False)
