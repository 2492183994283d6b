"""The storage layer's entry points: save an index, load it, ask where a loaded index came from.

What the rest of polydom imports (``StoredIndex.save``, ``polydom.load``, the CLI, polydom's
exported exceptions); the work is done in :mod:`polydom.index.storage`, whose modules describe
the on-disk layout (:mod:`~polydom.index.storage.layout`), how a save is published and survives
being killed (:mod:`~polydom.index.storage.writer`), and why readers are safe
(:mod:`~polydom.index.storage.versions`).

A loaded index is a consistent snapshot of one published version; ``index.refresh()`` switches
it to the newest one. Call ``refresh`` from the thread that serves with the index, or between
requests; threads sharing one index while another refreshes it should instead load the new
version (``polydom.load``) and swap their reference, which is atomic. Answers already returned
(``Choice``) keep the models of their own version.

Damage never takes the process down: a version is read through checked positioned reads, never
LMDB's memory map (:mod:`~polydom.index.storage.pages`), every record and array is validated
before use, model payloads are bounded before anything is inflated, and nothing inside an
index directory is followed through a link. Each failure is one of the exceptions below.

POSIX only (``fcntl.flock``, symlinks, directory fsync).
"""

from __future__ import annotations

from .storage.errors import (
    IndexFormatError, IndexNotFoundError, IndexVersionError, IndexWriteError, ModelIntegrityError, ModelLoadError,
    StoreError, UnsupportedModelError, UntrustedModelError,
)
from .storage.lazymodels import LazyModels
from .storage.reader import StoreReader, load_index, store_of
from .storage.writer import save_index

__all__ = [
    "save_index", "load_index", "store_of", "StoreReader", "LazyModels",
    "StoreError", "IndexNotFoundError", "IndexFormatError", "IndexVersionError", "IndexWriteError",
    "UnsupportedModelError", "ModelLoadError", "ModelIntegrityError", "UntrustedModelError",
]
