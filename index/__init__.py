"""polydom's index: cost curves, the candidate set, the intersection sweep, the two-level
skyline index with its lookup, and the paper's baselines.

An internal package of the ``polydom`` distribution; users import from :mod:`polydom`.
"""

from polydom.index.costs.curve import CostCurve, as_cost_curve, set_cost_matrix

from .baselines import NaiveLookup, PolyDomIndexAll
from .build import index_from_expanded
from .candidates import candidate_set, rank_key
from .skyline import Batch, IndexState, PolyDomIndex, check_queries, check_query
from .sweep import SweepResult, TheoremViolation, sweep
from .values import Choice, Expansion, check_accuracy, check_expansion

__all__ = [
    "CostCurve", "as_cost_curve", "set_cost_matrix", "candidate_set", "rank_key",
    "sweep", "SweepResult", "TheoremViolation", "PolyDomIndex", "IndexState", "Batch", "check_query", "check_queries",
    "NaiveLookup", "PolyDomIndexAll", "index_from_expanded", "Choice", "Expansion", "check_accuracy", "check_expansion",
]
