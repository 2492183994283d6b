"""Cost guards learned from the serving clock.

An index's guards (:meth:`CostSensitiveIndex.cost_guards`) come from calls measured at fit time.
A request meets the machine as it is now. Every anytime walk measures each feature it computes,
so serving keeps the guard itself: per feature and size band, from the ratios measured /
predicted of the last ``window`` calls, the ``quantile`` those ratios' middle half predicts
(:func:`robust_guard`).

*Intrinsic cost and scheduling noise.* A call's wall time is the feature's own work plus
whatever the machine did meanwhile. Another process taking the core for a few milliseconds
lands on any call, however cheap, so a high quantile of a window's raw wall-clock ratios is a
preempted call.
Where the caller measures the computing thread's CPU time (serving does), the guard comes from
the CPU / predicted ratios -- the feature's own work, which preemption and time slicing do not
touch -- and the wall clock enters only through the chance to finish. Either way the guard comes
from the median and upper quartile, which a minority of slow calls (under a quarter) cannot move, with room (:data:`TAIL_ROOM`) for a tail heavier than the log-normal law's,
and never above the window's own quantile. A real slowdown moves the median, and the guard with
it. What preemption costs is left to the walk's stake (:mod:`polydom.index.serving.anytime`): the chance
to finish (:meth:`ServingGuards.finish_chance`) counts every call, preempted ones included.

Until a feature has ``min_calls`` calls in a band, the ratios of *every* feature served in that
band stand in for its own, once there are ``pool_min_calls`` of them: the guard is the larger of
the index's guard and that pooled guard, since the machine's slowdown is shared by the
features (why: ``docs/decisions/serving-guards.md``). Bands do not borrow from each other: the smallest
items run furthest above their curves (per-call overhead).

*One call alone* does not set a guard: a learned guard is the window's quantile, capped at its
second largest ratio. A request path has rare calls far above any curve -- the process paused,
a cache went cold -- and with few calls a high quantile sits at the largest; a guard that
refuses a feature also stops learning from it, so such a guard would stay
(why: ``docs/decisions/serving-guards.md``). On a full window the cap changes nothing at the default
quantile (the 0.99 quantile of 256 ratios lies below the second largest; so does any quantile up
to 254/255); a quantile of 1 asks for the largest and
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
slow costs one overrun per probe, not one per pool window. So a probe never raises a guard.
The pool is probed whatever its guard, by the next call of any feature, and forgotten without a
ceiling. Probes count walks, not seconds, so a replay decides exactly as it did
when it was recorded. (The walk counter is read and raised without the lock: a lost increment under
contention only delays a probe.) Two slow calls among a window's first hundred are enough to set a
guard at the second of them (the cap above stops only one), so the probe comes after
``forget_after`` walks, 256 by default (why: ``docs/decisions/serving-guards.md``).

*Stale chances.* Without a per-start cap the guard rarely stops a feature; the chance to finish
does (:mod:`polydom.index.serving.stake`), and a chance that refuses a feature also stops
learning from it. A slow spell would so freeze a low chance for good, whatever the guard. So once
``forget_after`` walks in a band computed a feature no more, its chance there is stale:
:meth:`ServingGuards.finish_chance` gives None and the fit's cost law decides again. If the next
call of the feature runs faster than the median of the calls its record holds, the machine has
changed: the band forgets the record and learns it anew, as after a probe. Otherwise the record
keeps the call and its chance decides until it is stale again.

*Few calls.* A band learns a chance from as few as ``min_calls`` calls, and machines run slow
in stretches: twenty calls in a row can all overrun a budget that a third of the calls meet. A
chance that refuses a feature stops learning from it, so an unlucky first stretch would decide
the band until its record went stale. Where the walk gives the chance its fit's cost law
predicts, :meth:`ServingGuards.finish_chance` weighs that prior as ``prior_calls`` calls
(``min_calls`` by default): a first record moves the chance halfway, a full window (256 calls) about 93% of the way
(why: ``docs/decisions/start-rule.md``, *a prior for few calls*).

Invariant (checked by :meth:`ServingGuards.check`): every learned guard is >= :data:`MIN_GUARD` and was computed
from at least ``min_calls`` and at most ``window`` recorded ratios of its feature and band, or
from at least ``pool_min_calls`` of its band; only learned records are probed; a forgotten
feature record's ceiling (>= 1) lasts until it learns again.
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_right
from collections import deque
from statistics import NormalDist

from polydom.index.serving.anytime import DEFAULT_GUARD_QUANTILE

__all__ = ["ServingGuards", "robust_guard", "upper_quantile"]

#: Where a feature's learned guard may sit above what the middle half of its calls predicts
#: (:func:`robust_guard`): room for a tail heavier than the log-normal law's.
TAIL_ROOM = 1.25

#: The lowest learned guard: a machine measured twice as fast as the curves (curves fitted on a
#: busy machine, served on a quiet one) may start features their curves say do not fit, not more.
MIN_GUARD = 0.5

#: The upper quartile of the standard normal law.
_NORMAL = NormalDist()
_Z75 = _NORMAL.inv_cdf(0.75)


def upper_quantile(ratios, quantile: float) -> float:
    """The ``quantile`` of ``ratios``, but never above the second largest: one call alone does
    not set a guard (the module docstring, *one call alone*)."""
    return _upper_of_sorted(sorted(map(float, ratios)), quantile)


def _upper_of_sorted(values: list, quantile: float) -> float:
    guard = sorted_quantile(values, quantile)
    if quantile >= 1.0 or len(values) < 2:  # the maximum was asked for, or is all there is
        return guard
    return min(guard, values[-2])


def sorted_quantile(values: list, q: float) -> float:
    """``np.quantile(values, q)`` of ascending ``values`` (its default, linear method), to the
    bit, without numpy's per-call overhead: a learned guard is refreshed on the request path.
    ``tests/index/test_start_rule.py`` checks it against numpy."""
    n = len(values)
    virtual = (n - 1) * q  # numpy's virtual index for its linear method
    if virtual >= n - 1:
        return values[-1]
    if virtual < 0:
        return values[0]
    below = math.floor(virtual)
    a, b = values[below], values[below + 1]
    t = virtual - below
    diff = b - a
    return b - diff * (1 - t) if t >= 0.5 else a + diff * t


def _sorted_median(values: list) -> float:
    """``np.median`` of ascending ``values``, to the bit."""
    n = len(values)
    middle = n // 2
    return values[middle] if n % 2 else (values[middle - 1] + values[middle]) / 2


def robust_guard(ratios, quantile: float) -> float:
    """A feature's guard from its recent measured / predicted ``ratios``: their ``quantile`` as the
    middle half of the calls predicts it, never above what the calls themselves show.

    The ``quantile`` of a log-normal law through the calls' median and upper quartile
    (``median * (q75 / median) ** (z(quantile) / z(0.75))``), at most :data:`TAIL_ROOM` times
    that, and at most the window's own quantile (:func:`upper_quantile`). A preemption -- another
    process took the core for a few milliseconds -- lands on any call, however cheap, and turns a
    0.2 ms feature's ratio into 15 or 25; the quantile of the raw ratios then refuses the feature
    for good, while a minority of such calls (under a quarter) cannot move the median or the upper
    quartile. The feature's own spread (its data, the caches) shows in the middle half, and a
    tail heavier than the law's is kept up to :data:`TAIL_ROOM`. Preemption is left to the
    finishing chance (:meth:`ServingGuards.finish_chance`), which counts every call.
    """
    values = sorted(map(float, ratios))
    raw = _upper_of_sorted(values, quantile)
    if quantile >= 1.0 or len(values) < 4:
        return raw
    median = _sorted_median(values)
    if not median > 0.0:
        return raw
    spread = max(sorted_quantile(values, 0.75) / median, 1.0)
    modelled = median * spread ** (_NORMAL.inv_cdf(quantile) / _Z75)
    return min(raw, TAIL_ROOM * modelled)


#: Each item size's band, as the walks met them (a walk asks for it at every feature).
_BANDS: dict = {}

#: Walks in a band between two looks for records to probe (a look scans the band's records).
_PROBE_CHECK = 64


class ServingGuards:
    """Guards that follow the measured times of the features a walk computes.

    Parameters
    ----------
    index : CostSensitiveIndex
        Whose ``cost_guards(size)`` stand where too few calls were seen.
    quantile : float, default :data:`~polydom.index.serving.anytime.DEFAULT_GUARD_QUANTILE`
        The share of recent calls a guarded start covers.
    window : int, default 256
        Recent calls kept per feature and size band.
    min_calls : int, default 20
        Calls of a feature a band needs before their guard replaces the index's (a median and
        a quartile settle on fewer calls than a 0.99 quantile did).
    pool_min_calls : int, default 20
        Calls of any features a band needs before their pooled guard may raise the index's
        (few calls put a high quantile at their largest ratio: a cautious start).
    refresh : int, default 16
        A band's guard is recomputed every ``refresh`` calls (a quantile per request would cost
        more than a cheap feature).
    forget_after : int or None, default 256
        Walks in a band (calls of :meth:`guards`) without a call of a feature, after which the
        band probes that feature's learned guard (the module docstring, *probing*) and its chance
        to finish is stale (*stale chances*); None never probes.
    prior_calls : int or None, default None
        How many calls the fit's chance weighs as where :meth:`finish_chance` is given it (the
        module docstring, *few calls*); None: ``min_calls``; 0: the calls' share alone.

    Notes
    -----
    A size band is half an octave of the item size ``n``: sizes within a factor of about 1.4 of
    each other share their guards. Safe to share between threads (one lock around the record).
    Records are keyed ``(feature, band)``, and ``(None, band)`` for the band's pool.
    """

    def __init__(self, index, *, quantile: float = DEFAULT_GUARD_QUANTILE, window: int = 256, min_calls: int = 20,
                 pool_min_calls: int = 20, refresh: int = 16, forget_after: int | None = 256,
                 prior_calls: int | None = None):
        if not 0.5 <= quantile <= 1.0:
            raise ValueError(f"quantile must lie in [0.5, 1], got {quantile!r}")
        if not 1 <= min_calls <= window or not 1 <= pool_min_calls <= window:
            raise ValueError(f"need 1 <= min_calls, pool_min_calls <= window, got min_calls={min_calls!r}, "
                             f"pool_min_calls={pool_min_calls!r}, window={window!r}")
        if forget_after is not None and not (float(forget_after).is_integer() and forget_after >= 1):
            raise ValueError(f"forget_after must be a positive whole number of walks or None, got {forget_after!r}")
        if prior_calls is not None and not (float(prior_calls).is_integer() and prior_calls >= 0):
            raise ValueError(f"prior_calls must be a whole number of calls >= 0 or None, got {prior_calls!r}")
        self.index = index
        self.prior_calls = int(min_calls if prior_calls is None else prior_calls)
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
        self._sorted: dict[tuple[int, int], list] = {}  # a learned record's ratios, sorted
        self._explored: dict[tuple[int, int], int] = {}  # starts granted past the fit's guard
        self._own: dict[tuple, deque] = {}  # per record: recent CPU / predicted ratios, where measured
        self._calls: dict[tuple[int, int], int] = {}
        self._lock = threading.Lock()

    @staticmethod
    def band(size: float) -> int:
        """The half-octave of ``size`` its guards belong to."""
        found = _BANDS.get(size)
        if found is None:
            if len(_BANDS) >= 4096:
                _BANDS.clear()
            found = _BANDS[size] = int(round(2.0 * math.log2(max(float(size), 1.0))))
        return found

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
                self._probe_idle(band, base)
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

    def finish_chance(self, feature: int, size: float, ratio: float, prior: float | None = None) -> float | None:
        """The share of recent calls of ``feature`` in ``size``'s band that took at most ``ratio``
        times their predicted cost -- every call, preempted ones included; the band's pooled calls
        where the feature has too few of its own; None where neither is learned, or the record is
        probed or was forgotten (the guard then decides alone).

        ``prior``: the chance the fit's cost law gives; the share is then read as a posterior
        with that prior weighed as ``prior_calls`` calls (the module docstring, *few calls*).

        ``O(log window)``; reads a sorted copy replaced whole, without the lock."""
        band = self.band(size)
        key = (int(feature), band)
        if key in self._probing or key in self._ceiling or (None, band) in self._probing:
            return None  # probed or forgotten: the walk's guard decides, as guards() says
        ratios = self._sorted.get(key)
        if ratios is not None and self._stale(key):
            return None  # its chance stopped the feature: the fit's law decides (module docstring, *stale chances*)
        if ratios is None:
            ratios = self._sorted.get((None, band))
            if ratios is None:
                return None
        fitted = bisect_right(ratios, ratio)
        if prior is None:
            return fitted / len(ratios)
        weight = self.prior_calls
        return (fitted + weight * prior) / (len(ratios) + weight)

    def wants_sample(self, feature: int, size: float) -> bool:
        """Whether a walk may start ``feature`` at ``size`` past the fit's guard to learn its cost
        there: the band has no learned guard of the feature's own, and fewer than ``min_calls``
        such starts were granted in it. Each True counts one start."""
        key = (int(feature), self.band(size))
        with self._lock:
            if key in self._learned or key in self._ceiling:
                return False
            granted = self._explored.get(key, 0)
            if granted >= self.min_calls:
                return False
            self._explored[key] = granted + 1
            return True

    def seen(self, size: float) -> tuple[int, ...]:
        """Per feature, in index order: the calls recorded in ``size``'s band."""
        band = self.band(size)
        return tuple(self._calls.get((i, band), 0) for i in range(len(self.index.space)))

    def observe(self, feature: int, size: float, predicted: float, measured: float, cpu: float | None = None) -> None:
        """Record that feature ``feature`` (index order) took ``measured`` seconds at ``size``
        where its curve predicted ``predicted``; ``cpu``: the computing thread's CPU seconds in
        that call, where the caller measured them (the module docstring, *intrinsic cost*)."""
        if not (predicted > 0.0 and math.isfinite(measured) and measured >= 0.0):
            return
        own = None if cpu is None or not (math.isfinite(cpu) and cpu >= 0.0) else cpu / predicted
        key = (int(feature), self.band(size))
        # The index's guard matters only to a probe's call; a call that races the probe's start
        # is judged without it, as every probe was before.
        base = self.index.cost_guards(size)[key[0]] if key in self._probing else None
        with self._lock:
            self._record(key, measured / predicted, own, base)
            self._record((None, key[1]), measured / predicted, own, None)

    def _probe_idle(self, band: int, base) -> None:
        """Probe the learned records of ``band`` whose feature no walk computed in the last
        ``forget_after`` walks there, and whose guard is above the index's ``base`` (the guards
        at the size being served; the pool: any)."""
        with self._lock:
            self._probing.update(key for key in self._last
                                 if key[1] == band and key in self._learned and self._stale(key)
                                 and (key[0] is None or self._learned[key] > base[key[0]]))

    def _stale(self, key) -> bool:
        """Whether no walk in the band computed ``key``'s feature in the last ``forget_after``."""
        return self.forget_after is not None and self._walks.get(key[1], 0) - self._last.get(key, 0) > self.forget_after

    def _forget(self, key) -> None:
        """Drop ``key``'s record; a feature's guard stays at most what it had learned (at least 1)
        until it learns again (the module docstring, *probing*)."""
        learned = self._learned.get(key, 1.0)
        for table in (self._ratios, self._learned, self._calls, self._sorted, self._own):
            table.pop(key, None)
        if key[0] is not None:
            self._ceiling[key] = max(1.0, learned)

    def _record(self, key, ratio: float, own: float | None, base: float | None) -> None:
        """Add one call's wall ``ratio`` (and ``own``, its CPU ratio, where measured) to ``key``'s
        record; ``base``: the index's guard of the feature at the call's size when the record is
        probed (None: not known, or the pool)."""
        known = self._sorted.get(key)
        if key[0] is not None and known is not None and key not in self._probing and self._stale(key):
            # The first call after a stale spell, faster than most of the calls the record holds:
            # the machine changed, so the band learns the feature anew (module docstring, *stale chances*).
            if ratio < known[len(known) // 2]:
                self._forget(key)
        if key in self._probing:
            self._probing.discard(key)
            learned = self._learned.get(key, math.inf)
            # Faster than it learned: start afresh -- unless the learned guard is not above the
            # index's here, where it is not what held the feature back and its calls are kept.
            if (ratio if own is None else own) < learned and (base is None or learned > base):
                self._forget(key)
        self._last[key] = self._walks.get(key[1], 0)
        ratios = self._ratios.get(key)
        if ratios is None:
            ratios = self._ratios[key] = deque(maxlen=self.window)
        ratios.append(ratio)
        if own is not None:
            owns = self._own.get(key)
            if owns is None:
                owns = self._own[key] = deque(maxlen=self.window)
            owns.append(own)
        calls = self._calls[key] = self._calls.get(key, 0) + 1
        least = self.min_calls if key[0] is not None else self.pool_min_calls
        if calls >= least and (calls - least) % self.refresh == 0:
            # The feature's own work where the CPU was measured (scheduling noise left to
            # finish_chance), else the wall clock's middle half.
            owns = self._own.get(key)
            basis = owns if owns is not None and len(owns) >= min(least, len(ratios)) else ratios
            self._learned[key] = max(MIN_GUARD, robust_guard(basis, self.quantile))
            # Replaced whole, so that finish_chance reads it without the lock.
            self._sorted[key] = sorted(ratios)
            self._ceiling.pop(key, None)

    def snapshot(self) -> "ServingGuards":
        """An independent copy of what was learned so far: two walks served from two snapshots
        start from the same guards and learn apart."""
        copy = ServingGuards(self.index, quantile=self.quantile, window=self.window, min_calls=self.min_calls,
                             pool_min_calls=self.pool_min_calls, refresh=self.refresh, forget_after=self.forget_after,
                             prior_calls=self.prior_calls)
        with self._lock:
            copy._ratios = {key: deque(ratios, maxlen=self.window) for key, ratios in self._ratios.items()}
            copy._learned, copy._calls = dict(self._learned), dict(self._calls)
            copy._sorted = dict(self._sorted)
            copy._explored = dict(self._explored)
            copy._own = {key: deque(owns, maxlen=self.window) for key, owns in self._own.items()}
            copy._walks, copy._last, copy._probing = dict(self._walks), dict(self._last), set(self._probing)
            copy._ceiling = dict(self._ceiling)
        return copy

    def check(self) -> None:
        """Assert the module's invariant."""
        with self._lock:
            self._check()

    def _check(self) -> None:
        for key, guard in self._learned.items():
            assert guard >= MIN_GUARD, (key, guard)
            least = self.min_calls if key[0] is not None else self.pool_min_calls
            assert least <= len(self._ratios[key]) <= self.window, key
        assert set(self._last) == set(self._ratios) == set(self._calls), "every record knows when it was last called"
        assert self._probing <= set(self._learned), "only a learned guard is probed"
        assert set(self._sorted) == set(self._learned), "every learned record keeps its sorted ratios"
        assert not set(self._ceiling) & set(self._learned), "a ceiling lasts until its record learns again"
        assert all(c >= 1.0 and key[0] is not None for key, c in self._ceiling.items())
