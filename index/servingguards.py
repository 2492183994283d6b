"""Cost guards learned from the serving clock.

An index's guards (:meth:`CostSensitiveIndex.cost_guards`) come from calls measured at fit time.
A request meets the machine as it is now: on the demo, the median held-out call of a cheap
feature at the smallest size took 1.2 to 1.65 times its curve where the fit-time sample said
1.1 to 1.2, and a guard taken then let such features start at the edge of a budget they then
overran. Every anytime walk measures each feature it computes, so serving can keep the guard
itself: per feature and size band, the ``quantile`` of measured / predicted time over the last
``window`` calls.

Until a feature has ``min_calls`` calls in a band, the ratios of *every* feature served in that
band stand in for its own, once there are ``pool_min_calls`` of them: the guard is the larger of
the index's guard and that pooled quantile. The machine's slowdown is shared by the features: on
the demo's Fashion-MNIST run the learned guards at 28x28 were 1.3 to 1.6 times the fit's for
every one of the eight features, and waiting for each feature's own calls let each new feature a
walk reached overrun its first ones in turn (4-6% of a cell's answers at the first budget that
computes features). Bands do not borrow from each other: the smallest items run furthest above
their curves (per-call overhead), and a pool of all sizes, filled first by the small items of
the tightest budgets, refused features that fit at larger sizes (on one digits run, 4% of the
158x158 answers at 0.5 ms got no feature).

*One call alone* does not set a guard: a learned guard is the window's quantile, capped at its
second largest ratio. A request path has rare calls far above any curve -- the process paused,
a cache went cold -- and with few calls a high quantile sits at the largest. Served for real on
the demo's Fashion-MNIST index, one thumbnail call at 447 times its curve made that band's
guard 157 after 66 calls, and one first call at 9 times made the band's pooled guard 7.75 for
every feature; a guard that refuses a feature also stops learning from it, so each stayed for
the rest of the run, and a third of the answers at 0.5 ms computed nothing. On a full window
the cap changes nothing at the default quantile (the 0.99 quantile of 256 ratios lies below the
second largest; so does any quantile up to 254/255); a quantile of 1 asks for the largest and
is not capped, and with ``min_calls`` or ``pool_min_calls`` of 1 a single call still sets a guard.

*Probing.* A guard that refuses a feature also stops learning from it: the walks that would measure
it no longer start it. A service that serves one budget would keep, for good, the guard it learned
during a slow minute. So once ``forget_after`` walks in a band computed a feature no more, and its
learned guard is above the index's at the size being served, the band *probes* it: until one call
is measured, its guard there is the lower of the index's and its own (the pool's left out). A
learned guard at or below the index's needs no probe -- it is not what stopped the feature -- and
is left alone. If the probe's call ran below the learned guard, and that guard is above the index's
at the call's size, the machine has changed: the band forgets the feature's record and learns it
anew from that call on, its guard meanwhile no higher than the one it forgot (the pool, or the
index's guard at another size of the band, would otherwise stand in, and may be higher). Otherwise
the record stays and the next probe comes ``forget_after`` walks later, so a feature that stays
slow costs one overrun per probe, not one per pool window. So a probe never raises a guard. Before
it did: on demo run zd3, served twice over its held-out grid, a probe of the thumbnail's record
(learned below the fit's guard at 89x89, idle while the budgets were too tight for any feature)
made the second pass compute nothing at 89x89 and 0.2 ms, where the first had learned that the
thumbnail fits. The pool is probed whatever its guard, by the next call of any feature, and
forgotten without a ceiling. Probes count walks, not seconds, so a replay decides exactly as it did
when it was recorded. (The walk counter is read and raised without the lock: a lost increment under
contention only delays a probe.) Two slow calls among a window's first hundred are enough to set a
guard at the second of them (the cap above stops only one), so the probe comes after 256 walks:
replayed on ten demo runs (``benchmarks/probe_interval.py``), probing after 256 rather than 1024
walks changed on-time accuracy over cells by +0.000 to +0.027 per run (the most in the run whose
recorded times held such a pair), lowered it in none, and raised the worst cell's late answers by
at most 0.4 points (in one run from 2.2% to 2.6%, with cells above 2% from 1 to 3); that replay
serves one learning pass, which the rule above for guards learned below the index's changed little
(on the eight demo runs of ``benchmarks/results/seeds-*-monotone.md``, 27 answers of one run's
27,500).

Invariant (checked by :meth:`ServingGuards.check`): every learned guard is >= 1 and was computed
from at least ``min_calls`` and at most ``window`` recorded ratios of its feature and band, or
from at least ``pool_min_calls`` of its band; only learned records are probed; a forgotten
feature record's ceiling (>= 1) lasts until it learns again.
"""

from __future__ import annotations

import math
import threading
from collections import deque

import numpy as np

__all__ = ["ServingGuards", "upper_quantile"]


def upper_quantile(ratios, quantile: float) -> float:
    """The ``quantile`` of ``ratios``, but never above the second largest: one call alone does
    not set a guard (the module docstring, *one call alone*)."""
    values = np.sort(np.fromiter(ratios, float))
    guard = float(np.quantile(values, quantile))
    if quantile >= 1.0 or len(values) < 2:  # the maximum was asked for, or is all there is
        return guard
    return min(guard, float(values[-2]))


#: Walks in a band between two looks for records to probe (a look scans the band's records).
_PROBE_CHECK = 64


class ServingGuards:
    """Guards that follow the measured times of the features a walk computes.

    Parameters
    ----------
    index : CostSensitiveIndex
        Whose ``cost_guards(size)`` stand where too few calls were seen.
    quantile : float, default 0.99
        The share of recent calls a guarded start covers.
    window : int, default 256
        Recent calls kept per feature and size band.
    min_calls : int, default 50
        Calls of a feature a band needs before their guard replaces the index's.
    pool_min_calls : int, default 20
        Calls of any features a band needs before their pooled guard may raise the index's
        (few calls put a high quantile at their largest ratio: a cautious start).
    refresh : int, default 16
        A band's guard is recomputed every ``refresh`` calls (a quantile per request would cost
        more than a cheap feature).
    forget_after : int or None, default 256
        Walks in a band (calls of :meth:`guards`) without a call of a feature, after which the
        band probes that feature's learned guard (the module docstring, *probing*); None never
        probes.

    Notes
    -----
    A size band is half an octave of the item size ``n``: sizes within a factor of about 1.4 of
    each other share their guards. Safe to share between threads (one lock around the record).
    Records are keyed ``(feature, band)``, and ``(None, band)`` for the band's pool.
    """

    def __init__(self, index, *, quantile: float = 0.99, window: int = 256, min_calls: int = 50,
                 pool_min_calls: int = 20, refresh: int = 16, forget_after: int | None = 256):
        if not 0.5 <= quantile <= 1.0:
            raise ValueError(f"quantile must lie in [0.5, 1], got {quantile!r}")
        if not 1 <= min_calls <= window or not 1 <= pool_min_calls <= window:
            raise ValueError(f"need 1 <= min_calls, pool_min_calls <= window, got min_calls={min_calls!r}, "
                             f"pool_min_calls={pool_min_calls!r}, window={window!r}")
        if forget_after is not None and not (float(forget_after).is_integer() and forget_after >= 1):
            raise ValueError(f"forget_after must be a positive whole number of walks or None, got {forget_after!r}")
        self.index = index
        self.quantile = float(quantile)
        self.window = int(window)
        self.min_calls = int(min_calls)
        self.pool_min_calls = int(pool_min_calls)
        self.refresh = max(1, int(refresh))
        self.forget_after = None if forget_after is None else int(forget_after)
        self._walks: dict[int, int] = {}  # per band: calls of guards()
        self._last: dict[tuple, int] = {}  # per record: its band's walk count at its last call
        self._probing: set = set()  # records whose next call decides whether they are forgotten
        self._ceiling: dict[tuple[int, int], float] = {}  # a forgotten record's guard, until it learns again
        self._ratios: dict[tuple[int, int], deque] = {}
        self._learned: dict[tuple[int, int], float] = {}
        self._calls: dict[tuple[int, int], int] = {}
        self._lock = threading.Lock()

    @staticmethod
    def band(size: float) -> int:
        """The half-octave of ``size`` its guards belong to."""
        return int(round(2.0 * math.log2(max(float(size), 1.0))))

    def guards(self, size: float) -> tuple[float, ...]:
        """Per feature, in index order: the learned guard of ``size``'s band where there is one,
        else the index's guard at ``size``, raised to the band's pooled guard where that is larger."""
        base = self.index.cost_guards(size)
        if not self._learned and not self._ceiling:
            return base
        band = self.band(size)
        if self.forget_after is not None:
            walks = self._walks[band] = self._walks.get(band, 0) + 1
            if walks % _PROBE_CHECK == 0:
                self._probe_idle(band, walks, base)
        learned = self._learned
        probing = self._probing
        pooled = learned.get((None, band))
        if probing or self._ceiling:
            if (None, band) in probing:
                pooled = None
            if self._ceiling or any((i, band) in probing for i in range(len(base))):
                return tuple(self._guard_while_probing((i, band), g, pooled) for i, g in enumerate(base))
        if pooled is None:
            return tuple(learned.get((i, band), g) for i, g in enumerate(base))
        # The pool mixes features with lighter and heavier tails: it only ever raises a guard.
        return tuple(learned.get((i, band), max(g, pooled)) for i, g in enumerate(base))

    def _guard_while_probing(self, key, base: float, pooled: float | None) -> float:
        """One feature's guard where the band probes or a record was forgotten (the module
        docstring, *probing*): a probe or a fresh start never raises a guard."""
        learned = self._learned.get(key)
        if key in self._probing:
            return base if learned is None else min(base, learned)
        if learned is not None:
            return learned
        guard = base if pooled is None else max(base, pooled)
        ceiling = self._ceiling.get(key)
        return guard if ceiling is None else min(guard, ceiling)

    def seen(self, size: float) -> tuple[int, ...]:
        """Per feature, in index order: the calls recorded in ``size``'s band."""
        band = self.band(size)
        return tuple(self._calls.get((i, band), 0) for i in range(len(self.index.space)))

    def observe(self, feature: int, size: float, predicted: float, measured: float) -> None:
        """Record that feature ``feature`` (index order) took ``measured`` seconds at ``size``
        where its curve predicted ``predicted``."""
        if not (predicted > 0.0 and math.isfinite(measured) and measured >= 0.0):
            return
        key = (int(feature), self.band(size))
        # The index's guard matters only to a probe's call; a call that races the probe's start
        # is judged without it, as every probe was before.
        base = self.index.cost_guards(size)[key[0]] if key in self._probing else None
        with self._lock:
            self._record(key, measured / predicted, base)
            self._record((None, key[1]), measured / predicted, None)

    def _probe_idle(self, band: int, walks: int, base) -> None:
        """Probe the learned records of ``band`` whose feature no walk computed in the last
        ``forget_after`` walks there, and whose guard is above the index's ``base`` (the guards
        at the size being served; the pool: any)."""
        with self._lock:
            self._probing.update(key for key, last in self._last.items()
                                 if key[1] == band and key in self._learned and walks - last > self.forget_after
                                 and (key[0] is None or self._learned[key] > base[key[0]]))

    def _record(self, key, ratio: float, base: float | None) -> None:
        """Add one call's ``ratio`` to ``key``'s record; ``base``: the index's guard of the
        feature at the call's size when the record is probed (None: not known, or the pool)."""
        if key in self._probing:
            self._probing.discard(key)
            learned = self._learned.get(key, math.inf)
            # Faster than it learned: start afresh -- unless the learned guard is not above the
            # index's here, where it is not what held the feature back and its calls are kept.
            if ratio < learned and (base is None or learned > base):
                for table in (self._ratios, self._learned, self._calls):
                    table.pop(key, None)
                if key[0] is not None:
                    self._ceiling[key] = learned
        self._last[key] = self._walks.get(key[1], 0)
        ratios = self._ratios.get(key)
        if ratios is None:
            ratios = self._ratios[key] = deque(maxlen=self.window)
        ratios.append(ratio)
        calls = self._calls[key] = self._calls.get(key, 0) + 1
        least = self.min_calls if key[0] is not None else self.pool_min_calls
        if calls >= least and (calls - least) % self.refresh == 0:
            self._learned[key] = max(1.0, upper_quantile(ratios, self.quantile))
            self._ceiling.pop(key, None)

    def snapshot(self) -> "ServingGuards":
        """An independent copy of what was learned so far: two walks served from two snapshots
        start from the same guards and learn apart."""
        copy = ServingGuards(self.index, quantile=self.quantile, window=self.window, min_calls=self.min_calls,
                             pool_min_calls=self.pool_min_calls, refresh=self.refresh, forget_after=self.forget_after)
        with self._lock:
            copy._ratios = {key: deque(ratios, maxlen=self.window) for key, ratios in self._ratios.items()}
            copy._learned, copy._calls = dict(self._learned), dict(self._calls)
            copy._walks, copy._last, copy._probing = dict(self._walks), dict(self._last), set(self._probing)
            copy._ceiling = dict(self._ceiling)
        return copy

    def check(self) -> None:
        """Assert the module's invariant."""
        with self._lock:
            self._check()

    def _check(self) -> None:
        for key, guard in self._learned.items():
            assert guard >= 1.0, (key, guard)
            least = self.min_calls if key[0] is not None else self.pool_min_calls
            assert least <= len(self._ratios[key]) <= self.window, key
        assert set(self._last) == set(self._ratios) == set(self._calls), "every record knows when it was last called"
        assert self._probing <= set(self._learned), "only a learned guard is probed"
        assert not set(self._ceiling) & set(self._learned), "a ceiling lasts until its record learns again"
        assert all(c >= 1.0 and key[0] is not None for key, c in self._ceiling.items())
