"""polydom's lattice of feature subsets: bitmask feature sets, the bidirectional explorer with
sandwich and covering pruning, NaiveExpandAll, the monotonicity audit, the monotone fit of
scores and a networkx export.

An internal package of the ``polydom`` distribution; users import from :mod:`polydom`.
It knows accuracies only, never costs.
"""

from .audit import MonotonicityAudit, audit_monotonicity
from .explorer import SANDWICH_MODES, ExpansionCache, Exploration, explore, naive_expand_all
from .featureset import FeatureSpace, bits_of, canonical_key, popcount
from .graph import lattice_graph
from .monotone import monotone_scores


__all__ = [
    "FeatureSpace", "bits_of", "canonical_key", "popcount",
    "ExpansionCache", "Exploration", "explore", "naive_expand_all", "SANDWICH_MODES",
    "MonotonicityAudit", "audit_monotonicity", "lattice_graph", "monotone_scores",
]
