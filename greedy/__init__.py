"""polydom's Greedy backend (Greedy, GreedyAcc, GreedyCost). Internal; users import from :mod:`polydom`.

Greedy (the paper's Algorithm 4) builds one feature sequence per λ by adding the feature of best
``Δaccuracy - λ Δcost`` at one expansion size ``n0``, indexes the skyline of all recorded
prefixes by cost at ``n0``, and answers a query by walking the chosen λ's sequence while the
features still fit the budget at the item's size -- or, in measured mode, while the clock says so.
"""

from .build import build_greedy
from .expansion import GreedyExpansion, greedy_sequences
from .index import GreedyIndex
from .metrics import accuracy_vs_budget
from .options import DEFAULT_LAMBDAS, GREEDY_BACKENDS, check_n0, resolve_lambdas
from .skyline import SkylineEntry, prefix_masks, prefix_skyline


__all__ = [
    "build_greedy", "GreedyIndex", "GreedyExpansion", "greedy_sequences", "accuracy_vs_budget",
    "DEFAULT_LAMBDAS", "GREEDY_BACKENDS", "resolve_lambdas", "check_n0",
    "SkylineEntry", "prefix_masks", "prefix_skyline",
]
