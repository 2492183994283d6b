"""The root of polydom's exception hierarchy, as the index and its storage layer import it.

:class:`PolydomError` is defined at the bottom of the stack (:mod:`polydom.lattice.errors`, which
imports nothing) so that every layer can derive from it; this module and :mod:`polydom.errors`
re-export that same class.
"""

from polydom.lattice.errors import PolydomError, PolydomWarning

__all__ = ["PolydomError", "PolydomWarning"]
