"""What every index backend shares: storage hooks and JSON-able metadata."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

__all__ = ["StoredIndex", "jsonable"]


def jsonable(value):
    """Plain JSON types: tuples become lists, numpy scalars Python numbers, non-finite floats strings."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else ("-inf" if value < 0 else "nan")
    return value


class StoredIndex:
    """Mixin for index classes that persist through :mod:`index.store`.

    A subclass provides ``space``, ``backend``, ``to_state()`` and ``from_state(state)``.
    """

    @property
    def features(self) -> tuple[str, ...]:
        """Feature names in index order."""
        return self.space.names

    def save(self, path, **options) -> None:
        """Persist the index, with its models, as an LMDB index at ``path`` (see :mod:`index.store`)."""
        from .store import save_index

        save_index(self, path, **options)

    def refresh(self) -> bool:
        """Switch a loaded index to the newest published version at its path; False if unchanged."""
        store = getattr(self, "_store", None)
        if store is None:
            raise RuntimeError("this index was not loaded from a path; nothing to refresh")
        return store.refresh(self)
