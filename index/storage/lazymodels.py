"""A stored version's models as a read-only mapping, each checked and decoded on first access.

Lookups hand out this mapping with every answer (``Choice.model`` reads it), so it must cost
nothing until a model is wanted: keys and the count come from LMDB; a payload is read, checked
(SHA-256, bounds, trusted types: :mod:`.modelcodec`) and rebuilt with skops only on ``get``.
Damage inside a payload is caught then, not at load. Records are read through the version's
checked pages (:class:`~.pages.LmdbFile`), never through a memory map.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping

from .errors import IndexFormatError, ModelIntegrityError
from .modelcodec import check_trusted, decode_model, digest
from .records import mask_of, model_key
from .versions import OpenVersion

__all__ = ["LazyModels"]

#: Cached for a mask with no stored model, so a repeated miss does not read LMDB again.
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

    def __init__(self, version: OpenVersion, count: int, trusted: frozenset, features):
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
            file = self._version.file
            try:
                payload = file.get(b"models", key)
                check = file.get(b"checksums", key) if payload is not None else None
            except IndexFormatError as exc:
                raise ModelIntegrityError(f"{self._describe(mask)} cannot be read ({exc})") from None
            if payload is None:
                model = _ABSENT
            else:
                model = decode_model(payload, check, self._trusted, self._describe(mask))
            self._cache[mask] = model
            return model

    def __iter__(self) -> Iterator[int]:
        return iter([mask_of(k) for k in self._version.file.keys(b"models")])

    def __len__(self) -> int:
        return self._count

    def __contains__(self, mask) -> bool:
        try:
            key = model_key(mask)
        except (TypeError, ValueError):
            return False
        return self._version.file.get(b"models", key, read=False) is not None

    def stored_payloads(self, digests: list, trusted: frozenset = frozenset()) -> Iterator[tuple[bytes, bytes]]:
        """``(key, payload)`` in key order, checksums verified, for copying into a new version.

        Appends ``(key, sha256)`` to ``digests`` as it goes. No model is deserialised; each
        payload's types must be trusted by polydom, by this mapping's loader or by ``trusted``.
        """
        file = self._version.file
        checks = dict(file.items(b"checksums"))
        for key, payload in file.items(b"models"):
            expected = checks.get(key)
            what = self._describe(mask_of(key))
            if expected is None or digest(payload) != expected:
                raise ModelIntegrityError(f"{what}: the payload does not match its checksum; not copying it")
            check_trusted(payload, self._trusted | trusted, what, saving=True)
            digests.append((key, expected))
            yield key, payload

    def __repr__(self) -> str:
        return f"<LazyModels {self._count} models, {len(self._cache)} loaded, {self._version.where}>"
