"""The paper's synthetic generator: random feature costs and a monotone accuracy combiner."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from polydom.index import CostCurve

__all__ = ["SyntheticInstance", "make_synthetic"]


@dataclass(frozen=True)
class SyntheticInstance:
    """A generated problem: ``costs`` to pass to :func:`polydom.build`, ``expand`` as its black box.

    Attributes
    ----------
    costs : dict of str to CostCurve
        ``c(f, n) = a0 + a1 n + a2 n**2`` per feature.
    single_accuracy : dict of str to float
        ``a({f})`` per feature.
    k : int or None
        The combiner ``cf_k``; ``None`` is ``cf_inf``.
    empty_accuracy : float
        ``a({})`` (0.5: a random guess on a balanced binary task).
    """

    costs: dict
    single_accuracy: dict
    k: int | None
    empty_accuracy: float = 0.5

    def expand(self, features: frozenset) -> float:
        """``a_k(F) = 1 - prod(1 - a({f}))`` over the ``k`` most accurate features of ``F``."""
        if not features:
            return self.empty_accuracy
        accs = sorted((self.single_accuracy[f] for f in features), reverse=True)
        if self.k is not None:
            accs = accs[: self.k]
        miss = 1.0
        for a in accs:
            miss *= 1.0 - a
        return 1.0 - miss

    __call__ = expand


def make_synthetic(n_features: int = 12, *, p: float = 0.6, k: int | None = 1, seed: int = 0) -> SyntheticInstance:
    """Generate an instance as the paper did.

    Per feature, in order: helpful with probability ``p`` (then ``a({f}) ~ U[0.7, 0.8]``, else
    ``U[0.5, 0.6]``); then ``a0 ~ U[0, 100]``, ``a1 ~ U[0, (100 - a0)/10]``,
    ``a2 ~ U[0, (100 - a0 - a1)/4]``.

    Parameters
    ----------
    n_features : int, default 12
    p : float, default 0.6
        Probability that a feature is helpful.
    k : int or None, default 1
        ``1`` is the paper's ``cf_1`` (a set is as good as its best feature); ``None`` (or
        ``math.inf``) is ``cf_inf`` (every feature helps).
    seed : int, default 0
        Seed of a private :class:`random.Random`.

    Examples
    --------
    >>> inst = make_synthetic(4, k=None, seed=1)
    >>> sorted(inst.costs)
    ['f01', 'f02', 'f03', 'f04']
    >>> inst.expand(frozenset()) == 0.5
    True
    """
    if not isinstance(n_features, int) or n_features < 1:
        raise ValueError(f"n_features must be a positive integer, got {n_features!r}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p!r}")
    if k is not None and k != math.inf and (not isinstance(k, int) or k < 1):
        raise ValueError(f"k must be a positive integer or None, got {k!r}")
    rng = random.Random(seed)
    width = len(str(n_features))
    costs, single = {}, {}
    for i in range(1, n_features + 1):
        name = f"f{i:0{max(2, width)}d}"
        helpful = rng.random() < p
        single[name] = rng.uniform(0.7, 0.8) if helpful else rng.uniform(0.5, 0.6)
        a0 = rng.uniform(0.0, 100.0)
        a1 = rng.uniform(0.0, (100.0 - a0) / 10.0)
        a2 = rng.uniform(0.0, (100.0 - a0 - a1) / 4.0)
        costs[name] = CostCurve([a0, a1, a2])
    return SyntheticInstance(costs=costs, single_accuracy=single, k=None if k in (None, math.inf) else k)
