"""The explorer's view of the black box: each feature set trained at most once, synchronously or
in flight (:class:`ExpansionCache`)."""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["ExpansionCache"]


class ExpansionCache:
    """Calls the black box at most once per feature set and counts the calls.

    Parameters
    ----------
    expand : callable
        ``expand(mask) -> float``: train and score a model on exactly the features in ``mask``.
        Whatever else the caller needs (the model) it keeps itself, keyed by mask. If it also has
        ``submit(masks)``, ``collect(block) -> [(mask, accuracy)]`` and ``cancel()`` (as
        :class:`polydom.expansion.ModelRecorder` has), sets are trained asynchronously: the
        explorer asks for a set as soon as it knows it is needed and goes on deciding others
        while it trains. Its ``value_bounds``, if it has them, bound every accuracy it returns.
        With ``workers`` (how many sets it trains at once), ``guess(masks)`` (as ``submit``, for
        sets nobody asked for yet; one that fails comes back as ``(mask, None)``) and
        ``claim(masks)`` (guesses in flight are asked for now: their failure counts), idle
        workers take guesses (:meth:`speculate`).
    expand_many : callable, optional
        ``expand_many(masks) -> list of float``: the same for a batch, in order, for a black box
        that does not stream. The explorer hands it each group of sets it decides at once.

    Attributes
    ----------
    accuracy : dict[int, float]
        Every set trained so far.
    pending : set[int]
        Sets submitted and not yet back (always empty for a black box that does not stream).
    speculative : set[int]
        Sets started by :meth:`speculate` that nobody has asked for since (trained or in flight).
    declined : set[int]
        Guesses that failed or that the black box did not take; they are not guessed again.
    calls : int
        Number of sets the black box was asked to train (and answered).
    value_bounds : (float, float)
        What a pending set's accuracy may turn out to be: the streaming black box's
        ``value_bounds``, else anything.
    """

    def __init__(self, expand: Callable[[int], float], expand_many: Callable[[list[int]], list[float]] | None = None):
        self._expand = expand
        self._expand_many = expand_many
        streams = all(callable(getattr(expand, name, None)) for name in ("submit", "collect", "cancel"))
        self._stream = expand if streams else None
        self._guesses = (streams and hasattr(expand, "workers")
                         and all(callable(getattr(expand, name, None)) for name in ("guess", "claim")))
        bounds = getattr(expand, "value_bounds", None) if streams else None
        self.value_bounds = (float(bounds[0]), float(bounds[1])) if bounds is not None else (-math.inf, math.inf)
        if not self.value_bounds[0] <= self.value_bounds[1]:
            raise ValueError(f"value_bounds must be (lo, hi) with lo <= hi, got {bounds!r}")
        self.accuracy: dict[int, float] = {}
        self.pending: set[int] = set()
        self.speculative: set[int] = set()
        self.declined: set[int] = set()
        self.calls = 0
        self._arrivals: list[int] = []

    def __call__(self, mask: int) -> float:
        self._claim([mask])
        acc = self.accuracy.get(mask)
        if acc is None:
            if mask in self.pending:
                while mask in self.pending:
                    self.collect()
                return self.accuracy[mask]
            acc = self._expand(mask)
            self.calls += 1
            self.accuracy[mask] = acc
            self._arrivals.append(mask)
        return acc

    def many(self, masks: list[int]) -> list[float]:
        """Accuracies of ``masks``, training the uncached ones as one batch."""
        self.submit(masks)
        while any(m in self.pending for m in masks):
            self.collect()
        return [self.accuracy[m] for m in masks]

    def submit(self, masks: list[int]) -> None:
        """Ask for ``masks``: a streaming black box starts them and returns; another trains them now."""
        self._claim(masks)
        todo = [m for m in dict.fromkeys(masks) if m not in self.accuracy and m not in self.pending]
        if not todo:
            return
        if self._stream is None:
            if self._expand_many is None:
                for m in todo:
                    self(m)
                return
            results = list(self._expand_many(todo))
            if len(results) != len(todo):
                raise RuntimeError(f"expand_many returned {len(results)} results for {len(todo)} sets")
            self.calls += len(todo)
            self.accuracy.update(zip(todo, results))
            self._arrivals.extend(todo)
            return
        self.pending.update(todo)
        try:
            self._stream.submit(todo)
        except BaseException:
            # Nothing of this call is in flight any more (a limit, a deadline, a failure in this
            # process); what it finished is kept.
            self.pending.difference_update(todo)
            self._absorb(self._stream.collect(block=False))
            raise
        self._absorb(self._stream.collect(block=False))

    def _claim(self, masks) -> None:
        """Guesses asked for now are guesses no more: the black box hears of them (the failure
        of one in flight is then the caller's; the side effects of one back apply now)."""
        if not self.speculative:
            return
        claimed = [m for m in dict.fromkeys(masks) if m in self.speculative]
        if claimed:
            self.speculative.difference_update(claimed)
            self._stream.claim(claimed)  # in flight: its failure counts; back: its side effects apply

    def idle_workers(self) -> int:
        """Workers a streaming black box has free now for guesses: its ``workers`` less the sets
        in flight (0 for a black box that does not stream, or lacks ``workers``, ``guess`` or
        ``claim``)."""
        if not self._guesses:
            return 0
        return max(0, int(self._stream.workers or 0) - len(self.pending))

    def speculate(self, masks: list[int]) -> list[int]:
        """Start, on idle workers only, sets that may be asked for soon; the ones started.

        Up to :meth:`idle_workers` of ``masks`` (in order, skipping sets trained or in flight)
        go to the black box's ``guess(masks)`` and are marked :attr:`speculative` until somebody
        asks for them. A set asked for later waits for nothing already running; one never asked
        for only used a worker that had nothing else to do (it is counted in :attr:`calls` when
        it comes back). A guess that fails (or that the black box does not take) comes back as
        ``(mask, None)``, stops nothing and is not guessed again.
        """
        room = self.idle_workers()
        if room <= 0:
            return []
        todo = [m for m in dict.fromkeys(masks)
                if m not in self.accuracy and m not in self.pending and m not in self.declined][:room]
        if todo:
            self.pending.update(todo)
            self.speculative.update(todo)
            try:
                self._stream.guess(todo)
            except BaseException:
                self.pending.difference_update(todo)
                self.speculative.difference_update(todo)
                self._absorb(self._stream.collect(block=False))
                raise
            self._absorb(self._stream.collect(block=False))
        return todo

    def drop_speculative(self) -> None:
        """Cancel what is in flight when only speculative sets are (nobody waits on them)."""
        if self.pending and self.pending <= self.speculative:
            self.cancel()

    def collect(self) -> list[int]:
        """Wait until at least one pending set is back; the masks that came back."""
        if not self.pending:
            raise RuntimeError("nothing is in flight: waiting would never end")
        return self._absorb(self._stream.collect(block=True))

    def cancel(self) -> None:
        """Forget the pending sets (a streaming black box drops them); finished ones are kept."""
        if self._stream is not None and self.pending:
            self._stream.cancel()
            self._absorb(self._stream.collect(block=False))
        self.speculative.difference_update(self.pending)
        self.pending.clear()

    def arrivals(self) -> list[int]:
        """Sets that became known since the last call (each reported once)."""
        out, self._arrivals = self._arrivals, []
        return out

    def _absorb(self, results) -> list[int]:
        arrived = []
        for m, acc in results:
            if acc is None:  # a guess that failed or was not taken: gone, trained afresh if asked for
                self.pending.discard(m)
                self.speculative.discard(m)
                self.declined.add(m)
                continue
            if m in self.accuracy:
                continue
            self.accuracy[m] = acc
            self.pending.discard(m)
            self.calls += 1
            arrived.append(m)
        self._arrivals.extend(arrived)
        return arrived
