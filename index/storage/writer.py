"""Save an index as a new version and publish it atomically.

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
5. Remove old versions (:mod:`.cleanup`): keep ``current`` and the ``keep - 1`` newest before
   it; a version pinned by any reader is skipped. *Killed:* a ``.trash-Z`` leftover no reader
   can resolve.

On power loss the fsync order (data, then directory, then pointer) means ``current`` only ever
names a version whose files are on disk. Damage that gets past the file system is caught by
checksums: one SHA-256 over metadata and arrays (:mod:`.records`), checked at load, and one per
model payload, checked when the model is first loaded.
"""

from __future__ import annotations

import fcntl
import operator
import os
import secrets
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import lmdb

from .cleanup import remove_leftovers, remove_old_versions
from .errors import IndexFormatError, IndexWriteError, StoreError
from .layout import (
    CURRENT, NEXT_PREFIX, PIN, TMP_PREFIX, WRITER_LOCK, fsync_dir, fsync_file, is_ours, read_current,
    version_name, versions,
)
from .lazymodels import LazyModels
from .modelcodec import digest, encode_model
from .records import DATABASES, STATE_DIGEST_KEY, encode_state, model_key, state_digest, store_record

__all__ = ["save_index"]

#: Address space reserved for writing one version; LMDB grows the file only as pages are used.
_MAP_SIZE = 1 << 40


def _prepare_root(root: str) -> None:
    try:
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


@contextmanager
def _writer_lock(root: str):
    fd = os.open(os.path.join(root, WRITER_LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _model_records(models: Mapping, digests: list, features) -> Iterator[tuple[bytes, bytes]]:
    """``(key, payload)`` in key order; appends ``(key, sha256)`` to ``digests`` as it goes.

    A loaded index's models are copied as stored (checked, never deserialised).
    """
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
        fsync_file(os.path.join(vdir, name))
    fsync_dir(vdir)


def _publish(root: str, name: str) -> None:
    link = os.path.join(root, NEXT_PREFIX + secrets.token_hex(8))
    os.symlink(name, link)
    os.replace(link, os.path.join(root, CURRENT))
    fsync_dir(root)


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
            remove_leftovers(root)
            try:
                previous = read_current(root)
            except IndexFormatError:
                previous = None  # first save, or a damaged pointer that this save replaces
            tmp = os.path.join(root, TMP_PREFIX + secrets.token_hex(8))
            os.mkdir(tmp)
            try:
                _write_version(tmp, encoded, models, features)
                existing = versions(root)
                name = version_name(existing[-1][0] + 1 if existing else 1)
                os.rename(tmp, os.path.join(root, name))
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            fsync_dir(root)
            _publish(root, name)
            remove_old_versions(root, previous, name, keep)
    except StoreError:
        raise
    except (OSError, lmdb.Error) as exc:
        raise IndexWriteError(f"saving the index at {root} failed: {exc}") from exc
    return name
