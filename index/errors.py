"""The root of polydom's exception hierarchy.

Every exception polydom defines -- in the index, the storage layer, the cache, the black box --
derives from :class:`PolydomError`, so ``except polydom.PolydomError`` catches any of them. The
class lives at the bottom of the package stack (this module imports nothing) so that every layer
can derive from it; :mod:`polydom.errors` re-exports it as ``polydom.PolydomError``.
"""

__all__ = ["PolydomError"]


class PolydomError(Exception):
    """Base class of polydom's own exceptions.

    Subclasses keep the built-in base that describes the failure (``ValueError``,
    ``FileNotFoundError``, ``OSError``, ...), so callers catching those still catch them.
    """
