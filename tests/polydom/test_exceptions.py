"""One root for every failure and warning polydom defines, and a package that walks cleanly."""

import importlib
import inspect
import pkgutil

import pytest

from polydom import PolydomError, PolydomWarning


LAYERS = ("polydom.lattice", "polydom.index", "polydom.greedy", "polydom.featurizers")


def _modules():
    """Every module of the installed package (optional extras that are missing are skipped). The
    layers are walked from their own paths too: an editable install maps them from elsewhere."""
    names = set()
    for package in ("polydom", *LAYERS):
        path = importlib.import_module(package).__path__
        names.add(package)
        names.update(m.name for m in pkgutil.walk_packages(path, package + ".") if not m.name.endswith(".__main__"))
    out = []
    for name in sorted(names):
        try:
            out.append(importlib.import_module(name))
        except ImportError as exc:  # an optional dependency (dask, lightgbm) this environment lacks
            if "polydom" in str(exc):
                raise
    return out


def test_the_package_walks_without_recursion_and_holds_every_layer():
    names = {m.__name__ for m in _modules()}
    for layer in LAYERS:
        assert layer in names and any(name.startswith(layer + ".") for name in names)
    assert not any(name.startswith("polydom.benchmarks") for name in names)


def test_every_exception_derives_from_polydom_error_and_every_warning_from_polydom_warning():
    seen = []
    for module in _modules():
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__ or not issubclass(cls, BaseException):
                continue
            seen.append(cls)
            if issubclass(cls, Warning):
                assert issubclass(cls, PolydomWarning), cls
            else:
                assert issubclass(cls, PolydomError), cls
    names = {cls.__name__ for cls in seen}
    assert {"FeatureError", "UnknownFeatureError", "FeatureTimeout", "ExtrapolationWarning"} <= names


def test_the_roots_keep_the_builtin_bases_callers_catch():
    from polydom.featurizers import FeatureError, UnknownFeatureError, get_feature

    with pytest.raises(KeyError):
        get_feature("no such feature")
    with pytest.raises(PolydomError):
        get_feature("no such feature")
    assert issubclass(FeatureError, ValueError) and issubclass(UnknownFeatureError, ValueError)
    assert issubclass(PolydomWarning, UserWarning)
