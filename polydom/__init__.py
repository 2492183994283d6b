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

__version__ = "0.1.0"

_EXPORTS = {
    "build": ("polydom.api", "build"),
    "naive_expand_all": ("polydom.api", "naive_expand_all"),
    "CostCurve": ("polydom.index.costs.curve", "CostCurve"),
    "Choice": ("polydom.index.values", "Choice"),
    "Expansion": ("polydom.index.values", "Expansion"),
    "PolyDomIndex": ("polydom.index.skyline", "PolyDomIndex"),
    "Batch": ("polydom.index.skyline", "Batch"),
    "NaiveLookup": ("polydom.index.baselines", "NaiveLookup"),
    "PolyDomIndexAll": ("polydom.index.baselines", "PolyDomIndexAll"),
    "TheoremViolation": ("polydom.index.sweep", "TheoremViolation"),
    "make_synthetic": ("polydom.synthetic", "make_synthetic"),
    "SyntheticInstance": ("polydom.synthetic", "SyntheticInstance"),
    "audit_monotonicity": ("polydom.lattice.audit", "audit_monotonicity"),
    "lattice_graph": ("polydom.lattice.graph", "lattice_graph"),
    "PolydomError": ("polydom.errors", "PolydomError"),
    "PolydomWarning": ("polydom.errors", "PolydomWarning"),
    "Selection": ("polydom.classifier.policies", "Selection"),
    "Timing": ("polydom.classifier.policies", "Timing"),
    "Cascade": ("polydom.classifier.policies", "Cascade"),
    "Serving": ("polydom.classifier.policies", "Serving"),
    "ExpansionLimitError": ("polydom.errors", "ExpansionLimitError"),
    "ExpansionError": ("polydom.errors", "ExpansionError"),
    "fit_features": ("polydom.classifier.precomputed", "fit_features"),
    "FeatureFit": ("polydom.classifier.precomputed", "FeatureFit"),
    "ExpansionStore": ("polydom.cache", "ExpansionStore"),
    "CacheError": ("polydom.cache", "CacheError"),
    "build_progressive": ("polydom.progressive", "build_progressive"),
    "load": ("polydom.loading", "load"),
    "CostSensitiveClassifier": ("polydom.classifier.estimator", "CostSensitiveClassifier"),
    "StreamBudget": ("polydom.serving.stream", "StreamBudget"),
    "Explanation": ("polydom.classifier.estimator", "Explanation"),
    "ClassifierStateError": ("polydom.classifier.classifier_state", "ClassifierStateError"),
    "StoreError": ("polydom.index.store", "StoreError"),
    "IndexNotFoundError": ("polydom.index.store", "IndexNotFoundError"),
    "IndexFormatError": ("polydom.index.store", "IndexFormatError"),
    "IndexVersionError": ("polydom.index.store", "IndexVersionError"),
    "IndexWriteError": ("polydom.index.store", "IndexWriteError"),
    "UnsupportedModelError": ("polydom.index.store", "UnsupportedModelError"),
    "ModelLoadError": ("polydom.index.store", "ModelLoadError"),
    "ModelIntegrityError": ("polydom.index.store", "ModelIntegrityError"),
    "UntrustedModelError": ("polydom.index.store", "UntrustedModelError"),
    "feature": ("polydom.featurizers.registry", "feature"),
    "step": ("polydom.featurizers.registry", "step"),
    "keep_freed_memory": ("polydom.memory", "keep_freed_memory"),
    "FeatureSourceError": ("polydom.featurizers.provenance", "FeatureSourceError"),
    "ImageError": ("polydom.featurizers.errors", "ImageError"),
    "ImageTooLargeError": ("polydom.featurizers.errors", "ImageTooLargeError"),
    "InputError": ("polydom.errors", "InputError"),
    "QueryError": ("polydom.index.errors", "QueryError"),
    "pixel_limit": ("polydom.featurizers.sources", "pixel_limit"),
    "set_pixel_limit": ("polydom.featurizers.sources", "set_pixel_limit"),
    "load_digits_images": ("polydom.featurizers.datasets", "load_digits_images"),
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
