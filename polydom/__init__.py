"""polydom: the most accurate model whose features fit a time budget, found in microseconds.

Given an item of size ``n`` and a budget ``c``, a polydom index returns the feature set (and its
model) with the highest accuracy among all sets whose summed cost at ``n`` is at most ``c`` --
an implementation of "Indexing Cost Sensitive Prediction" (Battle, Benson, Parameswaran, Wu).

Everything is exported lazily (PEP 562): serving an index imports neither scikit-learn nor sympy.

>>> import polydom
>>> costs = {"fast": [1.0], "slow": [0.0, 0.0, 0.5]}
>>> acc = {frozenset(): .5, frozenset({"fast"}): .7, frozenset({"slow"}): .8, frozenset({"fast", "slow"}): .85}
>>> index = polydom.build(costs, acc.__getitem__)
>>> sorted(index.lookup(size=2, budget=2.5).features)
['slow']
>>> sorted(index.lookup(size=2, budget=3).features)
['fast', 'slow']
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

__version__ = "0.1.0"

_INTERNAL = ("lattice", "index", "greedy", "featurizers")


def _verify_internal_packages() -> None:
    """Refuse to run on top of an unrelated distribution that shadows an internal package name."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for name in _INTERNAL:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            origin = module.__file__
        else:
            spec = importlib.util.find_spec(name)
            origin = spec.origin if spec is not None else None
        if origin is None:
            raise ImportError(f"polydom's internal package {name!r} is missing; reinstall polydom")
        package_dir = os.path.dirname(os.path.abspath(origin))
        marker_ok = False
        if os.path.dirname(package_dir) == here:
            try:
                with open(origin, encoding="utf-8") as fh:
                    marker_ok = f'__polydom_package__ = "{name}"' in fh.read()
            except OSError:
                marker_ok = False
        if not marker_ok:
            raise ImportError(
                f"the module {name!r} found at {origin} is not polydom's internal package {name!r} "
                f"(another installed distribution uses that name); uninstall it or use a separate "
                f"environment for polydom"
            )


_verify_internal_packages()

_EXPORTS = {
    "build": ("polydom.api", "build"),
    "naive_expand_all": ("polydom.api", "naive_expand_all"),
    "CostCurve": ("index.costcurve", "CostCurve"),
    "Choice": ("index.values", "Choice"),
    "Expansion": ("index.values", "Expansion"),
    "PolyDomIndex": ("index.skyline", "PolyDomIndex"),
    "Batch": ("index.skyline", "Batch"),
    "NaiveLookup": ("index.baselines", "NaiveLookup"),
    "PolyDomIndexAll": ("index.baselines", "PolyDomIndexAll"),
    "TheoremViolation": ("index.sweep", "TheoremViolation"),
    "make_synthetic": ("polydom.synthetic", "make_synthetic"),
    "SyntheticInstance": ("polydom.synthetic", "SyntheticInstance"),
    "audit_monotonicity": ("lattice.audit", "audit_monotonicity"),
    "lattice_graph": ("lattice.graph", "lattice_graph"),
    "PolydomError": ("polydom.errors", "PolydomError"),
    "ExpansionLimitError": ("polydom.expansion", "ExpansionLimitError"),
    "ExpansionStore": ("polydom.cache", "ExpansionStore"),
    "CacheError": ("polydom.cache", "CacheError"),
    "build_progressive": ("polydom.progressive", "build_progressive"),
    "load": ("polydom.loading", "load"),
    "CostSensitiveClassifier": ("polydom.estimator", "CostSensitiveClassifier"),
    "Explanation": ("polydom.estimator", "Explanation"),
    "StoreError": ("index.store", "StoreError"),
    "IndexNotFoundError": ("index.store", "IndexNotFoundError"),
    "IndexFormatError": ("index.store", "IndexFormatError"),
    "IndexVersionError": ("index.store", "IndexVersionError"),
    "IndexWriteError": ("index.store", "IndexWriteError"),
    "UnsupportedModelError": ("index.store", "UnsupportedModelError"),
    "ModelLoadError": ("index.store", "ModelLoadError"),
    "ModelIntegrityError": ("index.store", "ModelIntegrityError"),
    "UntrustedModelError": ("index.store", "UntrustedModelError"),
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    try:
        module_name, attr = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'polydom' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
