"""What the storage layer raises: one class per failure a caller may want to handle on its own.

Every class derives from :class:`StoreError` (and so from ``polydom.PolydomError``) and keeps the
built-in base that describes it -- a missing index is a ``FileNotFoundError``, a damaged one a
``ValueError``, an unwritable path an ``OSError`` -- so generic ``except`` clauses still match.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import PolydomError

__all__ = [
    "StoreError", "IndexNotFoundError", "IndexFormatError", "IndexVersionError", "IndexWriteError",
    "UnsupportedModelError", "ModelLoadError", "ModelIntegrityError", "UntrustedModelError",
]


class StoreError(PolydomError):
    """Base class of the storage layer's errors (re-exported by :mod:`polydom`)."""


class IndexNotFoundError(StoreError, FileNotFoundError):
    """No index at the path: it does not exist."""


class IndexFormatError(StoreError, ValueError):
    """The path holds no readable polydom index: not one, not LMDB, truncated, corrupted or inconsistent."""


class IndexVersionError(IndexFormatError):
    """The index was written in a storage format this polydom cannot read.

    Attributes
    ----------
    found, supported : int
    """

    def __init__(self, message: str, found, supported: int):
        super().__init__(message)
        self.found, self.supported = found, supported


class IndexWriteError(StoreError, OSError):
    """An index cannot be saved at the path; nothing was published."""


class UnsupportedModelError(StoreError, TypeError):
    """``save`` met a model that skops cannot store (nothing was published)."""


class ModelLoadError(StoreError):
    """A stored model was refused; nothing in its payload was executed."""


class ModelIntegrityError(ModelLoadError):
    """A model payload does not match its stored SHA-256 (corrupted or tampered with)."""


class UntrustedModelError(ModelLoadError):
    """A model payload names types or functions outside the trusted list.

    Attributes
    ----------
    untrusted : list of str
        The fully qualified names that would have to be trusted, sorted.
    """

    def __init__(self, message: str, untrusted: Iterable[str] = ()):
        super().__init__(message)
        self.untrusted = sorted(untrusted)
