"""Kinetic sweep over candidate cost curves (the paper's Algorithm 3, corrected); emits the
interesting points and the skyline valid after each.

The candidates are kept in a plain list ordered by cost just after the current size ``t``, with a
position map, and the next swap of every adjacent pair waits in a heap. Popping an event swaps the
pair; its verdict (did the skyline change?) comes from the tie-aware Theorem 3.13 of spec §6.4.
Three corrections of the paper's prose are needed for correctness (spec §6.2):

1. the swapped pair is re-queued, because polynomials of degree >= 2 can cross again;
2. events at the current size are accepted, because several curves can meet in one point;
3. events whose pair is no longer adjacent, or no longer out of order, are dropped lazily.

Crossings of a pair come from :class:`PairCrossings`, which finds the real roots of the pair's
difference for a whole row of pairs at once (numpy, closed forms up to degree 2) and keeps only
the roots where the sign really changes (tangencies are not swaps, trap T7). The order of two
curves at any size is read from that structure, never from re-evaluating nearly-equal costs, so
every decision about a pair is consistent with every other.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from polydom.index.costs.poly import RTOL, difference, effective_degree, exact_sign, horner, leading_sign, real_roots

from .errors import TheoremViolation  # noqa: F401 - defined with the package's errors

__all__ = ["PairCrossings", "SweepResult", "TheoremViolation", "check_against_brute_force", "sweep", "skyline_of"]


class PairCrossings:
    """Sign-change points of ``c_j - c_i`` for candidate pairs ``i < j`` on ``(lo, hi]``.

    Rows are computed on first use, one numpy pass per row ``i`` over every ``j > i``.

    Invariant: for a pair, ``sign0`` is the sign of ``c_j - c_i`` just after ``lo`` (0 only when
    the curves are identical to ``RTOL``), and the sign flips at each listed crossing and nowhere else.
    """

    def __init__(self, coefficients: np.ndarray, lo: float, hi: float):
        self.coef = np.asarray(coefficients, dtype=float)
        self.lo, self.hi = float(lo), float(hi)
        self._rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def _compute_row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        q = self.coef[i + 1 :]
        p = np.broadcast_to(self.coef[i], q.shape)
        m = len(q)
        d = difference(p, q)
        scale = np.abs(p) + np.abs(q)
        roots = real_roots(d, scale, self.lo, self.hi)
        D = roots.shape[1]
        # One sample point inside each interval between consecutive roots; the sign there is
        # exact (the difference's own coefficients, rational arithmetic where floats cannot
        # decide), so a large term shared by both curves can never drown their difference.
        starts = np.concatenate([np.full((m, 1), self.lo), roots], axis=1)
        ends = np.concatenate([roots, np.full((m, 1), np.nan)], axis=1)
        after = (starts + self.hi) / 2.0 if math.isfinite(self.hi) else starts + np.maximum(1.0, np.abs(starts))
        x = np.where(np.isnan(ends), after, (starts + ends) / 2.0)
        x = np.where(np.isnan(x), self.lo, x)
        valid = ~np.isnan(starts)
        signs = exact_sign(np.repeat(d, D + 1, axis=0), x.reshape(-1)).reshape(m, D + 1).astype(np.int64)
        signs = np.where(valid, signs, 0)
        distinct = effective_degree(d, scale) >= 0
        if not math.isfinite(self.hi):
            # Beyond the last root the sign is the leading coefficient's, exactly.
            last = valid.sum(axis=1) - 1
            rows = np.arange(m)
            signs[rows, last] = np.where(distinct, leading_sign(p, q), signs[rows, last])
        # A zero interval (equal to RTOL) keeps the sign around it: no swap happens there.
        filled = signs.copy()
        for c in range(1, D + 1):
            filled[:, c] = np.where(filled[:, c] == 0, filled[:, c - 1], filled[:, c])
        for c in range(D - 1, -1, -1):
            filled[:, c] = np.where(filled[:, c] == 0, filled[:, c + 1], filled[:, c])
        crossing = (filled[:, :-1] != filled[:, 1:]) & valid[:, 1:]
        cross = np.where(crossing, roots, np.nan)
        cross.sort(axis=1)
        sign0 = filled[:, 0].astype(np.int8)
        return cross, sign0

    def pair(self, i: int, j: int) -> tuple[list[float], int]:
        """``(crossings, sign0)`` for ``i < j``."""
        row = self._rows.get(i)
        if row is None:
            row = self._rows[i] = self._compute_row(i)
        cross, sign0 = row
        c = cross[j - i - 1]
        return [x for x in c.tolist() if x == x], int(sign0[j - i - 1])

    def next_swap(self, lower: int, upper: int, t: float) -> float | None:
        """Earliest size ``>= t`` at which ``lower`` costs more than ``upper``; None if never."""
        if lower < upper:
            cross, s = self.pair(lower, upper)
        else:
            cross, s = self.pair(upper, lower)
            s = -s
        if s == 0:
            return None
        passed = bisect_right(cross, t)
        current = s if passed % 2 == 0 else -s
        if current < 0:
            return t
        return cross[passed] if passed < len(cross) else None


def skyline_of(order: list[int], accuracy: list[float]) -> list[int]:
    """Curves of ``order`` (cost ascending) more accurate than every curve before them."""
    out, best = [], -math.inf
    for c in order:
        a = accuracy[c]
        if a > best:
            out.append(c)
            best = a
    return out


@dataclass
class SweepResult:
    """Output of :func:`sweep`.

    Attributes
    ----------
    bounds : list of float
        Ascending; ``bounds[0]`` is the domain's lower end.
    skylines : list of list of int
        ``skylines[r]`` holds candidate ids, cost ascending and accuracy strictly ascending,
        valid on ``[bounds[r], bounds[r+1])``.
    crossings : int
        Swaps processed.
    interesting_events : int
        Swaps that changed the skyline.
    """

    bounds: list[float] = field(default_factory=list)
    skylines: list[list[int]] = field(default_factory=list)
    crossings: int = 0
    interesting_events: int = 0


def _taylor_at(coef: np.ndarray, lo: float) -> np.ndarray:
    """Coefficients of ``c(lo + x)``: their lexicographic order is the cost order just after lo."""
    if lo == 0.0:
        return coef
    W = coef.shape[1]
    out = np.zeros_like(coef)
    for k in range(W):
        for m in range(k, W):
            out[:, k] += coef[:, m] * math.comb(m, k) * lo ** (m - k)
    return out


def initial_order(coef: np.ndarray, lo: float) -> list[int]:
    """Candidate ids by cost just after ``lo``; ties keep id order (ids are ranked best first)."""
    taylor = _taylor_at(coef, lo)
    keys = [tuple(row) + (i,) for i, row in enumerate(taylor.tolist())]
    return [k[-1] for k in sorted(keys)]


def sample_sizes(bounds: Sequence[float], hi: float) -> list[float]:
    """Every interesting point, a point between each two, and one beyond the last."""
    points = [float(b) for b in bounds]
    between = [(a + b) / 2.0 for a, b in zip(points, points[1:])]
    last = points[-1]
    beyond = (last + hi) / 2.0 if math.isfinite(hi) else last + max(1.0, abs(last))
    return sorted(points + between + [beyond])


def check_against_brute_force(
    result: SweepResult,
    candidate_coef: np.ndarray,
    candidate_accuracy: Sequence[float],
    all_coef: np.ndarray,
    all_accuracy: Sequence[float],
    domain: tuple[float, float],
    *,
    alpha: float = 1.0,
    rtol: float = 1e-9,
) -> None:
    """Raise :class:`TheoremViolation` unless the stored skylines answer every budget right.

    At every interesting point, between each two and beyond the last, every set of ``all_coef``
    (the brute force: all expanded sets, not only the candidates) must be matched by a stored
    skyline entry costing at most its cost (``rtol`` relative) with ``alpha`` times the accuracy
    at least its own; and the stored skyline must be sorted by cost with accuracy strictly rising.
    """
    all_coef = np.asarray(all_coef, dtype=float)
    all_acc = np.asarray(all_accuracy, dtype=float)
    cand_acc = np.asarray(candidate_accuracy, dtype=float)
    for x in sample_sizes(result.bounds, float(domain[1])):
        r = bisect_right(result.bounds, x) - 1
        sky = np.asarray(result.skylines[r], dtype=np.int64)
        sky_cost = horner(np.asarray(candidate_coef, dtype=float)[sky], np.full(len(sky), x))
        sky_acc = cand_acc[sky]
        if np.any(np.diff(sky_acc) <= 0) or np.any(np.diff(sky_cost) < -rtol * np.abs(sky_cost[1:])):
            raise TheoremViolation(f"at n={x!r}: stored skyline {sky.tolist()} is not sorted by cost and accuracy")
        costs = horner(all_coef, np.full(len(all_coef), x))
        # The best skyline accuracy affordable at each set's own cost (plus rounding slack).
        reach = np.searchsorted(sky_cost, costs * (1 + rtol) + 1e-300, side="right") - 1
        served = np.where(reach >= 0, sky_acc[np.maximum(reach, 0)], -np.inf)
        beaten = alpha * served < all_acc - 1e-15
        if beaten.any():
            s = int(np.nonzero(beaten)[0][0])
            raise TheoremViolation(
                f"at n={x!r}: a set costing {costs[s]!r} with accuracy {all_acc[s]!r} beats the stored "
                f"skyline, which serves {served[s]!r} at that cost"
            )


def sweep(
    coefficients: np.ndarray,
    accuracy: list[float],
    domain: tuple[float, float],
    *,
    index_all: bool = False,
    validate: bool = False,
) -> SweepResult:
    """Sweep the candidate curves across ``domain`` and record the skyline at interesting points.

    Parameters
    ----------
    coefficients : ndarray, shape (k, W)
        Candidate cost polynomials (lowest degree first), ids ``0..k-1`` in rank order.
    accuracy : list of float
        ``accuracy[id]``.
    domain : (lo, hi)
    index_all : bool, default False
        Store a skyline at every crossing (the PolyDomIndexAll baseline) instead of only at
        interesting points.
    validate : bool, default False
        Recompute the skyline at every event and raise :class:`TheoremViolation` if the
        theorem's verdict is wrong.

    Returns
    -------
    SweepResult

    Notes
    -----
    ``O((k + X) log k)`` for ``X`` crossings, plus ``O(k)`` per stored skyline.
    """
    lo, hi = float(domain[0]), float(domain[1])
    coef = np.asarray(coefficients, dtype=float)
    k = len(coef)
    pairs = PairCrossings(coef, lo, hi)
    order = initial_order(coef, lo) if k else []
    pos = {c: i for i, c in enumerate(order)}
    sky = skyline_of(order, accuracy)
    sky_pos = {c: i for i, c in enumerate(sky)}
    result = SweepResult(bounds=[lo], skylines=[list(sky)])

    heap: list[tuple[float, int, int, int]] = []
    seq = 0

    def push(i: int, t: float) -> None:
        nonlocal seq
        if 0 <= i < k - 1:
            t2 = pairs.next_swap(order[i], order[i + 1], t)
            if t2 is not None:
                seq += 1
                heapq.heappush(heap, (t2, seq, order[i], order[i + 1]))

    for i in range(k - 1):
        push(i, lo)

    # Each pair of polynomials of degree D crosses at most D times; anything beyond is a bug.
    limit = 10 + 2 * k * k * max(1, coef.shape[1] if k else 1)
    events = 0
    while heap:
        t, _, low, up = heapq.heappop(heap)
        q = pos[low]
        if pos[up] != q + 1 or pairs.next_swap(low, up, t) != t:
            continue
        events += 1
        if events > limit:
            raise RuntimeError("sweep did not terminate; inconsistent crossing structure")
        interesting = _is_interesting(low, up, sky_pos, sky, accuracy)
        order[q], order[q + 1] = up, low
        pos[up], pos[low] = q, q + 1
        result.crossings += 1
        if validate:
            after = skyline_of(order, accuracy)
            if (after != sky) != interesting:
                raise TheoremViolation(
                    f"at n={t!r}: swap of candidates {low} and {up} judged "
                    f"{'interesting' if interesting else 'not interesting'}, but the skyline "
                    f"{'did not change' if after == sky else 'changed'}"
                )
        if interesting:
            result.interesting_events += 1
            sky = skyline_of(order, accuracy)
            sky_pos = {c: i for i, c in enumerate(sky)}
        if interesting or index_all:
            last = result.bounds[-1]
            # Events computed from different pairs at one crossing differ by rounding only.
            if t - last <= RTOL * abs(t):
                result.skylines[-1] = list(sky)
            else:
                result.bounds.append(t)
                result.skylines.append(list(sky))
        push(q - 1, t)
        push(q, t)
        push(q + 1, t)
    return result


def _is_interesting(low: int, up: int, sky_pos: dict[int, int], sky: list[int], accuracy: list[float]) -> bool:
    """Tie-aware Theorem 3.13 on the pre-swap state; ``low`` is Curve 2, ``up`` is Curve 1."""
    i = sky_pos.get(low)
    if i is None:
        return False  # Scenarios 3 and 4: the cheaper-before curve is off the skyline.
    if up in sky_pos:
        return True  # Scenario 1.
    a_up, a_low = accuracy[up], accuracy[low]
    if a_up >= a_low:
        return True  # Scenario 2a; '>=' so an equally accurate curve that became cheaper replaces low.
    below = accuracy[sky[i - 1]] if i > 0 else -math.inf
    return below < a_up  # Scenario 2b, with the paper's alpha_2 corrected to alpha_1.
