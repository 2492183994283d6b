"""The root of polydom's exception hierarchy, as the index and its storage layer import it.

:class:`PolydomError` is defined at the bottom of the stack (:mod:`polydom.lattice.errors`, which
imports nothing) so that every layer can derive from it; this module and :mod:`polydom.errors`
re-export that same class.
"""

from polydom.lattice.errors import PolydomError, PolydomWarning

__all__ = ["PolydomError", "PolydomWarning", "QueryError", "QueryTypeError", "BackendError"]


class QueryError(PolydomError, ValueError):
    """A size or budget that is not a valid query: NaN, negative, infinite size, outside the domain."""


class QueryTypeError(PolydomError, TypeError):
    """A size or budget that is not a real number (a string, a complex number, an array where one is
    expected)."""


class BackendError(PolydomError, TypeError):
    """A class registered as a backend does not implement the backend contract in full."""
