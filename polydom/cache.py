"""A resumable expansion cache: trained feature sets (accuracy and model) in an LMDB environment
of their own, apart from any published index.

Each trained set is committed in its own write transaction the moment it comes back from the
black box, so a build killed at any point (SIGKILL included) loses at most the sets in flight;
run again, it trains only what is missing. LMDB's copy-on-write commits never leave a torn entry.

Entries are keyed by the caller's ``cache_key`` and the set's **feature names** (sorted, each
length-prefixed, so no name -- the empty one included -- can make two sets share a key), not by
bitmask: a rebuild with another alpha, or after adding a feature (which renumbers the bits),
reuses every set already trained under the same key. A black box cannot be fingerprinted, so the
key is the caller's promise that "same key" means same data, learner and feature definitions
(the estimator derives it from a fingerprint of those).

Models are stored as skops payloads with a SHA-256 each and loaded with polydom's trusted-type
list, as in a published index -- never pickled.

Sharing one cache
-----------------
Several processes may build into one cache at once (two ``polydom build --cache`` runs, say).
LMDB is opened without its lock file -- a shared memory map that a full disk turns into SIGBUS --
so polydom coordinates them itself with ``flock`` on the sidecar file :data:`LOCK_FILE` in the
cache directory: opening the environment and every write transaction hold it exclusively, every
read transaction holds it shared. A writer therefore never reuses a page another process is
reading, and no two writers ever run at once; each commit is still one LMDB transaction, so
nothing is lost and no entry is torn. The kernel drops the lock of a killed process. Threads of
one process are serialised by a lock of their own. Transactions are short (one entry), so a
waiting process waits milliseconds.
"""

from __future__ import annotations

import errno
import fcntl
import math
import os
import stat
import struct
import threading
from contextlib import contextmanager
from collections.abc import Iterable, Sequence

from polydom.index.values import Expansion

from polydom.index.storage.modelcodec import decode_model, digest, encode_model, normalize_trusted

from .errors import CacheError  # noqa: F401 - defined with the package's errors

__all__ = ["ExpansionStore", "CacheError", "LOCK_FILE"]

#: The sidecar file whose ``flock`` serialises writers and keeps readers apart from them.
LOCK_FILE = "polydom.lock"

_FORMAT = b"v2"  # entries of the first format (ambiguous keys, no standard error) are not read
_HEADER = struct.Struct(">dd?")  # accuracy, standard error (NaN: none), has-model
_LENGTH = struct.Struct(">I")
_MAP_SIZE = 1 << 36  # a sparse reservation; the file grows with the data


def _open_lock_file(path: str) -> int:
    """A descriptor of ``path/LOCK_FILE``, created if missing; it must be a regular file."""
    name = os.path.join(path, LOCK_FILE)
    try:
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CacheError(f"expansion cache at {path!r}: {LOCK_FILE!r} is a symbolic link (remove it)") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise CacheError(f"expansion cache at {path!r}: {LOCK_FILE!r} is not a regular file (remove it)")
    return fd


class ExpansionStore:
    """Persistent mapping ``feature names -> (accuracy, model)`` under one ``cache_key``.

    Parameters
    ----------
    path : str or os.PathLike
        Directory of the LMDB environment (created if missing).
    cache_key : str
        Non-empty; entries under other keys are invisible.
    trusted : iterable of str, optional
        Extra fully qualified type names allowed in cached models.

    Notes
    -----
    Open it in the process that runs the build; worker processes never touch it. Other
    processes may use the same directory at the same time (see the module docstring).
    """

    def __init__(self, path, cache_key: str, *, trusted: Iterable[str] | None = None):
        import lmdb

        if not isinstance(cache_key, str) or not cache_key:
            raise CacheError(f"cache_key must be a non-empty string, got {cache_key!r}")
        if "\x00" in cache_key:
            raise CacheError("cache_key must not contain NUL characters")
        path = os.fspath(path)
        if os.path.exists(path) and not os.path.isdir(path):
            raise CacheError(f"expansion cache path {path!r} exists and is not a directory")
        self.path = path
        self.cache_key = cache_key
        self._thread_lock = threading.Lock()
        try:
            os.makedirs(path, exist_ok=True)
            self._lock_fd = _open_lock_file(path)
        except OSError as exc:
            raise CacheError(f"cannot open expansion cache at {path!r}: {exc.strerror or exc}") from None
        try:
            # Creating the environment writes its first pages, and opening the named database
            # may commit it: both happen under the exclusive lock (see the module docstring).
            with self._locked(fcntl.LOCK_EX):
                self._env = lmdb.open(path, map_size=_MAP_SIZE, max_dbs=2, subdir=True, lock=False)
                try:
                    self._db = self._env.open_db(b"expansions")
                except BaseException:
                    self._env.close()
                    raise
        except (OSError, lmdb.Error) as exc:
            os.close(self._lock_fd)
            raise CacheError(f"cannot open expansion cache at {path!r}: {exc}") from None
        except BaseException:
            os.close(self._lock_fd)
            raise
        self._prefix = _FORMAT + b"\x00" + cache_key.encode() + b"\x00"
        self._trusted = normalize_trusted(trusted)

    @contextmanager
    def _locked(self, kind: int):
        """Hold this process's thread lock and ``flock(kind)`` on the sidecar file."""
        with self._thread_lock:
            if self._lock_fd is None:
                raise CacheError(f"the expansion cache at {self.path!r} is closed")
            while True:
                try:
                    fcntl.flock(self._lock_fd, kind)
                    break
                except InterruptedError:
                    continue
            try:
                yield
            finally:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _key(self, names: Sequence[str]) -> bytes:
        encoded = [n.encode() for n in sorted(names)]
        return self._prefix + _LENGTH.pack(len(encoded)) + b"".join(_LENGTH.pack(len(e)) + e for e in encoded)

    def get(self, names: Sequence[str]) -> Expansion | None:
        """The set's cached :class:`Expansion`, or None when it was never trained under this key.

        Raises
        ------
        CacheError
            The entry is damaged: truncated, or holding an accuracy outside ``[0, 1]`` or a
            negative or infinite standard error.
        """
        with self._locked(fcntl.LOCK_SH), self._env.begin(db=self._db) as txn:
            raw = txn.get(self._key(names))
            if raw is None:
                return None
            raw = bytes(raw)
        what = f"cached entry for {sorted(names)} in {self.path!r}"
        if len(raw) < _HEADER.size:
            raise CacheError(f"{what} is truncated ({len(raw)} bytes)")
        accuracy, std_error, has_model = _HEADER.unpack_from(raw)
        if not (math.isfinite(accuracy) and 0.0 <= accuracy <= 1.0):
            raise CacheError(f"{what} holds accuracy {accuracy!r}, not a number in [0, 1]")
        if not (math.isnan(std_error) or (math.isfinite(std_error) and std_error >= 0.0)):
            raise CacheError(f"{what} holds standard error {std_error!r}")
        se = None if math.isnan(std_error) else std_error
        if not has_model:
            return Expansion(accuracy, None, se)
        body = raw[_HEADER.size :]
        if len(body) < 32:
            raise CacheError(f"{what} is truncated inside its model checksum")
        checksum, payload = body[:32], body[32:]
        return Expansion(accuracy, decode_model(payload, checksum, self._trusted, f"cached model for {sorted(names)}"), se)

    def put(self, names: Sequence[str], accuracy: float, model=None, std_error: float | None = None) -> None:
        """Commit one trained set (durable when this returns).

        Raises
        ------
        CacheError
            The cache could not be written (a full disk, a damaged file), naming its path.
        """
        se = math.nan if std_error is None else float(std_error)
        value = _HEADER.pack(float(accuracy), se, model is not None)
        if model is not None:
            payload = encode_model(model, f"model for {sorted(names)}")
            value += digest(payload) + payload
        import lmdb

        try:
            with self._locked(fcntl.LOCK_EX), self._env.begin(write=True, db=self._db) as txn:
                txn.put(self._key(names), value)
        except lmdb.Error as exc:
            raise CacheError(f"cannot write to the expansion cache at {self.path!r}: {exc}") from None

    def __len__(self) -> int:
        """Entries under this store's key."""
        n = 0
        with self._locked(fcntl.LOCK_SH), self._env.begin(db=self._db) as txn:
            cursor = txn.cursor()
            if cursor.set_range(self._prefix):
                for key in cursor.iternext(values=False):
                    if not bytes(key).startswith(self._prefix):
                        break
                    n += 1
        return n

    def close(self) -> None:
        """Close the environment and the sidecar lock file (idempotent)."""
        with self._thread_lock:
            self._env.close()
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
