"""The black box as polydom calls it: validated, optionally parallel, cached on disk, bounded.

:class:`ModelRecorder` adapts the user's ``expand(frozenset) -> accuracy | Expansion`` to the
lattice's mask-based interface. It

* validates every result once (a finite accuracy in ``[0, 1]`` or an :class:`~polydom.Expansion`);
* keeps the returned models by mask;
* trains sets as soon as they are asked for: :meth:`ModelRecorder.submit` hands them to the
  engine at once and :meth:`ModelRecorder.collect` takes back what has finished, so the explorer
  can ask for the next sets while others train (:meth:`ModelRecorder.many` is both in one call);
* in parallel, uses the engine the caller's ``joblib.parallel_config`` chooses (loky by default,
  threads, a Dask client; others through ``joblib.Parallel``), in chunks sized from the measured
  time per set -- one set per task when sets are slow, more when they are quick;
* sends the black box's large arrays to each worker once per build, not with every task: a task
  carries the black box pickled without them (its current state: parameters, small arrays), and
  the arrays travel out of band -- a file that loky workers map read-only, data a Dask cluster
  holds once;
* runs tasks through a function shipped by value, so a worker imports only what the black box
  itself needs (not polydom);
* consults and fills a persistent :class:`~polydom.cache.ExpansionStore`, committing each set as
  soon as it comes back, so an interrupted or killed build loses at most the sets in flight and
  resumes without retraining;
* applies what it keeps in memory (models, standard errors, the black box's ``remember``) in
  submission order, whatever order the chunks finish in (a guess's only once it is claimed);
* refuses to train more than ``max_expansions`` sets, and stops at a ``deadline``.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from polydom.index import check_expansion
from polydom.lattice import FeatureSpace

from .errors import DeadlineReached, ExpansionError, ExpansionLimitError  # noqa: F401 - their old home
from .expansionpool import OUT_OF_BAND_BYTES, _expand_one, _failure, _open_pool  # noqa: F401

__all__ = ["ModelRecorder", "ExpansionError", "ExpansionLimitError", "DeadlineReached"]


class ModelRecorder:
    """The lattice's black box, with models kept by mask.

    Parameters
    ----------
    space : FeatureSpace
    expand : callable
        The user's black box.
    n_jobs : int or None, default None
        ``None`` or 1 trains in this process; otherwise sets go through the joblib engine.
    store : ExpansionStore, optional
        Persistent cache of trained sets (accuracy and model), keyed by feature names.
    max_expansions : int, optional
        Most black-box calls this recorder may make (cache hits are free).
    deadline : float, optional
        With ``clock``: no new set starts once ``clock() >= deadline``.
    clock : callable, optional
    on_trained : callable, optional
        ``on_trained(calls)`` after each trained set, for progress reporting.
    on_finished : callable, optional
        ``on_finished(count)`` after each chunk of :meth:`finish`, with the sets finished so far.
    on_finish_batch : callable, optional
        ``on_finish_batch(count)`` when :meth:`finish` starts, with the sets it will finish.
    on_rescored : callable, optional
        ``on_rescored(done, total)`` after each chunk of :meth:`rescore`.
    on_round : callable, optional
        ``on_round(round, sets_asked, sets_trained_so_far)`` before each batch of a skyline
        search (:func:`polydom.index.search.search_skyline`).

    Attributes
    ----------
    models : dict of int to object
    std_errors : dict of int to float
        The standard error of each score, for the sets whose black box reported one.
    calls : int
        Black-box calls made (the ``trained`` statistic).
    reused : int
        Sets served from the persistent store.
    value_bounds : (float, float)
        Every accuracy lies in this range (it is checked): the explorer reasons with it about
        sets still in flight.
    shipping : dict
        What parallel tasks carried: ``tasks``, ``task_bytes`` (the pickled black box, all tasks)
        and ``data_bytes`` (its large arrays, each sent once).

    Notes
    -----
    Invariants: a set is in flight at most once; every set submitted is either in flight,
    finished (its result ready for :meth:`collect`), or cancelled; side effects are applied in
    submission order, a guess's when it is claimed (:meth:`guess`).
    """

    value_bounds = (0.0, 1.0)

    def __init__(
        self,
        space: FeatureSpace,
        expand: Callable,
        *,
        n_jobs: int | None = None,
        store=None,
        max_expansions: int | None = None,
        deadline: float | None = None,
        clock: Callable[[], float] | None = None,
        on_trained: Callable[[int], None] | None = None,
        on_finished: Callable[[int], None] | None = None,
        on_finish_batch: Callable[[int], None] | None = None,
        on_rescored: Callable[[int, int], None] | None = None,
        on_round: Callable[[int, int, int], None] | None = None,
    ):
        if not callable(expand):
            raise TypeError(f"expand must be callable, got {expand!r}")
        if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0):
            raise ValueError(f"n_jobs must be None or a non-zero integer, got {n_jobs!r}")
        if max_expansions is not None and (isinstance(max_expansions, bool) or not isinstance(max_expansions, int) or max_expansions < 1):
            raise ValueError(f"max_expansions must be a positive integer, got {max_expansions!r}")
        self.space = space
        self.expand = expand
        self.n_jobs = n_jobs
        self.store = store
        self.max_expansions = max_expansions
        self.deadline = deadline
        self.clock = clock
        self.on_trained = on_trained
        self.on_finished = on_finished
        self.on_finish_batch = on_finish_batch
        self.on_rescored = on_rescored
        self.on_round = on_round
        self.models: dict[int, Any] = {}
        self.std_errors: dict[int, float] = {}
        self.rescored_masks: set[int] = set()
        self.finished_masks: set[int] = set()  # with a screening black box: sets trained fully
        self.calls = 0
        self.reused = 0
        self._ready: list[tuple[int, float]] = []  # finished, not yet collected
        self._pool = None
        self._pool_opened = False
        self._flights: dict[int, tuple[list[int], list[frozenset], int]] = {}  # token -> masks, sets, first seq
        self._in_flight: set[int] = set()
        self._guesses: set[int] = set()  # in flight through :meth:`guess`, not asked for since
        self._held: dict[int, tuple] = {}  # guesses back and not asked for: side effects wait for a claim
        self._seq = 0  # submission order of trained sets
        self._arrived: dict[int, tuple] = {}  # seq -> (mask, features, checked), waiting for earlier ones
        self._applied = 0
        self._per_set: float | None = None  # mean seconds per set, measured in the workers
        self._timed = 0
        self._tasks = 0

    # -- the lattice's interface ------------------------------------------------------------

    def __call__(self, mask: int) -> float:
        return self.many([mask])[0]

    def many(self, masks: list[int]) -> list[float]:
        """Accuracies of ``masks`` (distinct), training the sets the store does not have."""
        wanted = set(masks)
        self.submit(masks)
        out: dict[int, float] = {}
        others: list[tuple[int, float]] = []
        block = False
        while True:
            for m, acc in self.collect(block=block):
                if m in wanted:
                    out[m] = acc
                else:
                    others.append((m, acc))
            if wanted <= out.keys():
                break
            block = True
        self._ready = others + self._ready  # another caller's sets stay for its collect
        return [out[m] for m in masks]

    def submit(self, masks: Sequence[int], guessing: bool = False) -> None:
        """Start training ``masks`` (those not in flight); results come back through :meth:`collect`.

        Store hits are ready at once. In this process the sets are trained here and now, in order;
        in parallel they go to the engine in chunks and this returns at once.
        """
        todo = []
        remember_hit = getattr(self.expand, "remember", None)
        for m in dict.fromkeys(masks):
            if m in self._in_flight:
                if not guessing:
                    self._guesses.discard(m)  # asked for now: its failure is the build's
                continue
            hit = self.store.get(self.space.sorted_names(m)) if self.store is not None else None
            if hit is None:
                todo.append(m)
                continue
            if guessing:  # free to read when asked for; a guess would only apply it early
                self._ready.append((m, None))
                continue
            if callable(remember_hit):
                remember_hit(self.space.frozenset(m), hit)
            if hit.model is not None:
                self.models[m] = hit.model
                if self.can_finish:  # a screening is stored without a model, a finished set with one
                    self.finished_masks.add(m)
            if hit.std_error is not None:
                self.std_errors[m] = hit.std_error
            self.reused += 1
            self._ready.append((m, hit.accuracy))
        if not todo:
            return
        self._check_limits(len(todo))
        pool = self._engine()
        sets = [self.space.frozenset(m) for m in todo]
        if pool is None:
            for i, (m, features) in enumerate(zip(todo, sets)):
                if i:
                    self._check_deadline()  # stop between sets; what was trained is kept
                checked = check_expansion(_expand_one(self.expand, features), features)
                self._commit(m, checked)
                self._keep(m, features, checked, None)
            return
        # Sets trained in worker processes teach this process nothing; the black box may take
        # the results back (its winners, fold scores) through ``remember``, in submission order.
        shipped = pool.snapshot(self.expand)
        size = 1 if guessing else self._chunk_size(len(todo), pool)  # a guess fails alone
        starts = list(range(0, len(todo), size))
        tokens = pool.submit_many(shipped, [sets[i : i + size] for i in starts], starts)
        for token, i in zip(tokens, starts):
            chunk_masks = todo[i : i + size]
            self._flights[token] = (chunk_masks, sets[i : i + size], self._seq)
            self._seq += len(chunk_masks)
            self._in_flight.update(chunk_masks)
        if guessing:
            self._guesses.update(todo)

    def guess(self, masks: Sequence[int]) -> None:
        """Start ``masks`` on the engine's idle workers before anybody asks for them.

        As :meth:`submit`, one set per task, except that:

        * a guess whose task fails stops nothing: it comes back from :meth:`collect` as
          ``(mask, None)``, as does a set the store holds (it is read when asked for); asking for
          it later trains it again, failure and all. A worker that dies still stops the build
          when the engine fails the other tasks with it (loky fails every one it holds);
        * a guess's side effects (its model, standard error, what the black box is told to
          ``remember``: the learner race) wait until it is claimed (:meth:`claim`), so a guess
          nobody asks for changes nothing but the store and :attr:`calls`.

        Nothing is guessed in this process.
        """
        if self._past_deadline():
            self._ready.extend((m, None) for m in masks)  # no guesses past the deadline
            return
        if self.workers:
            self.submit(masks, guessing=True)

    def claim(self, masks: Sequence[int]) -> None:
        """Guesses asked for now: a failure of one in flight stops the build, and the side effects
        of one back are applied now."""
        self._guesses.difference_update(masks)
        for m in masks:
            held = self._held.pop(m, None)
            if held is not None:
                self._apply(*held)

    def collect(self, block: bool = True) -> list[tuple[int, float]]:
        """``(mask, accuracy)`` of the sets finished since the last call (``(mask, None)`` for a
        :meth:`guess` that failed).

        With ``block``, waits until at least one is (it is an error to wait with nothing in
        flight). Each finished set is committed to the store as it arrives.
        """
        if not self._ready and block:
            if not self._flights:
                raise RuntimeError("collect(block=True) with no set in flight would wait forever")
            while not self._ready and self._flights:
                self._receive(block=True)
        elif self._flights:
            self._receive(block=False)
        out, self._ready = self._ready, []
        return out

    @property
    def in_flight(self) -> int:
        """Sets submitted and not yet back."""
        return len(self._in_flight)

    @property
    def workers(self) -> int:
        """Workers of the parallel engine once it is open; 0 while sets train in this process.

        Also 0 under ``max_expansions``: a cap on trained sets leaves nothing for guesses (the
        explorer starts sets on idle workers only when this is positive)."""
        if self.max_expansions is not None or not self._pool_opened or self._pool is None:
            return 0
        return self._pool.workers

    def cancel(self) -> None:
        """Drop every set in flight (running tasks finish; their results are ignored)."""
        if self._pool is not None and self._flights:
            self._pool.cancel(list(self._flights))
        self._flights.clear()
        self._in_flight.clear()
        self._guesses.clear()
        # What arrived out of order is kept all the same: it was trained and committed.
        for seq in sorted(self._arrived):
            item = self._arrived.pop(seq)
            if item is not None:  # None: a set that never ran or failed
                self._apply(*item)
        self._applied = self._seq

    def abort(self) -> None:
        """Ctrl-C: stop the workers too (as joblib does), not only what has not started, and
        release the engine; a later submission opens it afresh."""
        if self._pool is not None:
            self._pool.abort()
        self.close()

    def close(self) -> None:
        """Cancel what is in flight and release the engine (shipped files, threads)."""
        self.cancel()
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        self._pool_opened = False

    @property
    def shipping(self) -> dict:
        shipper = getattr(self._pool, "shipper", None)
        return {
            "tasks": self._tasks,
            "task_bytes": shipper.task_bytes if shipper is not None else 0,
            "data_bytes": shipper.data_bytes if shipper is not None else 0,
        }

    #: Sets handed to the black box's ``finish`` at once.
    FINISH_CHUNK = 8

    @property
    def can_finish(self) -> bool:
        """Whether the black box screens sets and offers ``finish(sets)`` to train them fully."""
        return bool(getattr(self.expand, "screens", False)) and callable(getattr(self.expand, "finish", None))

    def finish(self, masks: list[int]) -> dict[int, float]:
        """Accuracies of ``masks`` trained fully by the black box's ``finish``; models, standard
        errors and the store updated (a finished set replaces its screening there)."""
        todo = [m for m in dict.fromkeys(masks) if m not in self.finished_masks]
        out = {}
        if todo and self.on_finish_batch is not None:
            self.on_finish_batch(len(todo))
        # In chunks, so that progress can be reported (and a stop loses at most one chunk).
        for at in range(0, len(todo), self.FINISH_CHUNK):
            chunk = todo[at : at + self.FINISH_CHUNK]
            sets = [self.space.frozenset(m) for m in chunk]
            for m, features, result in zip(chunk, sets, self.expand.finish(sets)):
                checked = check_expansion(result, features)
                if self.store is not None:
                    self.store.put(self.space.sorted_names(m), checked.accuracy, checked.model, checked.std_error)
                self._keep(m, features, checked, None)
                self.finished_masks.add(m)
                out[m] = checked.accuracy
            if self.on_finished is not None:
                self.on_finished(len(self.finished_masks))
        return out

    @property
    def can_rescore(self) -> bool:
        """Whether the black box offers ``rescore(sets)`` (a second, lower-variance opinion)."""
        return callable(getattr(self.expand, "rescore", None))

    def rescore(self, masks: list[int]) -> dict[int, float]:
        """New accuracies of ``masks`` from the black box's ``rescore``; standard errors updated."""
        out = {}
        # In chunks, so that progress can be reported: ``on_rescored(done, total)``, from 0.
        if masks and self.on_rescored is not None:
            self.on_rescored(0, len(masks))
        for at in range(0, len(masks), self.FINISH_CHUNK):
            chunk = masks[at : at + self.FINISH_CHUNK]
            sets = [self.space.frozenset(m) for m in chunk]
            for m, features, result in zip(chunk, sets, self.expand.rescore(sets)):
                checked = check_expansion(result, features)
                out[m] = checked.accuracy
                if checked.std_error is not None:
                    self.std_errors[m] = checked.std_error
            if self.on_rescored is not None:
                self.on_rescored(min(at + self.FINISH_CHUNK, len(masks)), len(masks))
        return out

    # -- internals -----------------------------------------------------------------------------

    def _engine(self):
        """The parallel pool, opened on first use; None when sets are trained in this process."""
        if self.n_jobs in (None, 1):
            return None
        if not self._pool_opened:
            self._pool = _open_pool(self.n_jobs, self.expand)
            self._pool_opened = True
            if self._pool is not None:
                weakref.finalize(self, self._pool.close)
        return self._pool

    def _chunk_size(self, n: int, pool) -> int:
        """Sets per task: one until a time per set is measured, then enough for ``pool.target``
        seconds of work, never so many that a submission keeps a worker idle."""
        spread = max(1, math.ceil(n / pool.workers))
        if self._per_set is None:
            return 1
        return max(1, min(spread, int(pool.target / max(self._per_set, 1e-9))))

    def _receive(self, block: bool) -> None:
        """Take back finished chunks: commit each set, apply side effects in submission order."""
        failure = None
        try:
            arrivals = self._pool.wait(block)
        except KeyboardInterrupt:
            self.abort()
            raise
        for token, outcome, error in arrivals:
            flight = self._flights.pop(token, None)
            if flight is None:  # cancelled while it ran
                continue
            masks, sets, first = flight
            self._tasks += 1
            results, failed = [], None
            guess = self._is_guess(masks)
            self._guesses.difference_update(masks)
            if guess and (error is not None or outcome[2] is not None):
                self._drop_guess(masks[0], first)  # nobody asked for it: its failure stops nothing
                continue
            if error is not None:  # the engine failed (a worker died): nothing of the chunk came back
                failure = failure or error
            else:
                start, results, failed, seconds = outcome
                assert start >= 0 and len(results) <= len(masks)
                if results:
                    # A running mean: the chunk size follows the black box's measured speed.
                    self._timed += len(results)
                    per_set = seconds / len(results)
                    previous = per_set if self._per_set is None else self._per_set
                    self._per_set = previous + (per_set - previous) * len(results) / self._timed
            for offset, (m, features) in enumerate(zip(masks, sets)):
                self._in_flight.discard(m)
                item = None
                if offset < len(results) and failure is None:
                    try:
                        checked = check_expansion(results[offset], features)
                    except Exception as exc:
                        if guess:
                            self._drop_guess(m, first + offset)
                            continue
                        failure = exc
                    else:
                        self._commit(m, checked)
                        item = (m, features, checked)
                        if guess:
                            self._held[m], item = item, None
                self._arrived[first + offset] = item  # None: never ran, failed, or a guess held
            if failed is not None and failure is None:
                index, exc, text = failed
                failure = _failure(sets[index], exc, text)
        while self._applied in self._arrived:  # in submission order, as a serial build would
            item = self._arrived.pop(self._applied)
            if item is not None:
                self._apply(*item)
            self._applied += 1
        if failure is not None:
            self.cancel()
            raise failure
        asked = any(not self._is_guess(masks) for masks, _, _ in self._flights.values())
        if asked and self._past_deadline():
            self.cancel()
            raise DeadlineReached(f"precompute time budget spent after {self.calls} trained sets")

    def _drop_guess(self, m: int, seq: int) -> None:
        """A guess that failed: not in flight, nothing to apply, reported as ``(m, None)``."""
        self._in_flight.discard(m)
        self._arrived[seq] = None
        self._ready.append((m, None))

    def _commit(self, m: int, checked) -> None:
        """Count a trained set and make it durable now, whatever finishes after it."""
        if self.store is not None:
            self.store.put(self.space.sorted_names(m), checked.accuracy, checked.model, checked.std_error)
        self.calls += 1  # progress counts sets as they come back
        self._ready.append((m, checked.accuracy))
        if self.on_trained is not None:
            self.on_trained(self.calls)

    def _keep(self, m: int, features: frozenset, checked, remember) -> None:
        """Record one trained set in memory (its store entry is already committed)."""
        if callable(remember):
            remember(features, checked)
        if checked.model is not None:
            self.models[m] = checked.model
        if checked.std_error is not None:
            self.std_errors[m] = checked.std_error

    def _apply(self, m: int, features: frozenset, checked) -> None:
        """In-memory side effects of a set trained in a worker."""
        self._keep(m, features, checked, getattr(self.expand, "remember", None))

    def _check_limits(self, batch: int) -> None:
        if self.max_expansions is not None and self.calls + self.in_flight + batch > self.max_expansions:
            raise ExpansionLimitError(
                f"this build would train more than max_expansions={self.max_expansions} feature sets "
                f"(trained so far: {self.calls}, in flight: {self.in_flight}, next batch: {batch}); raise the "
                f"limit, raise alpha, or reuse an expansion cache"
            )
        self._check_deadline()

    def _past_deadline(self) -> bool:
        return self.deadline is not None and self.clock is not None and self.clock() >= self.deadline

    def _is_guess(self, masks: list[int]) -> bool:
        """Whether a task's masks are one guess nobody has asked for (guesses travel alone)."""
        return len(masks) == 1 and masks[0] in self._guesses

    def _check_deadline(self) -> None:
        if self._past_deadline():
            raise DeadlineReached(f"precompute time budget spent after {self.calls} trained sets")
