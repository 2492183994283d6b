"""What every index backend shares: storage hooks and JSON-able metadata."""

from __future__ import annotations

import copy
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
    """Mixin for index classes that persist through the storage layer (:mod:`polydom.index.store`).

    A subclass provides ``space``, ``backend``, ``to_state()`` and ``from_state(state)``.

    Notes
    -----
    An index loaded from a path is a snapshot of one published version, and :meth:`refresh`
    switches it to the newest one in place: the store reads that version as a new index of the
    same class and this index takes it over (:meth:`_adopt`). A backend keeps everything its
    serving paths read (lookups, batches, measured selection) in one attribute, ``_snapshot``,
    built from its public state and read once per call; ``_adopt`` assigns it last, in one
    assignment, so a lookup running meanwhile answers wholly from the old version or wholly from
    the new. The index object, and any attribute the new version does not set, stay. Queries that
    read more than the snapshot -- the anytime walks -- read :meth:`_view`, one object per version
    that nothing changes, taken once at their start.

    Invariant: ``_store`` is the :class:`~polydom.index.storage.reader.StoreReader` of the
    version this index holds, or None for an index built in memory; only the storage layer sets
    it, through :meth:`_attach_store`.
    """

    _store = None

    @property
    def features(self) -> tuple[str, ...]:
        """Feature names in index order."""
        return self.space.names

    def save(self, path, **options) -> str:
        """Persist the index, with its models, as an LMDB index at ``path``; the published version's name.

        ``options`` go to :func:`polydom.index.store.save_index`: ``keep`` (versions kept) and
        ``trusted`` (model types to accept beyond polydom's trusted list).
        """
        from .store import save_index  # imported on use: serving an index never loads LMDB

        return save_index(self, path, **options)

    def refresh(self) -> bool:
        """Switch a loaded index to the newest published version at its path; False if unchanged.

        Call it from the thread that serves with this index, or between requests.

        Raises
        ------
        RuntimeError
            This index was built in memory, not loaded from a path.
        IndexFormatError
            The newest version is damaged or holds another backend (load it again instead).
        IndexNotFoundError, IndexFormatError
            Also while the path holds no complete index: a deploy that removes the directory and
            renames a new build into its place (``rmtree`` + ``rename``) leaves, for a moment, no
            directory or a partly removed one. This index is left as it was -- it keeps serving
            its version, whose files it holds open -- and a later call adopts the new build.
        """
        if self._store is None:
            raise RuntimeError("this index was not loaded from a path; nothing to refresh")
        fresh = self._store.newer(type(self))
        if fresh is None:
            return False
        self._adopt(fresh)
        return True

    def _attach_store(self, reader) -> None:
        """Record the store reader of the version this index was loaded from (the storage layer
        calls it), and freeze a view of that version for queries (:meth:`_view`)."""
        self._store = reader
        self._version = copy.copy(self)  # taken before _version is set: the view is its own view

    def _view(self) -> "StoredIndex":
        """The index a query reads from start to end: for a loaded index, an object holding the
        version last adopted that nothing ever changes (a walk reads many attributes, and
        :meth:`refresh` replaces them one by one); for one built in memory, the index itself."""
        return self.__dict__.get("_version", self)

    def _adopt(self, fresh: "StoredIndex") -> None:
        """Take over ``fresh``, an index of the same class read from a newer version.

        Every attribute ``fresh`` holds is set on this index -- its store reader included -- and
        the serving snapshot last, in one assignment (see the class docstring).
        """
        if type(fresh) is not type(self):
            raise TypeError(f"a {type(self).__name__} cannot adopt a {type(fresh).__name__}")
        state = vars(fresh)
        for name, value in state.items():
            if name not in ("_snapshot", "_version"):
                setattr(self, name, value)
        if "_snapshot" in state:
            self._snapshot = state["_snapshot"]
        # Last: queries that start from now on read the new version whole (fresh is never changed).
        self._version = state.get("_version", fresh)
