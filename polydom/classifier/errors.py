"""The classifier's exceptions and warnings. Each derives from :class:`polydom.PolydomError` or
:class:`polydom.PolydomWarning` and keeps the built-in base that describes the failure."""

from polydom.index.storage.errors import IndexFormatError
from polydom.lattice.errors import PolydomError, PolydomWarning

__all__ = ["ScoringError", "ClassifierStateError", "UnloadableFeatureWarning", "LearnerWarning"]


class ScoringError(PolydomError, ValueError):
    """A scorer gave a value polydom cannot maximise (outside ``[0, 1]`` or not finite)."""


class ClassifierStateError(IndexFormatError):
    """The classifier state saved in an index is damaged or crafted; the message names the field.

    A ``ValueError`` (through :class:`~polydom.index.storage.errors.IndexFormatError`), so
    callers catching that still catch it.
    """


class UnloadableFeatureWarning(PolydomWarning):
    """A saved classifier holds a feature that a fresh process cannot import (defined in ``__main__``)."""


class LearnerWarning(PolydomWarning):
    """The learner's warnings during a build, counted and reported in one warning."""
