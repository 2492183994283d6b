"""Persist an index in LMDB and serve it in-process: atomic publish, pinned versions, lazy models.

Layout of an index at ``PATH``
------------------------------
::

    PATH/
        current          symlink naming the published version, e.g. "v00000007"
        v00000006/       an older version, kept (``keep``) for processes still using it
        v00000007/       one complete LMDB environment: data.mdb, lock.mdb (the writer's), pin
        .writer.lock     flock'd by a save: saves are serialised
        .tmp-<hex>/      a save in progress, or the remains of a killed one
        .trash-<hex>/    a version being deleted
        .current-<hex>   a new pointer just before it is renamed onto ``current``

A version directory is written once, fsync'd, published by renaming a new symlink onto
``current``, and never written again. The records inside are described in
:mod:`index.storeformat`; models are skops payloads (:mod:`index.modelcodec`).

Publishing (:func:`save_index`) and what SIGKILL does at each step
------------------------------------------------------------------
0. Encode and validate the state (no disk touched). *Killed:* nothing happened.
1. Take ``.writer.lock`` (``flock``, exclusive) and remove leftover ``.tmp-*``, ``.trash-*`` and
   ``.current-*`` entries -- no live save can own them, since the lock is ours and the kernel drops
   a killed process's flock. *Killed:* the lock is released; a half-removed leftover is removed
   by the next save.
2. Write the version into ``.tmp-X``: one LMDB write transaction (committed with ``sync=True``),
   models serialised as they are appended in mask order; then fsync the files and the directory.
   A model skops cannot store raises here and ``.tmp-X`` is removed. *Killed:* ``.tmp-X``
   remains, ``current`` is untouched, readers never look at ``.tmp-*``; the next save removes it.
3. Rename ``.tmp-X`` to ``vN`` (one more than the highest existing N) and fsync ``PATH``.
   *Killed:* ``vN`` exists but nothing points to it; the next save numbers past it and removes it
   (a version newer than ``current`` can only be such an orphan).
4. Create the symlink ``.current-Y -> vN``, rename it onto ``current`` (``os.replace``, atomic),
   fsync ``PATH``. The rename is the publication: a reader resolves either the old or the new
   version, never a mix. *Killed before the rename:* ``.current-Y`` is a leftover; after: done.
5. Remove old versions: keep ``current`` and the ``keep - 1`` newest before it; a version pinned
   by any reader (below) is skipped. Each is renamed to ``.trash-Z`` while holding an exclusive
   lock on its pin, then deleted. *Killed:* ``.trash-Z`` is a leftover no reader can resolve.

On power loss the fsync order (data, then directory, then pointer) means ``current`` only ever
names a version whose files are on disk.

Reading (:func:`load_index`) and why it is safe
-----------------------------------------------
A reader resolves ``current`` once per load or refresh, then *pins* that version: it opens
``vN/pin``, takes ``flock(LOCK_SH | LOCK_NB)`` on it and checks that ``vN/pin`` is still the file
it locked. A save deletes a version only after taking ``LOCK_EX | LOCK_NB`` on the same pin and
moves the directory away while holding it, so a pinned version is never deleted -- whether the
reader is this process, another one, or a forked child (the pin's file description, and so the
lock, is shared with children). If a version vanishes between resolving and pinning, the reader
simply resolves ``current`` again. Readers never wait: the shared lock is non-blocking and a save
holds an exclusive one only on versions ``current`` no longer names.

Environments are opened ``readonly=True, lock=False``. LMDB's lock file coordinates readers with
a *writer* (the reader table stops a writer from recycling pages a reader still sees); a
published version has no writer, ever, so there is nothing to coordinate. Hence readers never
block, the reader-slot limit (``max_readers``) does not apply and no stale slot survives a crash.
The known hazard of LMDB -- replacing data files underneath a live lock file, after which new
readers see stale pages -- cannot occur: files are never replaced; a rebuild is a new directory.

LMDB maps the data file, so reading a page past the end of a truncated file would kill the
process with SIGBUS. Before any read the reader checks that the file holds every page LMDB's
meta page claims (LMDB itself refuses page numbers beyond those), which turns truncation into an
:class:`IndexFormatError`. Damage inside a file of the right length is caught by checksums:
one SHA-256 over metadata and arrays (:mod:`index.storeformat`), checked at load, and one per
model payload, checked when the model is first loaded.

Fork: an LMDB environment must not be used across ``fork``. Lookups never touch LMDB (the index
is rebuilt in memory at load); a model load in a child first closes the inherited environment
(unmapping the child's copy -- ``lock=False`` leaves no lock state to disturb) and reopens it.

A loaded index is a consistent snapshot. :meth:`PolyDomIndex.refresh` switches it to the newest
published version by replacing its whole state in one assignment; call it from the thread that
serves with the index, or between requests. Threads sharing one index while another thread
refreshes it should instead load the new version (``polydom.load``) and swap their reference,
which is atomic; answers already returned (``Choice``) keep the models of their own version.

POSIX only (``fcntl.flock``, symlinks, directory fsync).
"""

from __future__ import annotations

import fcntl
import operator
import os
import re
import secrets
import shutil
import stat
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import lmdb

from .backends import backend_class
from .modelcodec import (
    ModelIntegrityError, ModelLoadError, UnsupportedModelError, UntrustedModelError,
    decode_model, digest, encode_model, normalize_trusted,
)
from .skyline import IndexState
from .storeformat import (
    DATABASES, STATE_DIGEST_KEY, IndexFormatError, IndexVersionError, StoreError,
    decode_state, encode_state, mask_of, model_key, state_digest, store_record,
)

__all__ = [
    "save_index", "load_index", "store_of", "StoreReader", "LazyModels",
    "StoreError", "IndexNotFoundError", "IndexFormatError", "IndexVersionError", "IndexWriteError",
    "UnsupportedModelError", "ModelLoadError", "ModelIntegrityError", "UntrustedModelError",
]


class IndexNotFoundError(StoreError, FileNotFoundError):
    """No index at the path: it does not exist."""


class IndexWriteError(StoreError, OSError):
    """An index cannot be saved at the path; nothing was published."""


CURRENT = "current"
WRITER_LOCK = ".writer.lock"
PIN = "pin"
_TMP, _TRASH, _NEXT = ".tmp-", ".trash-", ".current-"
_VERSION = re.compile(r"v(\d{8,})")
#: Address space reserved for writing one version; LMDB grows the file only as pages are used.
_MAP_SIZE = 1 << 40
_PIN_ATTEMPTS = 8


# ---------------------------------------------------------------------------------- file helpers


def _fsync_path(path: str, flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: str) -> None:
    _fsync_path(path, os.O_RDONLY | os.O_DIRECTORY)


def _is_ours(entry: str) -> bool:
    return (
        entry in (CURRENT, WRITER_LOCK)
        or _VERSION.fullmatch(entry) is not None
        or entry.startswith((_TMP, _TRASH, _NEXT))
    )


def _versions(root: str) -> list[tuple[int, str]]:
    """Version directories under ``root`` as ``(number, name)``, ascending."""
    out = []
    for entry in os.listdir(root):
        m = _VERSION.fullmatch(entry)
        if m:
            out.append((int(m.group(1)), entry))
    return sorted(out)


def _read_current(root: str) -> str:
    """The name ``current`` points to, or :class:`IndexFormatError`."""
    try:
        name = os.readlink(os.path.join(root, CURRENT))
    except FileNotFoundError:
        raise IndexFormatError(
            f"{root} is not a polydom index (it has no published version: {CURRENT!r} is missing)"
        ) from None
    except OSError:
        raise IndexFormatError(f"{root} is not a polydom index ({CURRENT!r} is not a version pointer)") from None
    if _VERSION.fullmatch(name) is None:
        raise IndexFormatError(f"{root}: {CURRENT!r} points to {name!r}, which is not a version of this index")
    return name


# ------------------------------------------------------------------------------ reading versions


def _pin(vdir: str) -> int | None:
    """A descriptor holding a shared flock on ``vdir/pin``; None if the version is gone or going."""
    pin = os.path.join(vdir, PIN)
    try:
        fd = os.open(pin, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        held, there = os.fstat(fd), os.stat(pin)
        if (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino):
            return fd
    except (BlockingIOError, FileNotFoundError):
        pass  # a save is deleting this version: resolve ``current`` again
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None


def _open_environment(vdir: str, where: str):
    """Open one version read-only, after checking its data file holds every page LMDB will read."""
    try:
        size = os.stat(os.path.join(vdir, "data.mdb")).st_size
    except OSError:
        raise IndexFormatError(f"{where}: the LMDB data file is missing") from None
    try:
        env = lmdb.open(
            vdir, readonly=True, lock=False, subdir=True, create=False, max_dbs=len(DATABASES), readahead=False,
        )
    except lmdb.Error as exc:
        raise IndexFormatError(f"{where}: not a readable LMDB environment ({exc})") from None
    try:
        needed = (env.info()["last_pgno"] + 1) * env.stat()["psize"]
        if size < needed:
            raise IndexFormatError(f"{where}: the LMDB data file is truncated ({size} bytes, {needed} expected)")
        dbs = {name: env.open_db(name, create=False) for name in DATABASES}
    except lmdb.Error as exc:
        env.close()
        raise IndexFormatError(f"{where}: the LMDB environment is damaged or not a polydom index ({exc})") from None
    except BaseException:
        env.close()
        raise
    return env, dbs


def _release(holder: dict) -> None:
    env = holder.pop("env", None)
    if env is not None:
        try:
            env.close()
        except lmdb.Error:
            pass
    fd = holder.pop("pin", None)
    if fd is not None:
        os.close(fd)


class _Version:
    """One published version as opened by this process: its pin, LMDB environment and lock.

    At most one per version directory per process (py-lmdb refuses to open an environment twice);
    shared by every index loaded from it and released when the last user is gone.
    """

    def __init__(self, root: str, name: str, pin_fd: int):
        self.root, self.name = root, name
        self.dir = os.path.join(root, name)
        self.where = f"index at {root} (version {name})"
        self.lock = threading.RLock()
        env, dbs = _open_environment(self.dir, self.where)
        self._holder = {"env": env, "dbs": dbs, "pid": os.getpid(), "pin": pin_fd}
        weakref.finalize(self, _release, self._holder)

    def environment(self):
        """``(env, dbs)`` usable in this process (reopened after a fork)."""
        holder = self._holder
        if holder["pid"] != os.getpid():
            with self.lock:
                if holder["pid"] != os.getpid():
                    inherited, holder["env"] = holder["env"], None
                    if inherited is not None:
                        inherited.close()
                    holder["env"], holder["dbs"] = _open_environment(self.dir, self.where)
                    holder["pid"] = os.getpid()
        return holder["env"], holder["dbs"]


_LIVE: "weakref.WeakValueDictionary[str, _Version]" = weakref.WeakValueDictionary()
_LIVE_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    # Another thread may have held these locks at the fork; the child has only this thread.
    global _LIVE_LOCK
    _LIVE_LOCK = threading.Lock()
    for version in list(_LIVE.values()):
        version.lock = threading.RLock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _open_version(root: str, name: str) -> _Version | None:
    vdir = os.path.join(root, name)
    key = os.path.realpath(vdir)
    with _LIVE_LOCK:
        version = _LIVE.get(key)
        if version is not None:
            return version
        fd = _pin(vdir)
        if fd is None:
            return None
        try:
            version = _Version(root, name, fd)
        except BaseException:
            os.close(fd)
            raise
        _LIVE[key] = version
        return version


_ABSENT = object()


class LazyModels(Mapping):
    """The models of one stored version, by feature-set mask, loaded on first access.

    ``get(mask)`` checks the payload's SHA-256 and its types, then rebuilds the model with skops
    (importing scikit-learn then, not before); the result is cached for as long as the mapping lives.
    Iterating and ``in`` read keys only.

    Raises
    ------
    ModelIntegrityError, UntrustedModelError
        From :meth:`get` / ``[]``, for a payload that fails its checks; nothing in it is run.
    """

    def __init__(self, version: _Version, count: int, trusted: frozenset, features):
        self._version = version
        self._count = count
        self._trusted = trusted
        self._features = list(features)
        self._cache: dict = {}

    def get(self, mask, default=None):
        try:
            model = self._cache[mask]
        except KeyError:
            model = self._load(mask)
        except TypeError:
            return default
        return default if model is _ABSENT else model

    def __getitem__(self, mask):
        model = self.get(mask, _ABSENT)
        if model is _ABSENT:
            raise KeyError(mask)
        return model

    def _describe(self, mask: int) -> str:
        names = [f for i, f in enumerate(self._features) if mask >> i & 1]
        return f"the model of feature set {names} in {self._version.where}"

    def _load(self, mask):
        try:
            key = model_key(mask)
        except (TypeError, ValueError):
            return _ABSENT
        mask = operator.index(mask)
        with self._version.lock:
            if mask in self._cache:
                return self._cache[mask]
            env, dbs = self._version.environment()
            try:
                with env.begin() as txn:
                    payload = txn.get(key, db=dbs[b"models"])
                    check = txn.get(key, db=dbs[b"checksums"])
            except lmdb.Error as exc:
                raise ModelIntegrityError(f"{self._describe(mask)} cannot be read ({exc})") from None
            if payload is None:
                model = _ABSENT
            else:
                model = decode_model(payload, check, self._trusted, self._describe(mask))
            self._cache[mask] = model
            return model

    def __iter__(self) -> Iterator[int]:
        env, dbs = self._version.environment()
        with env.begin(db=dbs[b"models"], buffers=True) as txn:
            keys = [mask_of(bytes(k)) for k in txn.cursor().iternext(keys=True, values=False)]
        return iter(keys)

    def __len__(self) -> int:
        return self._count

    def __contains__(self, mask) -> bool:
        try:
            key = model_key(mask)
        except (TypeError, ValueError):
            return False
        env, dbs = self._version.environment()
        with env.begin(db=dbs[b"models"], buffers=True) as txn:
            return txn.get(key) is not None

    def stored_payloads(self, digests: list) -> Iterator[tuple[bytes, bytes]]:
        """``(key, payload)`` in key order, checksums verified, for copying into a new version.

        Appends ``(key, sha256)`` to ``digests`` as it goes. No model is deserialised.
        """
        env, dbs = self._version.environment()
        with env.begin() as txn:
            checks = txn.cursor(db=dbs[b"checksums"])
            for key, payload in txn.cursor(db=dbs[b"models"]):
                expected = checks.get(key)
                if expected is None or digest(payload) != expected:
                    raise ModelIntegrityError(
                        f"{self._describe(mask_of(key))}: the payload does not match its checksum; not copying it"
                    )
                digests.append((key, expected))
                yield key, payload

    def __repr__(self) -> str:
        return f"<LazyModels {self._count} models, {len(self._cache)} loaded, {self._version.where}>"


# --------------------------------------------------------------------------------------- loading


def _default_resolve(tag: str) -> type:
    return backend_class(tag)


def _check_root(root: str) -> None:
    try:
        st = os.stat(root)
    except (FileNotFoundError, NotADirectoryError):
        raise IndexNotFoundError(f"no index at {root}: the path does not exist") from None
    if not stat.S_ISDIR(st.st_mode):
        raise IndexFormatError(
            f"{root} is a file, not a polydom index (an index is a directory written by index.save)"
        )


def _read_version(version: _Version, trusted: frozenset, resolve: Callable[[str], type]):
    env, dbs = version.environment()
    try:
        with env.begin() as txn:
            meta = dict(txn.cursor(db=dbs[b"meta"]))
            arrays = dict(txn.cursor(db=dbs[b"arrays"]))
            state_check = txn.get(STATE_DIGEST_KEY, db=dbs[b"checksums"])
    except lmdb.Error as exc:
        raise IndexFormatError(f"{version.where}: the LMDB environment is damaged ({exc})") from None
    meta, arrays, info = decode_state(meta, arrays, state_check, version.where)
    count = info.get("models")
    if not isinstance(count, int) or count < 0:
        raise IndexFormatError(f"{version.where}: bad model count {count!r}")
    try:
        cls = resolve(meta["backend"])
    except KeyError as exc:
        raise IndexFormatError(f"{version.where}: {exc.args[0] if exc.args else exc}") from None
    models = LazyModels(version, count, trusted, meta["features"])
    try:
        return cls.from_state(IndexState(meta, arrays, models))
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise IndexFormatError(f"{version.where}: the stored metadata is inconsistent ({exc!r})") from exc


def _resolve_and_read(root: str, trusted: frozenset, resolve):
    name = None
    for _ in range(_PIN_ATTEMPTS):
        name = _read_current(root)
        version = _open_version(root, name)
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

    def __init__(self, path: str, version: _Version, trusted: frozenset, resolve):
        self.path = path
        self.version = version.name
        self.trusted = trusted
        self._resolve = resolve
        self._version = version

    def refresh(self, index) -> bool:
        """Switch ``index`` in place to the newest published version; False if it already holds it.

        The whole state is replaced by one attribute assignment (see the module docstring for
        threads). The backend cannot change: an index rebuilt with another backend raises
        :class:`IndexFormatError`; load it again instead.
        """
        if _read_current(self.path) == self.version:
            return False
        fresh = load_index(self.path, trusted=self.trusted, resolve=self._resolve)
        if type(fresh) is not type(index):
            raise IndexFormatError(
                f"the index at {self.path} was rebuilt as a {type(fresh).__name__} (backend {fresh.backend!r}); "
                f"refresh() cannot turn a {type(index).__name__} into it -- load it again with polydom.load"
            )
        index.__dict__ = fresh.__dict__
        return True

    def __repr__(self) -> str:
        return f"<StoreReader {self.path} @ {self.version}>"


def load_index(path, *, trusted=None, resolve: Callable[[str], type] | None = None):
    """Open the index published at ``path``: metadata checked now, models loaded on first use.

    Parameters
    ----------
    path : str or os.PathLike
        A directory written by :func:`save_index`.
    trusted : iterable of str or type, optional
        Model types to trust beyond polydom's list (see :mod:`index.modelcodec`).
    resolve : callable, optional
        Backend tag -> index class; defaults to :func:`index.backends.backend_class`.

    Returns
    -------
    PolyDomIndex (or the class registered for the stored backend)
        With ``_store`` set to a :class:`StoreReader`.

    Raises
    ------
    IndexNotFoundError
        ``path`` does not exist.
    IndexFormatError
        Not an index, not LMDB, truncated, corrupted, unknown backend, inconsistent metadata.
    IndexVersionError
        An incompatible storage format.
    TypeError
        ``trusted`` is not a list of names or types.
    """
    trusted = normalize_trusted(trusted)
    resolve = resolve or _default_resolve
    root = os.path.abspath(os.fspath(path))
    _check_root(root)
    version, index = _resolve_and_read(root, trusted, resolve)
    index._store = StoreReader(root, version, trusted, resolve)
    return index


def store_of(index) -> StoreReader | None:
    """The :class:`StoreReader` of a loaded index, or None for one built in memory."""
    return getattr(index, "_store", None)


# ---------------------------------------------------------------------------------------- saving


def _prepare_root(root: str) -> None:
    try:
        os.makedirs(root, exist_ok=True)
    except FileExistsError:
        raise IndexWriteError(f"cannot save an index at {root}: it exists and is not a directory") from None
    except OSError as exc:
        raise IndexWriteError(f"cannot save an index at {root}: {exc.strerror or exc}") from None
    if not os.path.isdir(root):
        raise IndexWriteError(f"cannot save an index at {root}: it is not a directory")
    foreign = sorted(e for e in os.listdir(root) if not _is_ours(e))
    if foreign:
        raise IndexWriteError(
            f"cannot save an index at {root}: the directory holds files that are not part of an index "
            f"({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}); use a new or empty directory"
        )


@contextmanager
def _writer_lock(root: str):
    fd = os.open(os.path.join(root, WRITER_LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _remove_leftovers(root: str) -> None:
    for entry in os.listdir(root):
        full = os.path.join(root, entry)
        if entry.startswith((_TMP, _TRASH)):
            shutil.rmtree(full, ignore_errors=True)
        elif entry.startswith(_NEXT):
            try:
                os.unlink(full)
            except FileNotFoundError:
                pass


def _model_records(models: Mapping, digests: list, features) -> Iterator[tuple[bytes, bytes]]:
    if isinstance(models, LazyModels):
        yield from models.stored_payloads(digests)
        return
    for mask in sorted({operator.index(m) for m in models.keys()}):
        model = models[mask]
        if model is None:
            continue
        key = model_key(mask)
        names = [f for i, f in enumerate(features) if mask >> i & 1]
        payload = encode_model(model, f"the model of feature set {names}")
        digests.append((key, digest(payload)))
        yield key, payload


def _write_version(vdir: str, encoded, models: Mapping, features) -> None:
    fd = os.open(os.path.join(vdir, PIN), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.close(fd)
    env = lmdb.open(
        vdir, map_size=_MAP_SIZE, subdir=True, create=False, max_dbs=len(DATABASES), lock=True,
        sync=True, metasync=True, readahead=False,
    )
    try:
        dbs = {name: env.open_db(name, create=True) for name in DATABASES}
        with env.begin(write=True) as txn:
            digests: list = []
            txn.cursor(db=dbs[b"models"]).putmulti(_model_records(models, digests, features), append=True)
            key, value = store_record(encoded, len(digests))
            meta = dict(encoded.meta)
            meta[key] = value
            txn.cursor(db=dbs[b"meta"]).putmulti(sorted(meta.items()), append=True)
            txn.cursor(db=dbs[b"arrays"]).putmulti(encoded.arrays, append=True)
            digests.append((STATE_DIGEST_KEY, state_digest(meta, dict(encoded.arrays))))
            txn.cursor(db=dbs[b"checksums"]).putmulti(sorted(digests), append=True)
    finally:
        env.close()
    for name in ("data.mdb", "lock.mdb", PIN):
        _fsync_path(os.path.join(vdir, name))
    _fsync_dir(vdir)


def _publish(root: str, name: str) -> None:
    link = os.path.join(root, _NEXT + secrets.token_hex(8))
    os.symlink(name, link)
    os.replace(link, os.path.join(root, CURRENT))
    _fsync_dir(root)


def _remove_version(root: str, name: str) -> None:
    """Delete a version unless a reader pins it (see the module docstring)."""
    vdir = os.path.join(root, name)
    try:
        fd = os.open(os.path.join(vdir, PIN), os.O_RDONLY)
    except FileNotFoundError:
        fd = None
    trash = os.path.join(root, _TRASH + secrets.token_hex(8))
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return
        os.rename(vdir, trash)
    finally:
        if fd is not None:
            os.close(fd)
    shutil.rmtree(trash, ignore_errors=True)


def _remove_old_versions(root: str, previous: str | None, current: str, keep: int) -> None:
    """Keep ``current`` and the ``keep - 1`` newest versions published before it.

    Versions numbered above ``previous`` (the pointer before this save) other than ``current``
    were never published: orphans of killed saves.
    """
    before = int(previous[1:]) if previous else 0
    versions = _versions(root)
    orphans = [name for n, name in versions if n > before and name != current]
    published = [name for n, name in versions if n <= before] + [current]
    for name in orphans + published[:-keep]:
        try:
            _remove_version(root, name)
        except OSError:
            pass  # best effort: the next save tries again


def save_index(index, path, *, keep: int = 2) -> str:
    """Write ``index`` with its models as a new version at ``path`` and publish it atomically.

    Readers of ``path`` -- already open or opening meanwhile -- see the old version or the new one,
    never a mix, even if this process is killed at any point (see the module docstring). Saves to
    one path are serialised.

    Parameters
    ----------
    index : PolyDomIndex or any index with ``to_state()``
    path : str or os.PathLike
        A directory: created if missing; if it exists it must be empty or an index.
    keep : int, default 2
        Published versions to keep, the new one included (older ones are removed unless pinned
        by a reader).

    Returns
    -------
    str
        The published version's name.

    Raises
    ------
    UnsupportedModelError
        A model skops cannot store (nothing is published).
    IndexWriteError
        Nothing can be written at ``path`` (a file, under a file, a foreign directory, an I/O
        error); nothing is published.
    TypeError, ValueError
        ``keep`` or the index's metadata is invalid (raised before anything is written).
    """
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise ValueError(f"keep must be an integer >= 1, got {keep!r}")
    state = index.to_state()
    encoded = encode_state(state)
    models = state.models if state.models is not None else {}
    if not isinstance(models, Mapping):
        raise TypeError(f"IndexState.models must be a mapping of mask to model, got {type(models).__name__}")
    features = list(state.meta.get("features", ()))
    root = os.path.abspath(os.fspath(path))
    try:
        _prepare_root(root)
        with _writer_lock(root):
            _remove_leftovers(root)
            try:
                previous = _read_current(root)
            except IndexFormatError:
                previous = None  # first save, or a damaged pointer that this save replaces
            tmp = os.path.join(root, _TMP + secrets.token_hex(8))
            os.mkdir(tmp)
            try:
                _write_version(tmp, encoded, models, features)
                versions = _versions(root)
                name = f"v{(versions[-1][0] + 1) if versions else 1:08d}"
                os.rename(tmp, os.path.join(root, name))
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            _fsync_dir(root)
            _publish(root, name)
            _remove_old_versions(root, previous, name, keep)
    except StoreError:
        raise
    except (OSError, lmdb.Error) as exc:
        raise IndexWriteError(f"saving the index at {root} failed: {exc}") from exc
    return name
