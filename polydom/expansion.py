"""The black box as polydom calls it: validated, optionally parallel, cached on disk, bounded.

:class:`ModelRecorder` adapts the user's ``expand(frozenset) -> accuracy | Expansion`` to the
lattice's mask-based interface. It

* validates every result once (a finite accuracy in ``[0, 1]`` or an :class:`~polydom.Expansion`);
* keeps the returned models by mask;
* trains a batch (a lattice layer) through joblib when ``n_jobs`` asks for it, in chunks large
  enough that per-task overhead stays small; the caller's ``joblib.parallel_config`` chooses the
  engine (loky by default, Dask or Ray when configured), and results come back in input order,
  so the explored sets and the index are identical whatever the engine;
* consults and fills a persistent :class:`~polydom.cache.ExpansionStore`, committing each set as
  soon as it is trained, so an interrupted build resumes without retraining;
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


def _train_chunk(expand: Callable, chunk: Sequence[frozenset]) -> list[Any]:
    """Run the black box on one chunk of sets (in a worker); results in order."""
    return [_expand_one(expand, features) for features in chunk]


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
            for m, result in zip(todo, self._train([self.space.frozenset(m) for m in todo])):
                features = self.space.frozenset(m)
                checked = check_expansion(result, features)
                if callable(remember):
                    remember(features, checked)
                acc, model = checked.accuracy, checked.model
                if model is not None:
                    self.models[m] = model
                if checked.std_error is not None:
                    self.std_errors[m] = checked.std_error
                if self.store is not None:
                    self.store.put(self.space.sorted_names(m), acc, model, checked.std_error)
                out[m] = acc
                self.calls += 1
                if self.on_trained is not None:
                    self.on_trained(self.calls)
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
        """Results of the black box on ``sets``, in order, streamed as they complete."""
        if self.n_jobs in (None, 1) or len(sets) == 1:
            for i, features in enumerate(sets):
                if i:
                    self._check_deadline()  # stop between sets; what was trained is kept
                yield _expand_one(self.expand, features)
            return
        from joblib import Parallel, delayed, effective_n_jobs

        workers = max(1, effective_n_jobs(self.n_jobs))
        # About four chunks per worker: large enough to amortise dispatch, small enough to balance.
        size = max(1, math.ceil(len(sets) / (4 * workers)))
        chunks = [sets[i : i + size] for i in range(0, len(sets), size)]
        parallel = Parallel(n_jobs=self.n_jobs, return_as="generator")
        for i, results in enumerate(parallel(delayed(_train_chunk)(self.expand, chunk) for chunk in chunks)):
            if i:
                self._check_deadline()
            yield from results
