"""Open a published index: resolve ``current``, pin that version, check its records, rebuild the index.

The storage layer never imports an index class: the backend tag stored in the metadata is turned
into a class by the ``resolve`` callable (:func:`polydom.backends.index_class`, the one backend table),
whose ``from_state`` rebuilds the index from an :class:`~polydom.index.state.IndexState`. The
rebuilt index lives in memory, so lookups never touch the disk; its models stay in the version's
LMDB file until first used (:class:`~.lazymodels.LazyModels`).

A loaded index is a consistent snapshot of one version. Its :class:`StoreReader` -- attached
with the index's ``_attach_store`` -- knows where it came from and reads the next version for
``refresh``; answers already returned (``Choice``) keep the models of their own version.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable

from ..state import IndexState
from .errors import IndexFormatError, IndexNotFoundError, StoreError
from .layout import read_current
from .lazymodels import LazyModels
from .modelcodec import normalize_trusted
from .records import DATABASES, STATE_DIGEST_KEY, decode_state
from .versions import OpenVersion, open_version

__all__ = ["StoreReader", "load_index", "store_of"]

#: Times ``current`` is resolved again when the version it names disappears before it is pinned
#: (each time a save published a newer one meanwhile); more means the index is damaged.
_PIN_ATTEMPTS = 8


#: What a broken ``from_state`` raises for inconsistent arrays or metadata; each becomes an
#: IndexFormatError naming the version.
_INCONSISTENT = (KeyError, TypeError, ValueError, IndexError, ArithmeticError, AssertionError, RecursionError)


def _check_root(root: str) -> None:
    try:
        st = os.stat(root)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG):
            raise IndexNotFoundError(f"no index at {root}: the path does not exist ({exc.strerror})") from None
        raise IndexFormatError(f"no readable index at {root}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise IndexFormatError(
            f"{root} is a file, not a polydom index (an index is a directory written by index.save)"
        )


def _read_version(version: OpenVersion, trusted: frozenset, resolve: Callable[[str], type]):
    """The index stored in ``version``: records checked (:mod:`.records`), models left lazy.

    The backend's ``from_state`` validates what the arrays mean; the rebuilt index must then
    pass its own ``check_invariants``.
    """
    file = version.file
    missing = [name.decode() for name in DATABASES if not file.has(name)]
    if missing:
        raise IndexFormatError(f"{version.where}: not a polydom index (no {', '.join(missing)} database)")
    meta = dict(file.items(b"meta"))
    arrays = dict(file.items(b"arrays"))
    state_check = file.get(b"checksums", STATE_DIGEST_KEY)
    meta, arrays, info = decode_state(meta, arrays, state_check, version.where)
    count = info["models"]
    if count != file.entries(b"models"):
        raise IndexFormatError(f"{version.where}: {file.entries(b'models')} models stored, {count} recorded")
    try:
        cls = resolve(meta["backend"])
    except KeyError as exc:
        raise IndexFormatError(f"{version.where}: {exc.args[0] if exc.args else exc}") from None
    models = LazyModels(version, count, trusted, meta["features"])
    try:
        index = cls.from_state(IndexState(meta, arrays, models))
        index.check_invariants()
        _check_guards(index)
    except _INCONSISTENT as exc:
        raise IndexFormatError(f"{version.where}: the stored metadata is inconsistent ({exc!r})") from exc
    return index


def _check_guards(index) -> None:
    """Read what an anytime walk will read -- the guard ratios at every calibrated size, their
    quantile and the cost laws (:attr:`CostSensitiveIndex.serving_params`) -- so that crafted
    entries fail at load rather than at every request.

    Raises ``ValueError`` (the caller names the version).
    """
    index.serving_params  # noqa: B018 - reading it checks every entry


def _resolve_and_read(root: str, trusted: frozenset, resolve):
    name = None
    for _ in range(_PIN_ATTEMPTS):
        name = read_current(root)
        version = open_version(root, name)
        if version is not None:
            return version, _read_version(version, trusted, resolve)
    raise IndexFormatError(f"{root}: its published version {name!r} is missing (the index is damaged); save it again")


class StoreReader:
    """Where a loaded index came from: the path, the version it holds, how to read the next one.

    Attributes
    ----------
    path : str
        The index directory (absolute).
    version : str
        The published version this index is a snapshot of, e.g. ``"v00000007"``.
    trusted : frozenset of str
        The caller's extra trusted model types.
    """

    def __init__(self, path: str, version: OpenVersion, trusted: frozenset, resolve: Callable[[str], type]):
        self.path = path
        self.version = version.name
        self.trusted = trusted
        self._resolve = resolve
        # Held for as long as the index is: it keeps the version pinned and its models readable.
        self._version = version

    def newer(self, expected: type):
        """The newest published version as a new index, or None when it is the one this reader holds.

        The version is compared by identity, not by name: a directory swapped in under the same
        name (a fresh build deployed in place of the index) is a new version.

        The new index carries its own reader. A snapshot swap needs the same class on both
        sides, so a version rebuilt with another backend is refused.

        Raises
        ------
        IndexFormatError
            The new version's index is not an ``expected`` (or it is damaged).
        """
        if read_current(self.path) == self.version and self._version.is_at(self.path, self.version):
            return None
        fresh = load_index(self.path, trusted=self.trusted, resolve=self._resolve)
        if type(fresh) is not expected:
            raise IndexFormatError(
                f"the index at {self.path} was rebuilt as a {type(fresh).__name__} (backend {fresh.backend!r}); "
                f"refresh() cannot turn a {expected.__name__} into it -- load it again with polydom.load"
            )
        return fresh

    def __repr__(self) -> str:
        return f"<StoreReader {self.path} @ {self.version}>"


def load_index(path, *, resolve: Callable[[str], type], trusted=None):
    """Open the index published at ``path``: metadata checked now, models loaded on first use.

    Parameters
    ----------
    path : str or os.PathLike
        A directory written by :func:`~.writer.save_index`.
    trusted : iterable of str or type, optional
        Model types to trust beyond polydom's list (see :mod:`.modelcodec`).
    resolve : callable
        Backend tag -> index class (a :class:`~polydom.index.base.StoredIndex`), raising
        ``KeyError`` for an unknown tag: :func:`polydom.backends.index_class`.

    Returns
    -------
    PolyDomIndex (or the class registered for the stored backend)
        With a :class:`StoreReader` attached (:func:`store_of` returns it).

    Raises
    ------
    IndexNotFoundError
        ``path`` does not exist.
    IndexFormatError
        Not an index, not LMDB, truncated, corrupted, unknown backend, inconsistent metadata or
        arrays, a link or a FIFO where a version's directory or files belong, or unreadable.
    IndexVersionError
        An incompatible storage format.
    TypeError
        ``trusted`` is not a list of names or types.
    """
    trusted = normalize_trusted(trusted)
    root = os.path.abspath(os.fspath(path))
    _check_root(root)
    try:
        version, index = _resolve_and_read(root, trusted, resolve)
    except StoreError:
        raise
    except OSError as exc:  # whatever the checks above did not foresee (EIO, EACCES, ...)
        raise IndexFormatError(f"the index at {root} cannot be read: {exc.strerror or exc}") from None
    except RecursionError:
        raise IndexFormatError(f"the index at {root} is nested too deeply to read") from None
    index._attach_store(StoreReader(root, version, trusted, resolve))
    return index


def store_of(index) -> StoreReader | None:
    """The :class:`StoreReader` of a loaded index, or None for one built in memory."""
    return index._store
