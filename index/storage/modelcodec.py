"""Models to bytes and back with skops, never pickle: checksummed, and loaded only from trusted types.

A stored model is a skops.io payload (a zip holding ``schema.json`` plus array files) and its
SHA-256. Loading goes through these gates, in this order, and nothing in the payload is
constructed unless all pass:

1. the SHA-256 of the payload equals the stored one (:class:`ModelIntegrityError` otherwise);
2. bounds, checked before anything is inflated (:class:`ModelIntegrityError` otherwise): the
   members' declared sizes (at most a few times the payload's own), the schema's size and
   nesting depth, the bytes the schema reads, every stored array's header against its size
   (numpy allocates what a header declares), and no builtin or numpy object built from
   constructor arguments (``bytearray(2**30)`` is 286 bytes of payload);
3. every type and function the payload's schema names is trusted -- polydom's own list
   (:func:`default_trusted_types`) plus whatever the caller added -- and the object it rebuilds
   is a trusted *estimator* (:func:`estimator_types`, or a type the caller trusted), not a bare
   array or byte string (:class:`UntrustedModelError` otherwise). The schema is read as plain
   JSON, so this check imports and runs nothing;
4. skops' own audit, run by :func:`skops.io.loads` with exactly the trusted names found, and
   the rebuilt object's type checked once more.

Saving runs gate 3 too (:func:`check_trusted` with ``saving=True``), so a model the loader
would refuse is refused by ``save`` already, with the ``trusted=`` hint.

The checksum catches accidental corruption (a flipped bit, a torn copy). It is no defence against
someone who can write the index -- they can rewrite the checksum too; the type gates are that
defence, and they hold whatever the bytes say.

skops imports scikit-learn, so this module imports skops only inside :func:`encode_model` and
:func:`decode_model`: serving lookups never pays for it.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import math
import zipfile
from collections.abc import Iterable

from .errors import ModelIntegrityError, UnsupportedModelError, UntrustedModelError

__all__ = [
    "default_trusted_types", "estimator_types", "normalize_trusted", "payload_types", "check_trusted",
    "encode_model", "decode_model", "digest",
]


# What polydom vouches for: plain values, numpy arrays and scalars, and scikit-learn's linear
# models, scalers, pipelines, naive Bayes and dummy estimators -- estimators whose fitted state is
# arrays and numbers that predict() only multiplies and compares. Tree ensembles are left out on
# purpose: skops warns that a crafted sklearn.tree._tree.Tree can crash predict(); a caller who
# made the file trusts them with polydom.load(path, trusted=[...]).
_BUILTINS = ("dict", "list", "tuple", "set", "frozenset", "str", "int", "float", "bool", "complex",
             "bytes", "bytearray", "slice")
_NUMPY_SCALARS = ("float16", "float32", "float64", "longdouble", "int8", "int16", "int32", "int64",
                  "uint8", "uint16", "uint32", "uint64", "bool_", "complex64", "complex128", "str_", "bytes_")
_SKLEARN = {
    "sklearn.linear_model": (
        "LogisticRegression", "LogisticRegressionCV", "SGDClassifier", "SGDRegressor", "Ridge", "RidgeCV",
        "RidgeClassifier", "RidgeClassifierCV", "LinearRegression", "Lasso", "LassoCV", "ElasticNet",
        "ElasticNetCV", "Perceptron", "PassiveAggressiveClassifier", "PassiveAggressiveRegressor",
        "BayesianRidge", "HuberRegressor",
    ),
    # SGD's loss objects are part of a fitted SGD model's state.
    "sklearn.linear_model._sgd_fast": (
        "Hinge", "Log", "ModifiedHuber", "SquaredHinge", "SquaredLoss", "Huber", "EpsilonInsensitive",
        "SquaredEpsilonInsensitive",
    ),
    "sklearn.svm": ("LinearSVC", "LinearSVR"),
    "sklearn.naive_bayes": ("GaussianNB", "BernoulliNB", "MultinomialNB"),
    "sklearn.discriminant_analysis": ("LinearDiscriminantAnalysis",),
    "sklearn.dummy": ("DummyClassifier", "DummyRegressor"),
    "sklearn.pipeline": ("Pipeline", "FeatureUnion"),
    "sklearn.preprocessing": (
        "StandardScaler", "MinMaxScaler", "MaxAbsScaler", "RobustScaler", "Normalizer", "LabelEncoder",
        "PolynomialFeatures", "LabelBinarizer",
    ),
    # A multilabel classifier's set models: one binary model per label, constant where a label is.
    "sklearn.multiclass": ("OneVsRestClassifier", "_ConstantPredictor"),
}

# Bounds a payload must keep before anything in it is inflated or rebuilt. polydom writes members
# uncompressed (skops' default), so a payload declaring far more bytes than it holds is a bomb; a
# schema or a nesting depth beyond these is no model polydom wrote.
_MAX_INFLATION = 8
_INFLATION_ALLOWANCE = 1 << 20
_MAX_SCHEMA_BYTES = 64 << 20
_MAX_MEMBERS = 1 << 16
_MAX_DEPTH = 100
_NPY_HEADER_BYTES = 1 << 16
_SKLEARN_PARTS = ("sklearn.linear_model._sgd_fast",)

_default_trusted: frozenset[str] | None = None
_default_estimators: frozenset[str] = frozenset()


def _type_name(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


def default_trusted_types() -> frozenset[str]:
    """polydom's trusted list as fully qualified names, the way skops spells them.

    Resolved from the installed numpy and scikit-learn on first use (so the names follow their
    private module paths across versions); names a version lacks are skipped. Imports
    scikit-learn: call it only when a model is being loaded.
    """
    global _default_trusted, _default_estimators
    if _default_trusted is None:
        import numpy as np

        names = {f"builtins.{n}" for n in _BUILTINS}
        names.update(_type_name(getattr(np, n)) for n in _NUMPY_SCALARS if hasattr(np, n))
        names.update({_type_name(np.ndarray), _type_name(np.dtype), _type_name(np.random.RandomState)})
        estimators = set()
        for module_name, attrs in _SKLEARN.items():
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
            found = {_type_name(getattr(module, a)) for a in attrs if isinstance(getattr(module, a, None), type)}
            names.update(found)
            if module_name not in _SKLEARN_PARTS:
                estimators.update(found)
        _default_estimators = frozenset(estimators)
        _default_trusted = frozenset(names)
    return _default_trusted


def normalize_trusted(trusted) -> frozenset[str]:
    """The caller's extra trusted types as names; ``None`` means none.

    Parameters
    ----------
    trusted : iterable of str or type, or None
        Fully qualified names (as :class:`UntrustedModelError` reports them) or the types themselves.

    Raises
    ------
    TypeError
        ``trusted`` is a bare string, ``True``, or holds something other than a name or a type.
    """
    if trusted is None:
        return frozenset()
    if isinstance(trusted, (str, bytes, bool)) or not isinstance(trusted, Iterable):
        raise TypeError(f"trusted must be a list of type names or types, got {trusted!r}")
    out = set()
    for t in trusted:
        if isinstance(t, str) and t:
            out.add(t)
        elif isinstance(t, type):
            out.add(_type_name(t))
        else:
            raise TypeError(f"trusted must hold fully qualified type names or types, got {t!r}")
    return frozenset(out)


def digest(payload: bytes) -> bytes:
    """SHA-256 of a payload (32 bytes)."""
    return hashlib.sha256(payload).digest()


def _refuse(what: str, why: str):
    raise ModelIntegrityError(f"{what}: {why}; refusing to load it")


def _members(archive: zipfile.ZipFile, size: int, what: str) -> dict:
    """Each member's declared size, after bounding their count and total before any is inflated."""
    infos = archive.infolist()
    if len(infos) > _MAX_MEMBERS:
        _refuse(what, f"the payload has {len(infos)} members")
    sizes = {info.filename: info.file_size for info in infos}
    declared, limit = sum(info.file_size for info in infos), _inflation_limit(size)
    if declared > limit:
        _refuse(what, f"the payload's {size} bytes would inflate to {declared} (at most {limit} allowed)")
    return sizes


def _inflation_limit(size: int) -> int:
    return _MAX_INFLATION * size + _INFLATION_ALLOWANCE


def _read_schema(archive: zipfile.ZipFile, sizes: dict, what: str):
    if "schema.json" not in sizes:
        _refuse(what, "not a skops payload (no schema.json)")
    if sizes["schema.json"] > _MAX_SCHEMA_BYTES:
        _refuse(what, f"its schema declares {sizes['schema.json']} bytes (at most {_MAX_SCHEMA_BYTES})")
    try:
        return json.loads(archive.read("schema.json"))
    except RecursionError:
        _refuse(what, "its schema is nested too deeply")


def _walk_schema(schema, sizes: dict, limit: int, what: str) -> tuple[set[str], list[str]]:
    """Every ``module.name`` the schema names and every member it reads, checking as it goes.

    Iterative, so no nesting can exhaust the stack here; a schema nested deeper than skops can
    rebuild is refused. A member is inflated once per reference, so the referenced bytes are
    bounded too.
    """
    found: set[str] = set()
    arrays: list[str] = []
    referenced = 0
    stack = [(schema, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > _MAX_DEPTH:
            _refuse(what, f"its schema is nested deeper than {_MAX_DEPTH} levels")
        if isinstance(node, dict):
            module, name = node.get("__module__"), node.get("__class__")
            if isinstance(module, str) and isinstance(name, str):
                found.add(f"{module}.{name}")
                # skops calls the type with the stored arguments; polydom's payloads never do this
                # for a builtin or numpy type, and bytes(n) or ndarray(shape) would allocate at will.
                if node.get("__loader__") == "ConstructorFromReduceNode" and module.split(".")[0] in ("builtins", "numpy"):
                    _refuse(what, f"it builds {module}.{name} from constructor arguments")
            member = node.get("file")
            if member is not None:
                if not isinstance(member, str) or member not in sizes:
                    _refuse(what, f"its schema refers to a missing member {member!r}")
                referenced += sizes[member]
                if referenced > limit:
                    _refuse(what, f"its schema reads more than {limit} bytes of members")
                if node.get("__loader__") == "NdArrayNode":
                    arrays.append(member)
            stack.extend((child, depth + 1) for child in node.values() if isinstance(child, (dict, list)))
        elif isinstance(node, list):
            stack.extend((child, depth + 1) for child in node if isinstance(child, (dict, list)))
    return found, arrays


def _check_array(archive: zipfile.ZipFile, member: str, size: int, what: str) -> None:
    """A stored array's header must describe exactly the bytes that follow it.

    numpy allocates the whole array its header declares before reading the data, so a header
    claiming a larger shape than the member holds is refused here, before numpy sees it.
    """
    import numpy as np

    try:
        with archive.open(member) as fh:
            head = io.BytesIO(fh.read(min(size, _NPY_HEADER_BYTES)))
        version = np.lib.format.read_magic(head)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(head)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(head)
    except Exception as exc:  # numpy's header parser raises ValueError, SyntaxError, TypeError, ...
        _refuse(what, f"array {member!r} has no readable header ({exc!r})")
    if dtype.hasobject:
        _refuse(what, f"array {member!r} holds Python objects")
    expected = head.tell() + math.prod(shape) * dtype.itemsize
    if expected != size:
        _refuse(what, f"array {member!r} declares shape {shape} of {dtype} ({expected} bytes) in {size} bytes")


def _inspect(payload: bytes, what: str, *, arrays: bool) -> tuple[str | None, set[str]]:
    """``(top-level type, every name)`` of a payload, its sizes bounded; constructs nothing."""
    try:
        with zipfile.ZipFile(io.BytesIO(payload)) as archive:
            sizes = _members(archive, len(payload), what)
            schema = _read_schema(archive, sizes, what)
            found, stored_arrays = _walk_schema(schema, sizes, _inflation_limit(len(payload)), what)
            if arrays:
                for member in dict.fromkeys(stored_arrays):
                    _check_array(archive, member, sizes[member], what)
    except ModelIntegrityError:
        raise
    except Exception as exc:  # zipfile and its decompressors raise many kinds for a damaged archive
        raise ModelIntegrityError(f"{what}: not a readable skops payload: {exc!r}") from None
    top = None
    if isinstance(schema, dict) and isinstance(schema.get("__module__"), str) and isinstance(schema.get("__class__"), str):
        top = f"{schema['__module__']}.{schema['__class__']}"
    return top, found


def payload_types(payload: bytes) -> set[str]:
    """Every ``module.name`` a skops payload's schema refers to -- types and functions alike.

    Reads ``schema.json`` as JSON and walks it; imports and constructs nothing.

    Raises
    ------
    ModelIntegrityError
        The payload is not a skops zip with a readable schema, or exceeds the bounds above.
    """
    return _inspect(payload, "a model payload", arrays=False)[1]


def estimator_types() -> frozenset[str]:
    """The types polydom accepts as a stored model itself (the object a payload rebuilds):
    the scikit-learn estimators of its trusted list. Imports scikit-learn."""
    default_trusted_types()
    return _default_estimators


def check_trusted(payload: bytes, trusted_extra: frozenset[str], what: str, *, saving: bool = False) -> set[str]:
    """Refuse a payload that names untrusted types or whose object is not a trusted estimator.

    Returns the names the payload uses (all trusted). When loading (``saving`` False) every
    stored array's header is checked against its size too.

    Raises
    ------
    UntrustedModelError
        Naming the types to trust; the hint says where to pass them (``save`` or ``load``).
    ModelIntegrityError
        The payload is unreadable or exceeds polydom's bounds.
    """
    top, named = _inspect(payload, what, arrays=not saving)
    if top is None:
        _refuse(what, "its schema names no type")
    untrusted = named - default_trusted_types() - trusted_extra
    estimator = top in estimator_types() or top in trusted_extra
    if not estimator:
        untrusted.add(top)
    if not untrusted:
        return named
    kind = f"uses untrusted types {sorted(untrusted)}"
    if not estimator:
        kind += f" (it is a {top}, not one of the trusted estimators)"
    if saving:
        hint = (
            "a loaded index would refuse it. If you trust these types, pass them to save(path, trusted=[...]) "
            "and to polydom.load(path, trusted=[...])"
        )
    else:
        hint = "nothing was loaded. If you trust the source of this index, pass them to polydom.load(path, trusted=[...])"
    raise UntrustedModelError(f"{what} {kind}; {hint}", untrusted)


def encode_model(model, what: str) -> bytes:
    """``model`` as a skops payload.

    Raises
    ------
    UnsupportedModelError
        skops cannot serialize it, or the payload refers to something that cannot be imported
        back by name (a lambda, a function or class defined inside a function).
    """
    import skops.io

    try:
        payload = skops.io.dumps(model)
    except Exception as exc:  # skops raises TypeError, AttributeError, ... depending on the object
        raise UnsupportedModelError(
            f"{what} ({type(model).__module__}.{type(model).__qualname__}) cannot be stored with skops: {exc}"
        ) from exc
    unloadable = sorted(n for n in payload_types(payload) if "<" in n)
    if unloadable:
        raise UnsupportedModelError(
            f"{what} ({type(model).__qualname__}) refers to {unloadable}, which cannot be loaded back "
            f"by name; use module-level functions and classes"
        )
    return payload


def decode_model(payload: bytes, expected_digest: bytes | None, trusted_extra: frozenset[str], what: str):
    """The model in ``payload``, after the checksum, the bounds and both type gates (module docstring).

    Raises
    ------
    ModelIntegrityError
        Missing or mismatching checksum, an unreadable payload, or one exceeding polydom's bounds.
    UntrustedModelError
        A type or function outside polydom's list and ``trusted_extra``, or an object that is not
        a trusted estimator.
    """
    if expected_digest is None or digest(payload) != bytes(expected_digest):
        raise ModelIntegrityError(
            f"{what}: the payload's SHA-256 does not match the stored checksum (corrupted or tampered with); "
            f"refusing to load it"
        )
    named = check_trusted(payload, trusted_extra, what)
    import skops.io
    from skops.io.exceptions import UntrustedTypesFoundException

    try:
        model = skops.io.loads(payload, trusted=sorted(named))
    except UntrustedTypesFoundException as exc:
        raise UntrustedModelError(f"{what}: skops refused the payload: {exc}") from None
    except RecursionError:
        raise ModelIntegrityError(f"{what}: the payload is nested too deeply to rebuild") from None
    except Exception as exc:
        raise ModelIntegrityError(f"{what}: skops could not rebuild the model: {exc}") from exc
    name = _type_name(type(model))
    if name not in estimator_types() and name not in trusted_extra:
        raise UntrustedModelError(f"{what} rebuilt a {name}, not a trusted estimator; refusing it", [name])
    return model
