"""The stored index's record layout: what each LMDB database holds, its keys, and the format check.

One published version of an index is one LMDB environment with four named databases:

============  ==============================  ===========================================
database      key                             value
============  ==============================  ===========================================
``meta``      entry name (utf-8)              JSON: each entry of ``IndexState.meta``
                                              (backend, features, costs, domain, params,
                                              stats, ...) plus :data:`STORE_KEY`
``arrays``    array name (utf-8)              the raw bytes of one ``IndexState`` array
                                              (dtype and shape recorded under STORE_KEY);
                                              the explored sets and their accuracies are
                                              two of these arrays
``models``    mask, 8 bytes big-endian        a skops payload (:mod:`.modelcodec`)
``checksums`` the same mask key               SHA-256 of that payload
              ``b"state"``                    SHA-256 over every meta and arrays record
============  ==============================  ===========================================

Invariants: mask keys have a fixed width and are big-endian, so byte order is mask order and a
writer that emits models in ascending mask order only ever appends (``putmulti(append=True)``,
each B-tree page filled once). Every value in ``meta`` and ``arrays`` is covered by the
``state`` digest, so a damaged record is an :class:`IndexFormatError`, never a wrong answer.

Pure functions: no I/O happens here (the files are read in :mod:`.reader` and written in
:mod:`.writer`).
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .errors import IndexFormatError, IndexVersionError

__all__ = [
    "FORMAT_VERSION", "STORE_KEY", "DATABASES", "MODEL_KEY_BYTES", "STATE_DIGEST_KEY",
    "model_key", "mask_of", "EncodedState", "encode_state", "store_record", "state_digest", "decode_state",
]


#: Bumped whenever a reader of the old layout would misread the new one.
FORMAT_VERSION = 1
#: The meta entry that describes the layout itself (reserved: a backend's meta may not use it).
STORE_KEY = "polydom.store"
DATABASES = (b"meta", b"arrays", b"models", b"checksums")
MODEL_KEY_BYTES = 8
STATE_DIGEST_KEY = b"state"
_ARRAY_KINDS = "biuf"  # numbers only: an object array could smuggle in anything
#: Feature-set masks are stored in signed 64-bit arrays, so an index has at most 62 features.
MAX_FEATURES = 62
#: Cost curves are polynomials of low degree; a stored one longer than this is damage (its roots
#: are found through a companion matrix, cubic in its length).
MAX_COEFFICIENTS = 64


def model_key(mask: int) -> bytes:
    """The ``models``/``checksums`` key of a feature-set mask; ``ValueError`` outside ``[0, 2**64)``.

    >>> model_key(5).hex()
    '0000000000000005'
    """
    mask = operator.index(mask)  # ints and numpy integers; a float is a TypeError
    if not 0 <= mask < 1 << (8 * MODEL_KEY_BYTES):
        raise ValueError(f"feature-set mask {mask} does not fit the {MODEL_KEY_BYTES}-byte model key")
    return mask.to_bytes(MODEL_KEY_BYTES, "big")


def mask_of(key: bytes) -> int:
    """Inverse of :func:`model_key`."""
    return int.from_bytes(key, "big")


@dataclass(frozen=True)
class EncodedState:
    """An ``IndexState`` minus its models, as sorted ``(key, value)`` records ready to append.

    Attributes
    ----------
    meta : list of (bytes, bytes)
        The state's meta entries as JSON, without the :data:`STORE_KEY` record.
    arrays : list of (bytes, bytes)
    array_specs : dict of str to dict
        ``{"dtype": "<f8", "shape": [n]}`` per array.
    """

    meta: list
    arrays: list
    array_specs: dict


def _json(value, where: str) -> bytes:
    try:
        return json.dumps(value, allow_nan=False, sort_keys=True, separators=(",", ":")).encode()
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"index metadata {where!r} cannot be stored as JSON: {exc}") from None
    except RecursionError:
        raise ValueError(f"index metadata {where!r} is nested too deeply to store") from None


def encode_state(state) -> EncodedState:
    """Validate and encode ``state.meta`` and ``state.arrays``.

    Raises
    ------
    TypeError, ValueError
        A meta entry that is not JSON (NaN included), the reserved key, or an array that is not
        numeric.
    """
    if not isinstance(state.meta, Mapping) or not isinstance(state.arrays, Mapping):
        raise TypeError("IndexState.meta and IndexState.arrays must be mappings")
    meta = []
    for name, value in state.meta.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"index metadata keys must be non-empty strings, got {name!r}")
        if name == STORE_KEY:
            raise ValueError(f"index metadata may not use the reserved key {STORE_KEY!r}")
        meta.append((name.encode(), _json(value, name)))
    arrays, specs = [], {}
    for name, value in state.arrays.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"index array names must be non-empty strings, got {name!r}")
        arr = np.asarray(value)
        if arr.dtype.kind not in _ARRAY_KINDS:
            raise TypeError(f"index array {name!r} must be numeric, got dtype {arr.dtype}")
        arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
        specs[name] = {"dtype": arr.dtype.str, "shape": list(arr.shape)}
        arrays.append((name.encode(), arr.tobytes()))
    return EncodedState(sorted(meta), sorted(arrays), specs)


def store_record(encoded: EncodedState, n_models: int) -> tuple[bytes, bytes]:
    """The :data:`STORE_KEY` meta record: format version, array specs, model-key width and count."""
    info = {
        "format_version": FORMAT_VERSION,
        "arrays": encoded.array_specs,
        "model_key_bytes": MODEL_KEY_BYTES,
        "models": n_models,
    }
    return STORE_KEY.encode(), _json(info, STORE_KEY)


def state_digest(meta: Mapping[bytes, bytes], arrays: Mapping[bytes, bytes]) -> bytes:
    """SHA-256 over every meta and arrays record (length-prefixed, in key order)."""
    h = hashlib.sha256()
    for tag, records in ((b"meta", meta), (b"arrays", arrays)):
        for key in sorted(records):
            value = records[key]
            h.update(tag)
            h.update(len(key).to_bytes(8, "big"))
            h.update(key)
            h.update(len(value).to_bytes(8, "big"))
            h.update(value)
    return h.digest()


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON value (polydom never writes it)")


def _decode_json(raw: bytes, where: str):
    try:
        return json.loads(bytes(raw), parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise IndexFormatError(f"{where}: metadata entry is not valid JSON ({exc})") from None
    except RecursionError:
        raise IndexFormatError(f"{where}: metadata entry is nested too deeply") from None


def _array(name: str, spec, raw: bytes, where: str) -> np.ndarray:
    """One stored array, read-only, after its recorded layout is checked against its bytes.

    Every array of an ``IndexState`` is 1-D and numeric with items of at most 8 bytes, so a
    layout outside that (an object dtype, a second dimension of length 0 after one of 2**62,
    ...) is damage, refused before numpy is asked to build it.
    """
    try:
        dtype = np.dtype(spec["dtype"])
        shape = spec["shape"]
    except Exception:  # numpy refuses a bad dtype description with several exception kinds
        raise IndexFormatError(f"{where}: bad layout for array {name!r}: {spec!r}") from None
    if (
        dtype.kind not in _ARRAY_KINDS or dtype.itemsize > 8 or dtype.fields is not None or dtype.subdtype is not None
        or not isinstance(shape, list) or len(shape) != 1 or not isinstance(shape[0], int) or isinstance(shape[0], bool)
        or shape[0] < 0 or shape[0] * dtype.itemsize != len(raw)
    ):
        raise IndexFormatError(f"{where}: array {name!r} does not match its layout {spec!r}")
    arr = np.frombuffer(bytes(raw), dtype=dtype)
    return arr.astype(dtype.newbyteorder("="), copy=False)


def decode_state(meta: Mapping[bytes, bytes], arrays: Mapping[bytes, bytes], digest: bytes | None, where: str):
    """Check and decode the records of one version.

    The format version is checked first (a later format may checksum differently), then the
    ``state`` digest, then the layout of every array and the metadata every backend shares. What
    the arrays mean is the backend's to check (its ``from_state``); nothing here can make that
    unbounded: every array is 1-D, numeric and as long as its bytes say.

    Parameters
    ----------
    meta, arrays : mapping of bytes to bytes
        All records of the ``meta`` and ``arrays`` databases.
    digest : bytes or None
        The stored ``state`` checksum.
    where : str
        Names the version in error messages.

    Returns
    -------
    (dict, dict, dict)
        The state's meta, its arrays (read-only numpy arrays) and the store record.

    Raises
    ------
    IndexVersionError
        Another format version.
    IndexFormatError
        Anything missing, damaged or inconsistent.
    """
    raw_info = meta.get(STORE_KEY.encode())
    if raw_info is None:
        raise IndexFormatError(f"{where}: not a polydom index (no {STORE_KEY!r} metadata)")
    info = _decode_json(raw_info, where)
    found = info.get("format_version") if isinstance(info, dict) else None
    if not isinstance(found, int) or isinstance(found, bool) or found < 1:
        # Every format records its number here; without one the record is damaged, not foreign.
        raise IndexFormatError(f"{where}: the {STORE_KEY!r} record is damaged (no format version in it)")
    if found != FORMAT_VERSION:
        raise IndexVersionError(
            f"{where}: index storage format {found!r} is not supported (this polydom reads format "
            f"{FORMAT_VERSION}); rebuild the index or use a matching polydom version",
            found, FORMAT_VERSION,
        )
    if digest is None or bytes(digest) != state_digest(meta, arrays):
        raise IndexFormatError(f"{where}: metadata or arrays are corrupted (checksum mismatch)")
    specs = info.get("arrays")
    if not isinstance(specs, dict) or set(specs) != {k.decode() for k in arrays}:
        raise IndexFormatError(f"{where}: the arrays do not match their recorded layout")
    if info.get("model_key_bytes") != MODEL_KEY_BYTES:
        raise IndexFormatError(f"{where}: unexpected model key width {info.get('model_key_bytes')!r}")
    count = info.get("models")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise IndexFormatError(f"{where}: bad model count {count!r}")
    out_arrays = {name: _array(name, spec, arrays[name.encode()], where) for name, spec in specs.items()}
    out_meta = {
        key.decode(): _decode_json(value, where) for key, value in meta.items() if key != STORE_KEY.encode()
    }
    _check_meta(out_meta, where)
    return out_meta, out_arrays, info


def _is_real(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _check_meta(meta: dict, where: str) -> None:
    """The entries every backend shares (see ``IndexState``): backend, features, costs, domain."""
    if not isinstance(meta.get("backend"), str):
        raise IndexFormatError(f"{where}: metadata names no backend")
    features = meta.get("features")
    if (
        not isinstance(features, list) or not features or not all(isinstance(f, str) for f in features)
        or len(set(features)) != len(features)
    ):
        raise IndexFormatError(f"{where}: metadata has no valid feature list")
    if len(features) > MAX_FEATURES:
        raise IndexFormatError(f"{where}: {len(features)} features; an index holds at most {MAX_FEATURES}")
    costs = meta.get("costs")
    if (
        not isinstance(costs, list) or len(costs) != len(features)
        or not all(isinstance(c, list) and 0 < len(c) <= MAX_COEFFICIENTS and all(_is_real(x) for x in c) for c in costs)
    ):
        raise IndexFormatError(f"{where}: the stored metadata is inconsistent (need one cost curve per feature)")
    domain = meta.get("domain")
    ok = isinstance(domain, list) and len(domain) == 2 and _is_real(domain[0]) and domain[0] >= 0
    if ok:
        hi = math.inf if domain[1] == "inf" else domain[1]
        ok = (hi == math.inf or _is_real(hi)) and domain[0] < hi
    if not ok:
        raise IndexFormatError(f"{where}: the stored metadata is inconsistent (bad domain {domain!r})")
    for name in ("params", "stats"):
        if not isinstance(meta.get(name, {}), dict):
            raise IndexFormatError(f"{where}: the stored metadata is inconsistent ({name} is not a mapping)")
