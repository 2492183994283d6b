"""polydom's exceptions, for callers that need to tell failures apart.

Errors about arguments are plain ``ValueError`` / ``TypeError`` with a precise message; the
classes here cover what a caller may want to catch on its own.
"""

__all__ = ["PolydomError"]


class PolydomError(Exception):
    """Base class of polydom's own exceptions."""
