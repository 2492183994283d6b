"""Where a feature's code comes from, so that an index can name it and a fresh process can find it.

An index stores its features by name. A custom feature lives in the user's module, which a fresh
process has not imported. :class:`FeatureSource` records the module, the function's qualified
name and a digest of the module's source (the feature cache fingerprints code the same way,
:func:`source_digest`). :func:`load_features` turns saved sources back into features:

* names the registry knows already are taken from it;
* a missing one is imported from its module **only when the caller trusts that module by
  name**: an index file never decides what code runs. The module's file is read once, its digest
  compared with the record, and only those verified bytes are compiled and run (no cached
  bytecode, no second search of the path): a changed module runs nothing;
* a feature from outside polydom whose module source no longer has the recorded digest is
  refused: its vectors would not be the ones the models were trained on;
* a record that claims a polydom module is honoured only for a feature polydom defines there
  under that name, so a crafted record cannot hand a built-in name to code the process registered.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass


from .registry import REGISTRY, STEPS, Feature, UnknownFeatureError
from .errors import FeatureSourceError  # noqa: F401 - defined with the package's errors

__all__ = ["FeatureSource", "FeatureSourceError", "source_of", "source_digest", "load_features", "builtin_only",
           "normalize_modules"]

#: Modules whose features ship with polydom: found without being trusted, never digest-checked
#: (they change with polydom's version, which an index records).
_OWN = "polydom."


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


def _refuse_main(kind: str, name: str) -> FeatureSourceError:
    return FeatureSourceError(
        f"{kind} {name!r} is defined in __main__ (a script or notebook), which a fresh process cannot "
        "import: move it into a module of its own (for example myfeatures.py beside your script), "
        "import it from there, fit again and pass feature_modules=['myfeatures'] to load")


def _read_verified(spec, source: FeatureSource, kind: str) -> str:
    """The text of ``spec``'s source file, read once, when its digest is the recorded one."""
    if not isinstance(spec.loader, importlib.machinery.SourceFileLoader) or not spec.origin:
        raise FeatureSourceError(
            f"{kind} {source.name!r}: module {source.module!r} is not a Python source file "
            f"({spec.origin or 'no file'}); only source modules can be checked against the saved digest")
    try:
        with open(spec.origin, "rb") as file:
            text = importlib.util.decode_source(file.read())
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise FeatureSourceError(f"{kind} {source.name!r}: cannot read module {source.module!r} "
                                 f"({spec.origin}): {exc}") from None
    if hashlib.sha256(text.encode()).hexdigest() != source.digest:
        raise FeatureSourceError(
            f"the source of module {source.module!r}, which defines {kind} {source.name!r}, changed since the "
            f"index was saved ({spec.origin}): nothing of it was run; its vectors may differ from the ones "
            "the models were trained on; fit again (or restore that source)")
    return text


def _import_verified(source: FeatureSource, kind: str) -> None:
    """Import ``source.module`` from the bytes whose digest :func:`_read_verified` checked.

    A dotted module's parent packages are imported first, as Python imports them: trusting
    ``pkg.features`` trusts the package ``pkg`` it belongs to. Nothing of the module itself runs
    before its digest matches, and what runs is those bytes, compiled here: a ``__pycache__``
    file or another file found later on the path is never used."""
    name = source.module
    if name in sys.modules:
        return  # imported by the caller already: its features are checked against the record below
    parent, _, child = name.rpartition(".")
    try:
        if parent:
            importlib.import_module(parent)
        spec = importlib.util.find_spec(name)
    except Exception as exc:  # the user's package: any failure is theirs, named here
        raise FeatureSourceError(f"{kind} {source.name!r}: locating module {name!r} failed: "
                                 f"{type(exc).__name__}: {exc}") from exc
    if spec is None:
        raise FeatureSourceError(f"{kind} {source.name!r}: no module {name!r} on the import path")
    code = compile(_read_verified(spec, source, kind), spec.origin, "exec", dont_inherit=True)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except Exception as exc:  # the user's module: any failure is theirs, named here
        sys.modules.pop(name, None)
        raise FeatureSourceError(f"{kind} {source.name!r}: importing module {name!r} failed: "
                                 f"{type(exc).__name__}: {exc}") from exc
    if parent:
        setattr(sys.modules[parent], child, module)


def _check_builtin(feature, source: FeatureSource, kind: str) -> None:
    """Refuse a record that claims a polydom module unless polydom defines ``feature`` there."""
    if feature is None or not source_of_function(feature).startswith(_OWN) or \
            source_of_function(feature) != f"{source.module}:{source.qualname}":
        raise FeatureSourceError(
            f"the index records {kind} {source.name!r} as polydom's {source.module}.{source.qualname}, but "
            f"polydom defines no such {kind} there"
            + ("" if feature is None else f" (this process has {source_of_function(feature)})")
            + ": the record is damaged or was crafted; refit or restore the index")


def source_of_function(feature) -> str:
    """``module:qualname`` of a feature's or step's function."""
    function = getattr(feature.function, "func", feature.function)
    return f"{getattr(function, '__module__', '')}:{getattr(function, '__qualname__', '')}"


def builtin_only(features, what: str = "the index") -> list:
    """``features`` when every one is defined in polydom's own modules, for a record that names
    features without their sources (nothing can be checked for a custom one).

    Raises
    ------
    FeatureSourceError
        A feature is defined outside polydom."""
    for feature in features:
        if not source_of_function(feature).startswith(_OWN):
            raise FeatureSourceError(
                f"{what} records no source for feature {feature.name!r}, and this process defines it outside "
                f"polydom ({source_of_function(feature)}): only polydom's own features load without a "
                "recorded source; refit and save again")
    return list(features)


def _valid_module_name(name: str) -> bool:
    return bool(name) and all(part.isidentifier() for part in name.split("."))


def load_features(sources: Sequence[FeatureSource], trusted_modules: Iterable[str] = (),
                  steps: Iterable[str] = ()) -> list[Feature]:
    """The features ``sources`` name, in order, importing the modules in ``trusted_modules`` that
    define missing ones. The names in ``steps`` are :class:`~polydom.featurizers.Step` objects,
    looked up in ``STEPS`` (a custom one registered with ``@polydom.step``) under the same rules.

    A trusted module is imported from its file's bytes once their digest matches the record
    (:func:`_import_verified`); a record claiming a polydom module must name a feature polydom
    defines there (built-ins are not digest-checked: they change with polydom's version).

    Raises
    ------
    FeatureSourceError
        A feature is not registered and its module is not trusted (the message says how to trust
        it), cannot be found, changed, fails to import, or does not register it; a record claims a
        built-in polydom does not define; or a custom feature's source changed since it was recorded.
    """
    trusted_modules = normalize_modules(trusted_modules)
    trusted, steps = set(trusted_modules), set(steps)
    out = []
    for source in sources:
        kind, table = ("step", STEPS) if source.name in steps else ("feature", REGISTRY)
        if source.builtin:
            _check_builtin(table.get(source.name), source, kind)
            out.append(table[source.name])
            continue
        if source.module == "__main__":
            raise _refuse_main(kind, source.name)
        if not _valid_module_name(source.module):
            raise FeatureSourceError(f"{kind} {source.name!r}: the recorded module {source.module!r} is not a "
                                     "module name: the record is damaged or was crafted")
        if source.name not in table:
            if source.module not in trusted:
                raise FeatureSourceError(
                    f"{kind} {source.name!r} is defined in module {source.module!r}, which this process has not "
                    f"imported; if you trust that module, pass feature_modules=[{source.module!r}] (CLI: "
                    f"--feature-modules {source.module})")
            _import_verified(source, kind)
        try:
            feature = table[source.name]
        except (KeyError, UnknownFeatureError):
            raise FeatureSourceError(f"{kind} {source.name!r}: module {source.module!r} does not register it "
                                     f"(decorate its function with @polydom.{kind})") from None
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


def normalize_modules(modules) -> tuple[str, ...]:
    """``modules`` as a tuple of module names; a single name counts as one.

    Raises
    ------
    FeatureSourceError
        An entry is not a str."""
    if modules is None:
        return ()
    if isinstance(modules, str):
        modules = [modules]
    modules = tuple(modules)
    for name in modules:
        if not isinstance(name, str):
            raise FeatureSourceError(f"feature_modules holds module names (str), got {name!r:.80}")
    return modules
