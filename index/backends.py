"""Registry of index classes by backend tag, so a stored index comes back as the right kind.

``index`` cannot import ``greedy`` (imports run lattice <- index <- greedy <- polydom), so each
backend registers itself when its package is imported.
"""

from __future__ import annotations

__all__ = ["register_backend", "backend_class", "registered_backends"]

_BACKENDS: dict[str, type] = {}


def register_backend(tag: str, cls: type) -> None:
    """Map ``tag`` (stored in an index's metadata) to the class whose ``from_state`` rebuilds it."""
    _BACKENDS[tag] = cls


def backend_class(tag: str) -> type:
    """The class registered for ``tag``; ``KeyError`` naming the known tags otherwise."""
    try:
        return _BACKENDS[tag]
    except KeyError:
        raise KeyError(f"unknown index backend {tag!r}; known: {sorted(_BACKENDS)}") from None


def registered_backends() -> list[str]:
    return sorted(_BACKENDS)
