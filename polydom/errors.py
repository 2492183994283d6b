"""polydom's exceptions, for callers that need to tell failures apart.

Errors about arguments are plain ``ValueError`` / ``TypeError`` with a precise message; the
classes polydom defines all derive from :class:`PolydomError` and its warnings from
:class:`PolydomWarning`, defined at the bottom of the stack (:mod:`polydom.lattice.errors`) and
re-exported here so that ``polydom.PolydomError`` is that same class.
"""

from polydom.lattice.errors import PolydomError, PolydomWarning

__all__ = ["PolydomError", "PolydomWarning", "InputError", "InputTypeError",
           "ExpansionError", "ExpansionLimitError", "DeadlineReached", "CacheError"]


class InputError(PolydomError, ValueError):
    """An argument the classifier cannot use (images, labels, groups, budgets); the message names
    the argument and, for a bad item, its position."""


class InputTypeError(PolydomError, TypeError):
    """An argument of a type the classifier does not read."""


class ExpansionError(PolydomError, RuntimeError):
    """The black box raised while training a feature set; the message names the set, and the
    original exception is chained as ``__cause__``."""


class ExpansionLimitError(PolydomError, RuntimeError):
    """The build would train more feature sets than ``max_expansions`` allows."""


class DeadlineReached(PolydomError):
    """The precompute time budget ran out before the next batch (used by progressive alpha)."""


class CacheError(PolydomError, ValueError):
    """The expansion cache path or key is unusable."""
