"""The start rule's stake: whether starting a feature raises the expected on-time accuracy.

A late answer counts as wrong. Starting the next feature of the walk's target pays when the
chance ``p`` that it (and the rest of the target) finishes in the time left, times the target's
accuracy, beats what the walk serves if it stops now; a late-share budget charges a price for
the chance of lateness on top (:mod:`polydom.index.serving.lateness`). ``p`` comes from the serving
guards' own record where serving learned one, with the fit's chance as its prior, else the fit's
measured cost law (:func:`law_chance`), else a log-normal law through the guard. Why this rule:
``docs/decisions/start-rule.md``.
"""

from __future__ import annotations

import math
from bisect import bisect_right

from polydom.index.serving.walkprep import _NORMAL

__all__ = ["law_chance"]


class _Stake:
    """The start rule's second half: start a feature only if doing so raises the expected on-time
    accuracy of the answer (the module docstring, *what is at stake*).

    Starting the next feature of the target leads, if it and the rest of the target finish in the
    time left, to the target's accuracy; if it does not finish the answer is late, and a late
    answer counts as wrong. Not starting serves what is computed. So the walk starts when
    ``p * a(target) > a(served)``, ``p`` the chance that the feature finishes within the time
    left once the target's other uncomputed features are reserved at their predicted costs.
    ``p`` is the share of the feature's recent calls that would have fit (the serving guards' own
    record, preempted calls included) where serving has learned one, the fit's chance counted as
    the guards' ``prior_calls`` more calls; else the fit's measured law, else the fit's guard read as the guard
    quantile of a log-normal law of measured / predicted time with median 1.
    """

    __slots__ = ("index", "guards", "learned", "size", "z", "laws", "price")

    def __init__(self, index, guards, learned, size: float, price: float, laws, z: float):
        self.index = index
        self.guards = guards
        self.learned = learned
        self.size = size
        self.laws = laws
        self.price = price
        self.z = z  # the guard quantile's normal quantile, prepared with the index (walkprep)

    def chance(self, feature: int, ratio: float) -> float:
        """The chance that ``feature`` takes at most ``ratio`` times its predicted cost: the share
        of this process's recent calls that would have fit where serving learned one, with the
        fit's chance (:meth:`fit_chance`) as its prior; else the fit's chance alone."""
        fit = self.fit_chance(feature, ratio)
        if self.learned is not None:
            p = self.learned.finish_chance(feature, self.size, ratio, prior=fit)
            if p is not None:
                return p
        return fit

    def fit_chance(self, feature: int, ratio: float) -> float:
        """The chance the fit predicts: its measured cost law (:func:`law_chance`), else a
        log-normal law through the walk's guard."""
        if not ratio > 0.0:
            return 0.0
        law = self.laws[feature] if self.laws is not None else None
        if law is not None:
            return law_chance(law, ratio)
        guard = self.guards[feature]
        if guard <= 1.0:
            return 1.0 if ratio >= 1.0 else 0.0
        return _NORMAL.cdf(math.log(ratio) * self.z / math.log(guard))

    def pays(self, feature: int, pending, cost, remaining: float, target: int, served: int) -> bool:
        """Whether starting ``feature`` (the first of ``pending``, the target's uncomputed features)
        raises the expected on-time accuracy, with ``remaining`` seconds left."""
        trained = self.index.trained
        now = trained.get(served, 0.0)
        goal = trained.get(target, 0.0)
        if goal <= now:
            return True  # nothing to lose: the answer is what is computed either way
        own = cost[feature]
        if not own > 0.0:
            return True
        room = remaining - sum(map(cost.__getitem__, pending[1:]))
        # The relative slack keeps an exact fit (a clock that matches the curves) a fit.
        p = self.chance(feature, room / own * (1.0 + 1e-9))
        # A late answer is wrong, and a late-share budget prices it too (polydom.index.serving.lateness).
        return p * goal - self.price * (1.0 - p) > now

    def room_for(self, feature: int, pending, cost, target: int, served: int) -> float:
        """About the time left from which starting ``feature`` pays (:meth:`pays` flips there):
        ``-inf`` where it always pays. An estimate, from the chance's inverse; a trace checks it
        on the rule itself (:mod:`polydom.index.serving.walktrace`)."""
        trained = self.index.trained
        now, goal = trained.get(served, 0.0), trained.get(target, 0.0)
        own = cost[feature]
        if goal <= now or not own > 0.0:
            return -math.inf
        needed = (now + self.price) / (goal + self.price)  # the chance to finish that pays
        return sum(cost[i] for i in pending[1:]) + self.ratio_for(feature, needed) * own

    def ratio_for(self, feature: int, chance: float) -> float:
        """The ratio of measured to predicted time that a call stays within with ``chance``
        (the inverse of :meth:`chance` where serving learned nothing)."""
        law = self.laws[feature] if self.laws is not None else None
        if law is not None:
            last = len(law) - 1
            position = chance * last
            k = min(int(position), last - 1)
            return law[k] + (position - k) * (law[k + 1] - law[k])
        guard = self.guards[feature]
        if guard <= 1.0 or not 0.0 < chance < 1.0:
            return 1.0
        return math.exp(_NORMAL.inv_cdf(chance) * math.log(guard) / self.z)


def law_chance(law, ratio: float) -> float:
    """The chance that a call takes at most ``ratio`` times its predicted cost, by ``law`` (its
    quantiles at evenly spaced levels from 0 to 1), interpolated between two levels."""
    if ratio < law[0]:
        return 0.0
    last = len(law) - 1
    if ratio >= law[last]:
        return 1.0
    k = bisect_right(law, ratio)  # law[k - 1] <= ratio < law[k]
    low, high = law[k - 1], law[k]
    return (k - 1 + (ratio - low) / (high - low)) / last
