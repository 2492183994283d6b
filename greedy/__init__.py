"""polydom's Greedy backend (Greedy, GreedyAcc, GreedyCost). Internal; users import from :mod:`polydom`."""

__polydom_package__ = "greedy"
