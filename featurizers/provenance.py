"""Where a feature's code comes from, so that an index can name it and a fresh process can find it.

An index stores its features by name. A custom feature lives in the user's module, which a fresh
process has not imported. :class:`FeatureSource` records the module, the function's qualified
name and a digest of the module's source (the feature cache fingerprints code the same way,
:func:`source_digest`). :func:`load_features` turns saved sources back into features:

* names the registry knows already are taken from it;
* a missing one is imported from its module **only when the caller trusts that module by
  name**: an index file never decides what code runs;
* a feature from outside polydom whose module source no longer has the recorded digest is
  refused: its vectors would not be the ones the models were trained on.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from polydom.lattice.errors import PolydomError

from .registry import REGISTRY, STEPS, Feature, UnknownFeatureError

__all__ = ["FeatureSource", "FeatureSourceError", "source_of", "source_digest", "load_features"]

#: Modules whose features ship with polydom: found without being trusted, never digest-checked
#: (they change with polydom's version, which an index records).
_OWN = "polydom."


class FeatureSourceError(PolydomError, ValueError):
    """A saved feature's code cannot be used: its module is not trusted, cannot be imported, does
    not define it, or its source changed since the index was saved."""


def source_digest(function) -> str:
    """SHA-256 of the source of the module defining ``function`` (its helpers change results too);
    of the function's own code when the module has no source."""
    target = getattr(function, "func", function)  # functools.partial
    try:
        module = inspect.getmodule(target)
        source = inspect.getsource(module) if module is not None else inspect.getsource(target)
    except (OSError, TypeError):
        code = getattr(target, "__code__", None)
        source = repr(code.co_code if code is not None else target)
    return hashlib.sha256(source.encode()).hexdigest()


@dataclass(frozen=True)
class FeatureSource:
    """A feature's name and where its function is defined.

    Attributes
    ----------
    name : str
    module : str
        The function's ``__module__``.
    qualname : str
        The function's ``__qualname__``.
    digest : str
        :func:`source_digest` of the function when it was recorded.
    """

    name: str
    module: str
    qualname: str
    digest: str

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data) -> "FeatureSource":
        """From :meth:`to_json`; ``ValueError`` unless four strings."""
        fields = ("name", "module", "qualname", "digest")
        if not isinstance(data, dict) or sorted(data) != sorted(fields) or not all(
                isinstance(data[f], str) for f in fields):
            raise ValueError(f"a feature source is an object of four strings {fields}, got {data!r:.120}")
        return cls(**data)

    @property
    def builtin(self) -> bool:
        """Whether the feature ships with polydom."""
        return self.module.startswith(_OWN) or self.module == "polydom"


def source_of(feature: Feature) -> FeatureSource:
    """The :class:`FeatureSource` of ``feature`` as it is defined now."""
    function = getattr(feature.function, "func", feature.function)
    return FeatureSource(feature.name, getattr(function, "__module__", "") or "",
                         getattr(function, "__qualname__", "") or "", source_digest(feature.function))


def load_features(sources: Sequence[FeatureSource], trusted_modules: Iterable[str] = (),
                  steps: Iterable[str] = ()) -> list[Feature]:
    """The features ``sources`` name, in order, importing the modules in ``trusted_modules`` that
    define missing ones. The names in ``steps`` are :class:`~polydom.featurizers.Step` objects,
    looked up in ``STEPS`` (a custom one registered with ``@polydom.step``) under the same rules.

    Raises
    ------
    FeatureSourceError
        A feature is not registered and its module is not trusted (the message says how to trust
        it), cannot be imported, or does not register it; or a custom feature's module source
        changed since it was recorded.
    """
    trusted, steps = set(trusted_modules), set(steps)
    out = []
    for source in sources:
        kind, table = ("step", STEPS) if source.name in steps else ("feature", REGISTRY)
        if source.name not in table and not source.builtin:
            if source.module not in trusted:
                raise FeatureSourceError(
                    f"{kind} {source.name!r} is defined in module {source.module!r}, which this process has not "
                    f"imported; if you trust that module, pass feature_modules=[{source.module!r}] (CLI: "
                    f"--feature-modules {source.module})")
            try:
                importlib.import_module(source.module)
            except Exception as exc:  # the user's module: any failure is theirs, named here
                raise FeatureSourceError(f"{kind} {source.name!r}: importing module {source.module!r} failed: "
                                         f"{type(exc).__name__}: {exc}") from exc
        try:
            feature = table[source.name]
        except (KeyError, UnknownFeatureError):
            raise FeatureSourceError(f"{kind} {source.name!r}: module {source.module!r} does not register it "
                                     f"(decorate its function with @polydom.{kind})") from None
        if not source.builtin:
            now = source_of(feature)
            if (now.module, now.qualname) != (source.module, source.qualname):
                raise FeatureSourceError(
                    f"{kind} {source.name!r} is now {now.module}.{now.qualname}, not the "
                    f"{source.module}.{source.qualname} the index was trained with")
            if now.digest != source.digest:
                raise FeatureSourceError(
                    f"the source of module {source.module!r}, which defines {kind} {source.name!r}, changed since "
                    "the index was saved: its vectors may differ from the ones the models were trained on; "
                    "fit again (or restore that source)")
        out.append(feature)
    return out
