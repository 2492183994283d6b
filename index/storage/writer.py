"""Save an index as a new version and publish it atomically.

Publishing (:func:`save_index`) and what SIGKILL does at each step
------------------------------------------------------------------
0. Encode and validate the state (no disk touched). *Killed:* nothing happened.
1. Take ``.writer.lock`` (``flock``, exclusive) and remove leftover ``.tmp-*``, ``.trash-*`` and
   ``.current-*`` entries -- no live save can own them, since the lock is ours and the kernel drops
   a killed process's flock. *Killed:* the lock is released; a half-removed leftover is removed
   by the next save.
2. Write the version into ``.tmp-X``: one LMDB write transaction (committed with ``sync=True``),
   models serialised as they are appended in mask order; then fsync the files and the directory,
   and read the version back through the checked page reader (:mod:`.pages`) -- what is
   published is known to load. A model skops cannot store, or whose types the loader would
   refuse, raises here and ``.tmp-X`` is removed. *Killed:* ``.tmp-X`` remains, ``current`` is
   untouched, readers never look at ``.tmp-*``; the next save removes it.
3. Rename ``.tmp-X`` to ``vN`` (one more than the highest existing N, and than the one
   ``current`` names even if that directory is gone) and fsync ``PATH``.
   *Killed:* ``vN`` exists but nothing points to it; the next save numbers past it and removes it
   (a version newer than ``current`` can only be such an orphan).
4. Create the symlink ``.current-Y -> vN``, rename it onto ``current`` (``os.replace``, atomic),
   fsync ``PATH``. The rename is the publication: a reader resolves either the old or the new
   version, never a mix. *Killed before the rename:* ``.current-Y`` is a leftover; after: done.
5. Remove old versions (:mod:`.cleanup`): keep ``current`` and the ``keep - 1`` newest before
   it; a version pinned by any reader is skipped. *Killed:* a ``.trash-Z`` leftover no reader
   can resolve.

A save that fails (a model it cannot store, a full file system, an I/O error) leaves the
published version as it was and nothing of its own behind: ``.tmp-X`` is removed, and so are
the lock file and the directory when the save created them for an index never published.

Safety on a full or hostile file system
---------------------------------------
The version is written with LMDB's lock file disabled (``lock=False``: the directory is private
to this save, serialised by ``.writer.lock``), so nothing is written through a memory map --
on a full file system a write fails with ENOSPC instead of the process dying of SIGBUS -- and
the free space is checked first. Nothing in the index directory is followed through a link:
``.writer.lock`` is opened with ``O_NOFOLLOW`` and must be a regular file; leftovers that are
links are unlinked, never followed (:mod:`.cleanup`).

On power loss the fsync order (data, then directory, then pointer) means ``current`` only ever
names a version whose files are on disk. Damage that gets past the file system is caught by
checksums: one SHA-256 over metadata and arrays (:mod:`.records`), checked at load, and one per
model payload, checked when the model is first loaded.
"""

from __future__ import annotations

import errno
import fcntl
import operator
import os
import secrets
import shutil
import stat
from collections.abc import Iterator, Mapping

import lmdb

from .cleanup import remove_leftovers, remove_old_versions
from .errors import IndexFormatError, IndexWriteError, StoreError
from .layout import (
    CURRENT, NEXT_PREFIX, PIN, TMP_PREFIX, WRITER_LOCK, fsync_dir, fsync_file, is_ours, read_current,
    version_name, version_number, versions,
)
from .lazymodels import LazyModels
from .modelcodec import check_trusted, digest, encode_model, normalize_trusted
from .pages import LmdbFile
from .records import DATABASES, STATE_DIGEST_KEY, decode_state, encode_state, model_key, state_digest, store_record
from .versions import DATA_FILE, open_regular

__all__ = ["save_index"]

#: Address space reserved for writing one version; LMDB grows the file only as pages are used.
_MAP_SIZE = 1 << 40
#: Free space a version needs beyond its metadata and arrays: LMDB's meta, root and branch pages.
_SPACE_MARGIN = 64 << 10
#: Times the writer lock is taken again when a failed save removed the file meanwhile.
_LOCK_ATTEMPTS = 16


def _missing_dirs(root: str) -> list[str]:
    """The directories ``os.makedirs(root)`` would create, deepest first."""
    missing, path = [], root
    while not os.path.lexists(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return missing


def _prepare_root(root: str) -> list[str]:
    """Create ``root`` if needed and check it may hold an index; the directories created."""
    try:
        created = _missing_dirs(root)
        os.makedirs(root, exist_ok=True)
    except FileExistsError:
        raise IndexWriteError(f"cannot save an index at {root}: it exists and is not a directory") from None
    except OSError as exc:
        raise IndexWriteError(f"cannot save an index at {root}: {exc.strerror or exc}") from None
    if not os.path.isdir(root):
        raise IndexWriteError(f"cannot save an index at {root}: it is not a directory")
    foreign = sorted(e for e in os.listdir(root) if not is_ours(e))
    if foreign:
        raise IndexWriteError(
            f"cannot save an index at {root}: the directory holds files that are not part of an index "
            f"({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}); use a new or empty directory"
        )
    return created


def _open_lock(root: str) -> int:
    path = os.path.join(root, WRITER_LOCK)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise IndexWriteError(
                f"cannot save an index at {root}: {WRITER_LOCK!r} is a symbolic link; polydom follows no links "
                f"inside an index (remove it)"
            ) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise IndexWriteError(f"cannot save an index at {root}: {WRITER_LOCK!r} is not a regular file (remove it)")
    return fd


def _acquire_lock(root: str) -> int:
    """A descriptor holding ``flock(LOCK_EX)`` on ``root/.writer.lock``.

    A failed first save removes the lock file while holding it (nothing left behind), so a save
    that waited on the old file checks, once it holds the lock, that the name still leads to the
    file it locked, and starts again if not.
    """
    path = os.path.join(root, WRITER_LOCK)
    for _ in range(_LOCK_ATTEMPTS):
        os.makedirs(root, exist_ok=True)
        fd = _open_lock(root)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held = os.fstat(fd)
            there = os.stat(path, follow_symlinks=False)
            if (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino):
                return fd
        except FileNotFoundError:
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    raise IndexWriteError(f"cannot save an index at {root}: {WRITER_LOCK!r} keeps being replaced")


def _model_records(models: Mapping, digests: list, features, trusted: frozenset) -> Iterator[tuple[bytes, bytes]]:
    """``(key, payload)`` in key order; appends ``(key, sha256)`` to ``digests`` as it goes.

    A loaded index's models are copied as stored (checked, never deserialised). Every payload
    must pass the loader's type gate (:func:`~.modelcodec.check_trusted`), so a model the loader
    would refuse is refused now.
    """
    if isinstance(models, LazyModels):
        yield from models.stored_payloads(digests, trusted)
        return
    for mask in sorted({operator.index(m) for m in models.keys()}):
        model = models[mask]
        if model is None:
            continue
        key = model_key(mask)
        names = [f for i, f in enumerate(features) if mask >> i & 1]
        what = f"the model of feature set {names}"
        payload = encode_model(model, what)
        check_trusted(payload, trusted, what, saving=True)
        digests.append((key, digest(payload)))
        yield key, payload


def _check_space(root: str, encoded) -> None:
    """Refuse early when the file system cannot hold even the version's metadata and arrays."""
    needed = sum(len(k) + len(v) for k, v in encoded.meta + encoded.arrays) + _SPACE_MARGIN
    try:
        fs = os.statvfs(root)
    except OSError:
        return
    free = fs.f_bavail * fs.f_frsize
    if fs.f_blocks and free < needed:
        raise IndexWriteError(f"cannot save an index at {root}: {free} bytes free, at least {needed} needed")


def _write_version(vdir: str, encoded, models: Mapping, features, trusted: frozenset) -> int:
    """Write one version into ``vdir`` and fsync it; the number of models written."""
    fd = os.open(os.path.join(vdir, PIN), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    os.close(fd)
    env = lmdb.open(
        vdir, map_size=_MAP_SIZE, subdir=True, create=False, max_dbs=len(DATABASES), lock=False,
        sync=True, metasync=True, readahead=False,
    )
    try:
        dbs = {name: env.open_db(name, create=True) for name in DATABASES}
        with env.begin(write=True) as txn:
            digests: list = []
            txn.cursor(db=dbs[b"models"]).putmulti(_model_records(models, digests, features, trusted), append=True)
            n_models = len(digests)
            key, value = store_record(encoded, n_models)
            meta = dict(encoded.meta)
            meta[key] = value
            txn.cursor(db=dbs[b"meta"]).putmulti(sorted(meta.items()), append=True)
            txn.cursor(db=dbs[b"arrays"]).putmulti(encoded.arrays, append=True)
            digests.append((STATE_DIGEST_KEY, state_digest(meta, dict(encoded.arrays))))
            txn.cursor(db=dbs[b"checksums"]).putmulti(sorted(digests), append=True)
    finally:
        env.close()
    for name in (DATA_FILE, PIN):
        fsync_file(os.path.join(vdir, name))
    fsync_dir(vdir)
    return n_models


def _read_back(vdir: str, n_models: int) -> None:
    """Read the version just written the way a loader will; IndexWriteError if it does not load."""
    where = f"the version written in {vdir}"
    dir_fd = os.open(vdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fd = open_regular(DATA_FILE, dir_fd, where)
    finally:
        os.close(dir_fd)
    try:
        file = LmdbFile(fd, where)
        decode_state(dict(file.items(b"meta")), dict(file.items(b"arrays")), file.get(b"checksums", STATE_DIGEST_KEY), where)
        if file.entries(b"models") != n_models:
            raise IndexFormatError(f"{where}: {file.entries(b'models')} models read back, {n_models} written")
    except IndexFormatError as exc:
        raise IndexWriteError(f"{exc} -- the written file does not read back; nothing was published") from None
    finally:
        os.close(fd)


def _publish(root: str, name: str) -> None:
    link = os.path.join(root, NEXT_PREFIX + secrets.token_hex(8))
    os.symlink(name, link)
    os.replace(link, os.path.join(root, CURRENT))
    fsync_dir(root)


def _next_version(root: str, previous: str | None) -> str:
    """One past the highest version present and the one ``current`` names (which may be gone:
    reusing its number would make the new version look like the old one to the cleanup)."""
    highest = max([n for n, _ in versions(root)] + [version_number(previous) if previous else 0])
    return version_name(highest + 1)


def _leave_nothing(root: str, created: list[str]) -> None:
    """After a failed save of an index never published: remove the lock file and the directories
    this save created. Called while holding the lock (a waiting save re-checks it, see
    :func:`_acquire_lock`)."""
    try:
        if os.listdir(root) == [WRITER_LOCK]:
            os.unlink(os.path.join(root, WRITER_LOCK))
        for path in created:
            os.rmdir(path)
    except OSError:
        pass  # not empty (another save got in), or gone already


def save_index(index, path, *, keep: int = 2, trusted=None) -> str:
    """Write ``index`` with its models as a new version at ``path`` and publish it atomically.

    Readers of ``path`` -- already open or opening meanwhile -- see the old version or the new one,
    never a mix, even if this process is killed at any point (see the module docstring). Saves to
    one path are serialised. A save that fails publishes nothing and leaves nothing behind.

    Parameters
    ----------
    index : PolyDomIndex or any index with ``to_state()``
    path : str or os.PathLike
        A directory: created if missing; if it exists it must be empty or an index.
    keep : int, default 2
        Published versions to keep, the new one included (older ones are removed unless pinned
        by a reader).
    trusted : iterable of str or type, optional
        Model types to accept beyond polydom's trusted list, as for ``polydom.load``: a model
        the loader would refuse is refused here, naming the types to pass. Pass the same list
        to ``polydom.load``.

    Returns
    -------
    str
        The published version's name.

    Raises
    ------
    UnsupportedModelError
        A model skops cannot store (nothing is published).
    UntrustedModelError
        A model whose types are outside the trusted list (nothing is published); its
        ``untrusted`` attribute lists what to pass as ``trusted``.
    IndexWriteError
        Nothing can be written at ``path`` (a file, under a file, a foreign directory, a link
        where the lock file belongs, a full file system, an I/O error); nothing is published.
    TypeError, ValueError
        ``keep``, ``trusted`` or the index's metadata is invalid (raised before anything is written).
    """
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise ValueError(f"keep must be an integer >= 1, got {keep!r}")
    trusted = normalize_trusted(trusted)
    state = index.to_state()
    encoded = encode_state(state)
    models = state.models if state.models is not None else {}
    if not isinstance(models, Mapping):
        raise TypeError(f"IndexState.models must be a mapping of mask to model, got {type(models).__name__}")
    features = list(state.meta.get("features", ()))
    root = os.path.abspath(os.fspath(path))
    try:
        created = _prepare_root(root)
        lock = _acquire_lock(root)
        try:
            name = _save_locked(root, encoded, models, features, trusted, keep)
        except BaseException as exc:
            full = isinstance(exc, (OSError, lmdb.Error)) and _disk_full(root, exc)
            _leave_nothing(root, created)
            if full:
                raise IndexWriteError(f"saving the index at {root} failed: the disk is full ({exc}); "
                                      "nothing was published: free some space and save again") from exc
            raise
        finally:
            os.close(lock)
    except StoreError:
        raise
    except (OSError, lmdb.Error) as exc:
        raise IndexWriteError(f"saving the index at {root} failed: {exc}") from exc
    return name


#: Free space below which a failed write is blamed on a full disk: LMDB reports ENOSPC met while
#: flushing as a plain I/O error, so the free space left is what tells.
_FULL_BELOW = 1 << 20


def _disk_full(root: str, exc) -> bool:
    """Whether the write that raised ``exc`` failed because the file system under ``root`` is full."""
    if getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT):
        return True
    try:
        fs = os.statvfs(root)
    except OSError:
        return False
    return bool(fs.f_blocks) and fs.f_bavail * fs.f_frsize < _FULL_BELOW


def _save_locked(root: str, encoded, models: Mapping, features, trusted: frozenset, keep: int) -> str:
    """Steps 1 to 5 of the module docstring, under ``.writer.lock``."""
    remove_leftovers(root)
    try:
        previous = read_current(root)
    except IndexFormatError:
        previous = None  # first save, or a damaged pointer that this save replaces
    _check_space(root, encoded)
    tmp = os.path.join(root, TMP_PREFIX + secrets.token_hex(8))
    os.mkdir(tmp)
    try:
        n_models = _write_version(tmp, encoded, models, features, trusted)
        _read_back(tmp, n_models)
        name = _next_version(root, previous)
        os.rename(tmp, os.path.join(root, name))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_dir(root)
    _publish(root, name)
    remove_old_versions(root, previous, name, keep)
    return name
