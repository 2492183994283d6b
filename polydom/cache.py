"""A resumable expansion cache: trained feature sets (accuracy and model) in an LMDB environment
of their own, apart from any published index.

Each trained set is committed in its own write transaction the moment it comes back from the
black box, so a build killed at any point (SIGKILL included) loses at most the sets in flight;
run again, it trains only what is missing. LMDB's copy-on-write commits never leave a torn entry.

Entries are keyed by the caller's ``cache_key`` and the set's **feature names** (sorted), not by
bitmask: a rebuild with another alpha, or after adding a feature (which renumbers the bits),
reuses every set already trained under the same key. A black box cannot be fingerprinted, so the
key is the caller's promise that "same key" means same data, learner and feature definitions
(the estimator derives it from a fingerprint of those).

Models are stored as skops payloads with a SHA-256 each and loaded with polydom's trusted-type
list, as in a published index -- never pickled.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Sequence

from polydom.index.modelcodec import decode_model, digest, encode_model, normalize_trusted

from .errors import PolydomError

__all__ = ["ExpansionStore", "CacheError"]

_SEP = b"\x1f"
_HEADER = struct.Struct(">d?")  # accuracy, has-model
_MAP_SIZE = 1 << 36  # a sparse reservation; the file grows with the data


class CacheError(PolydomError, ValueError):
    """The expansion cache path or key is unusable."""


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
    Open it in the process that runs the build; worker processes never touch it.
    """

    def __init__(self, path, cache_key: str, *, trusted: Iterable[str] | None = None):
        import lmdb

        if not isinstance(cache_key, str) or not cache_key:
            raise CacheError(f"cache_key must be a non-empty string, got {cache_key!r}")
        if _SEP.decode() in cache_key or "\x00" in cache_key:
            raise CacheError("cache_key must not contain control separators")
        path = os.fspath(path)
        if os.path.exists(path) and not os.path.isdir(path):
            raise CacheError(f"expansion cache path {path!r} exists and is not a directory")
        try:
            os.makedirs(path, exist_ok=True)
            self._env = lmdb.open(path, map_size=_MAP_SIZE, max_dbs=2, subdir=True)
        except (OSError, lmdb.Error) as exc:
            raise CacheError(f"cannot open expansion cache at {path!r}: {exc}") from None
        self._db = self._env.open_db(b"expansions")
        self._prefix = cache_key.encode() + b"\x00"
        self._trusted = normalize_trusted(trusted)
        self.path = path
        self.cache_key = cache_key

    def _key(self, names: Sequence[str]) -> bytes:
        if any(_SEP.decode() in n or "\x00" in n for n in names):
            raise CacheError(f"feature names used with the expansion cache must not contain control separators: {sorted(names)!r}")
        return self._prefix + _SEP.join(n.encode() for n in sorted(names))

    def get(self, names: Sequence[str]):
        """``(accuracy, model)`` for the set, or None when it was never trained under this key."""
        with self._env.begin(db=self._db) as txn:
            raw = txn.get(self._key(names))
            if raw is None:
                return None
            raw = bytes(raw)
        accuracy, has_model = _HEADER.unpack_from(raw)
        if not has_model:
            return accuracy, None
        body = raw[_HEADER.size :]
        checksum, payload = body[:32], body[32:]
        what = f"cached model for {sorted(names)}"
        return accuracy, decode_model(payload, checksum, self._trusted, what)

    def put(self, names: Sequence[str], accuracy: float, model=None) -> None:
        """Commit one trained set (durable when this returns)."""
        value = _HEADER.pack(float(accuracy), model is not None)
        if model is not None:
            payload = encode_model(model, f"model for {sorted(names)}")
            value += digest(payload) + payload
        with self._env.begin(write=True, db=self._db) as txn:
            txn.put(self._key(names), value)

    def __len__(self) -> int:
        """Entries under this store's key."""
        n = 0
        with self._env.begin(db=self._db) as txn:
            cursor = txn.cursor()
            if cursor.set_range(self._prefix):
                for key in cursor.iternext(values=False):
                    if not bytes(key).startswith(self._prefix):
                        break
                    n += 1
        return n

    def close(self) -> None:
        self._env.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
