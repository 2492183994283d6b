"""The black box as polydom calls it: validated, optionally parallel, cached on disk, bounded.

:class:`ModelRecorder` adapts the user's ``expand(frozenset) -> accuracy | Expansion`` to the
lattice's mask-based interface. It

* validates every result once (a finite accuracy in ``[0, 1]`` or an :class:`~polydom.Expansion`);
* keeps the returned models by mask;
* trains a batch (a lattice layer) through joblib when ``n_jobs`` asks for it, in chunks large
  enough that per-task overhead stays small; the caller's ``joblib.parallel_config`` chooses the
  engine (loky by default, Dask or Ray when configured). Chunks come back as they complete;
* consults and fills a persistent :class:`~polydom.cache.ExpansionStore`, committing each set as
  soon as it comes back -- a chunk that finished behind a slower one is committed at once -- so
  an interrupted or killed build loses at most the sets in flight and resumes without retraining;
* applies what it keeps in memory (models, standard errors, the black box's ``remember``) in
  input order, so the explored sets and the index are identical whatever the
  engine and whatever order the chunks finish in;
* refuses to train more than ``max_expansions`` sets, and stops at a ``deadline``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from polydom.index import check_expansion
from polydom.lattice import FeatureSpace

from .errors import PolydomError

__all__ = ["ModelRecorder", "ExpansionError", "ExpansionLimitError", "DeadlineReached"]


class ExpansionError(PolydomError, RuntimeError):
    """The black box raised while training a feature set; the message names the set, and the
    original exception is chained as ``__cause__``."""


class ExpansionLimitError(PolydomError, RuntimeError):
    """The build would train more feature sets than ``max_expansions`` allows."""


class DeadlineReached(PolydomError):
    """The precompute time budget ran out before the next batch (used by progressive alpha)."""


def _expand_one(expand: Callable, features: frozenset):
    """The black box on one set; a failure is re-raised naming the set it failed on."""
    try:
        return expand(features)
    except PolydomError:
        raise
    except Exception as exc:
        raise ExpansionError(f"expand({sorted(features)}) raised {type(exc).__name__}: {exc}") from exc


def _train_chunk(expand: Callable, chunk: Sequence[frozenset], start: int = 0) -> tuple[int, list[Any]]:
    """Run the black box on one chunk of sets (in a worker); ``start`` and the results in order.

    ``start`` is the chunk's position in its batch, handed back so that chunks may return in
    any order.
    """
    return start, [_expand_one(expand, features) for features in chunk]


class ModelRecorder:
    """The lattice's black box, with models kept by mask.

    Parameters
    ----------
    space : FeatureSpace
    expand : callable
        The user's black box.
    n_jobs : int or None, default None
        ``None`` or 1 trains in this process; otherwise batches go through joblib.
    store : ExpansionStore, optional
        Persistent cache of trained sets (accuracy and model), keyed by feature names.
    max_expansions : int, optional
        Most black-box calls this recorder may make (cache hits are free).
    deadline : float, optional
        With ``clock``: no new batch starts once ``clock() >= deadline``.
    clock : callable, optional
    on_trained : callable, optional
        ``on_trained(calls)`` after each trained set, for progress reporting.

    Attributes
    ----------
    models : dict of int to object
    std_errors : dict of int to float
        The standard error of each score, for the sets whose black box reported one.
    calls : int
        Black-box calls made (the ``trained`` statistic).
    reused : int
        Sets served from the persistent store.
    """

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
        self.models: dict[int, Any] = {}
        self.std_errors: dict[int, float] = {}
        self.rescored_masks: set[int] = set()
        self.calls = 0
        self.reused = 0

    # -- the lattice's interface ------------------------------------------------------------

    def __call__(self, mask: int) -> float:
        return self.many([mask])[0]

    def many(self, masks: list[int]) -> list[float]:
        """Accuracies of ``masks`` (distinct), training the sets the store does not have."""
        out: dict[int, float] = {}
        todo = []
        for m in masks:
            hit = self.store.get(self.space.sorted_names(m)) if self.store is not None else None
            if hit is None:
                todo.append(m)
            else:
                if callable(getattr(self.expand, "remember", None)):
                    self.expand.remember(self.space.frozenset(m), hit)
                out[m] = hit.accuracy
                if hit.model is not None:
                    self.models[m] = hit.model
                if hit.std_error is not None:
                    self.std_errors[m] = hit.std_error
                self.reused += 1
        if todo:
            self._check_limits(len(todo))
            # A black box trained in worker processes learns nothing in this one; it may take
            # the results back (its winners, fold scores) through ``remember``.
            remember = getattr(self.expand, "remember", None) if self.n_jobs not in (None, 1) else None
            sets = [self.space.frozenset(m) for m in todo]
            arrived: dict[int, Any] = {}
            applied = 0
            for position, result in self._train(sets):
                m = todo[position]
                checked = check_expansion(result, sets[position])
                if self.store is not None:  # durable now, whatever finishes after it
                    self.store.put(self.space.sorted_names(m), checked.accuracy, checked.model, checked.std_error)
                arrived[position] = checked
                self.calls += 1  # progress counts sets as they come back
                if self.on_trained is not None:
                    self.on_trained(self.calls)
                while applied in arrived:  # in input order, as a serial build would
                    self._keep(todo[applied], sets[applied], arrived.pop(applied), remember, out)
                    applied += 1
        return [out[m] for m in masks]

    @property
    def can_rescore(self) -> bool:
        """Whether the black box offers ``rescore(sets)`` (a second, lower-variance opinion)."""
        return callable(getattr(self.expand, "rescore", None))

    def rescore(self, masks: list[int]) -> dict[int, float]:
        """New accuracies of ``masks`` from the black box's ``rescore``; standard errors updated."""
        sets = [self.space.frozenset(m) for m in masks]
        out = {}
        for m, features, result in zip(masks, sets, self.expand.rescore(sets)):
            checked = check_expansion(result, features)
            out[m] = checked.accuracy
            if checked.std_error is not None:
                self.std_errors[m] = checked.std_error
        return out

    # -- internals -----------------------------------------------------------------------------

    def _keep(self, m: int, features: frozenset, checked, remember, out: dict) -> None:
        """Record one trained set in memory (its store entry is already committed)."""
        if callable(remember):
            remember(features, checked)
        if checked.model is not None:
            self.models[m] = checked.model
        if checked.std_error is not None:
            self.std_errors[m] = checked.std_error
        out[m] = checked.accuracy

    def _check_limits(self, batch: int) -> None:
        if self.max_expansions is not None and self.calls + batch > self.max_expansions:
            raise ExpansionLimitError(
                f"this build would train more than max_expansions={self.max_expansions} feature sets "
                f"(trained so far: {self.calls}, next batch: {batch}); raise the limit, raise alpha, or "
                f"reuse an expansion cache"
            )
        self._check_deadline()

    def _check_deadline(self) -> None:
        if self.deadline is not None and self.clock is not None and self.clock() >= self.deadline:
            raise DeadlineReached(f"precompute time budget spent after {self.calls} trained sets")

    def _train(self, sets: list[frozenset]):
        """``(position, result)`` of the black box on each of ``sets``, as each completes.

        In this process the order is the input order. In parallel, chunks are yielded in the
        order they finish, so that a chunk done behind a slower one is committed at once.
        """
        if self.n_jobs in (None, 1) or len(sets) == 1:
            for i, features in enumerate(sets):
                if i:
                    self._check_deadline()  # stop between sets; what was trained is kept
                yield i, _expand_one(self.expand, features)
            return
        from joblib import Parallel, delayed, effective_n_jobs

        workers = max(1, effective_n_jobs(self.n_jobs))
        # About four chunks per worker: large enough to amortise dispatch, small enough to balance.
        size = max(1, math.ceil(len(sets) / (4 * workers)))
        starts = range(0, len(sets), size)
        try:
            parallel = Parallel(n_jobs=self.n_jobs, return_as="generator_unordered")
        except ValueError:  # joblib < 1.4 (scikit-learn 1.4 asks only for 1.2): chunks in input order
            parallel = Parallel(n_jobs=self.n_jobs, return_as="generator")
        tasks = (delayed(_train_chunk)(self.expand, sets[i : i + size], i) for i in starts)
        for done, (start, results) in enumerate(parallel(tasks), 1):
            for offset, result in enumerate(results):
                yield start + offset, result
            if done < len(starts):
                self._check_deadline()
