"""polydom's exceptions, for callers that need to tell failures apart.

Errors about arguments are plain ``ValueError`` / ``TypeError`` with a precise message; the
classes polydom defines all derive from :class:`PolydomError`, defined with the index (the lowest
layer that raises one) and re-exported here so that ``polydom.PolydomError`` is that same class.
"""

from polydom.index.errors import PolydomError

__all__ = ["PolydomError"]
