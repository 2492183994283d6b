"""Models to bytes and back with skops, never pickle: checksummed, and loaded only from trusted types.

A stored model is a skops.io payload (a zip holding ``schema.json`` plus array files) and its
SHA-256. Loading goes through three gates, in this order, and nothing in the payload is
constructed unless all three pass:

1. the SHA-256 of the payload equals the stored one (:class:`ModelIntegrityError` otherwise);
2. every type and function the payload's schema names is trusted -- polydom's own list
   (:func:`default_trusted_types`) plus whatever the caller added (:class:`UntrustedModelError`
   otherwise). The schema is read as plain JSON, so this check imports and runs nothing;
3. skops' own audit, run by :func:`skops.io.loads` with exactly the trusted names found.

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
import zipfile
from collections.abc import Iterable

from .errors import ModelIntegrityError, UnsupportedModelError, UntrustedModelError

__all__ = [
    "default_trusted_types", "normalize_trusted", "payload_types", "encode_model", "decode_model", "digest",
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
        "PolynomialFeatures",
    ),
}

_default_trusted: frozenset[str] | None = None


def _type_name(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


def default_trusted_types() -> frozenset[str]:
    """polydom's trusted list as fully qualified names, the way skops spells them.

    Resolved from the installed numpy and scikit-learn on first use (so the names follow their
    private module paths across versions); names a version lacks are skipped. Imports
    scikit-learn: call it only when a model is being loaded.
    """
    global _default_trusted
    if _default_trusted is None:
        import numpy as np

        names = {f"builtins.{n}" for n in _BUILTINS}
        names.update(_type_name(getattr(np, n)) for n in _NUMPY_SCALARS if hasattr(np, n))
        names.update({_type_name(np.ndarray), _type_name(np.dtype), _type_name(np.random.RandomState)})
        for module_name, attrs in _SKLEARN.items():
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
            names.update(_type_name(getattr(module, a)) for a in attrs if isinstance(getattr(module, a, None), type))
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


def payload_types(payload: bytes) -> set[str]:
    """Every ``module.name`` a skops payload's schema refers to -- types and functions alike.

    Reads ``schema.json`` as JSON and walks it; imports and constructs nothing.

    Raises
    ------
    ModelIntegrityError
        The payload is not a skops zip with a readable schema.
    """
    try:
        with zipfile.ZipFile(io.BytesIO(payload)) as archive:
            schema = json.loads(archive.read("schema.json"))
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise ModelIntegrityError(f"not a readable skops payload: {exc}") from None
    found: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            module, name = node.get("__module__"), node.get("__class__")
            if isinstance(module, str) and isinstance(name, str):
                found.add(f"{module}.{name}")
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


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
    """The model in ``payload``, after the checksum and both type gates (see the module docstring).

    Raises
    ------
    ModelIntegrityError
        Missing or mismatching checksum, or an unreadable payload.
    UntrustedModelError
        A type or function outside polydom's list and ``trusted_extra``.
    """
    if expected_digest is None or digest(payload) != bytes(expected_digest):
        raise ModelIntegrityError(
            f"{what}: the payload's SHA-256 does not match the stored checksum (corrupted or tampered with); "
            f"refusing to load it"
        )
    named = payload_types(payload)
    allowed = default_trusted_types() | trusted_extra
    untrusted = named - allowed
    if untrusted:
        raise UntrustedModelError(
            f"{what} uses untrusted types {sorted(untrusted)}; nothing was loaded. If you trust the source "
            f"of this index, pass them to polydom.load(path, trusted=[...])",
            untrusted,
        )
    import skops.io
    from skops.io.exceptions import UntrustedTypesFoundException

    try:
        return skops.io.loads(payload, trusted=sorted(named))
    except UntrustedTypesFoundException as exc:
        raise UntrustedModelError(f"{what}: skops refused the payload: {exc}") from None
    except Exception as exc:
        raise ModelIntegrityError(f"{what}: skops could not rebuild the model: {exc}") from exc
