"""The root of polydom's exceptions and warnings.

Every exception polydom defines derives from :class:`PolydomError`, and every warning from
:class:`PolydomWarning`, so ``except polydom.PolydomError`` catches any failure of ours and
``warnings.filterwarnings("ignore", category=polydom.PolydomWarning)`` silences any warning of
ours. The classes live at the bottom of the stack (this module imports nothing) so that every
layer -- the features, which stand apart from the lattice and the index, included -- can derive
from them; :mod:`polydom.errors` re-exports them.
"""

__all__ = ["PolydomError", "PolydomWarning"]


class PolydomError(Exception):
    """Base class of polydom's own exceptions.

    Subclasses keep the built-in base that describes the failure (``ValueError``,
    ``FileNotFoundError``, ``OSError``, ...), so callers catching those still catch them.
    """


class PolydomWarning(UserWarning):
    """Base class of polydom's own warnings."""
