"""The learner's warnings during a build, counted instead of printed once per fit.

A build fits a learner thousands of times; one that warns (a ``ConvergenceWarning``) would print
the same lines for every fit. Fits run under a :class:`WarningTally`, which counts the warnings
by category and message instead, and the build reports them once (:class:`LearnerWarning`);
:class:`CountingExpand` wraps any black box so, and carries counts back from worker processes.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterable, Iterator

from polydom.index.values import Expansion, is_real
from .errors import LearnerWarning  # noqa: F401 - defined with the package's errors

__all__ = ["CountingExpand", "LearnerWarning", "WarningTally"]


class WarningTally:
    """Warnings raised inside fits, counted by category and first line of the message.

    Each fit runs under :meth:`catching`; the warnings the active filters let through are
    recorded instead of shown, and a message that comes back several times within one fit
    counts once, so a count says in how many fits a warning occurred. ``"ignore"`` filters keep
    a warning out of the tally and ``"error"`` filters still raise. :meth:`report` then issues
    one :class:`LearnerWarning` for everything counted.

    ``warnings.catch_warnings`` changes process-wide state, so fits under a tally must not run
    on several threads of one process at once (joblib's process-based backends are fine).

    Attributes
    ----------
    counts : dict of (str, str) to int
        Fits that warned, by (category name, first line of the message).
    """

    #: Characters of a message kept in the tally (the first line of a long message suffices).
    MESSAGE_CHARS = 160

    def __init__(self):
        self.counts: dict[tuple[str, str], int] = {}

    @contextlib.contextmanager
    def catching(self, into: list | None = None) -> Iterator[None]:
        """Record the warnings of the block; their keys are also appended to ``into``."""
        with warnings.catch_warnings(record=True) as caught:
            yield
        keys = list(dict.fromkeys(
            (w.category.__name__, (str(w.message).strip().splitlines() or [""])[0][: self.MESSAGE_CHARS].rstrip(": "))
            for w in caught
        ))
        self.add((category, message, 1) for category, message in keys)
        if into is not None:
            into.extend(keys)

    def add(self, items: Iterable) -> None:
        """Count ``(category, message, times)`` items (as :meth:`items` gives them)."""
        for category, message, times in items:
            key = (str(category), str(message))
            self.counts[key] = self.counts.get(key, 0) + int(times)

    def items(self) -> list[tuple[str, str, int]]:
        """``[(category, message, times), ...]``, most frequent first (plain data: picklable)."""
        return sorted(((c, m, n) for (c, m), n in self.counts.items()), key=lambda r: (-r[2], r[0], r[1]))

    @property
    def total(self) -> int:
        """Warnings counted (a message counts once per fit)."""
        return sum(self.counts.values())

    def summary(self, what: str = "the learner") -> str | None:
        """One line for everything counted, or None when nothing was.

        >>> tally = WarningTally()
        >>> tally.add([("ConvergenceWarning", "lbfgs failed to converge", 48)])
        >>> tally.summary()
        'the learner warned 48 times (shown once): 48 x ConvergenceWarning: lbfgs failed to converge'
        """
        rows = self.items()
        if not rows:
            return None
        shown = "; ".join(f"{n} x {c}: {m}" for c, m, n in rows[:3])
        more = f"; and {len(rows) - 3} other warnings" if len(rows) > 3 else ""
        return f"{what} warned {self.total} times (shown once): {shown}{more}"

    def report(self, what: str = "the learner", stacklevel: int = 2) -> None:
        """Issue :meth:`summary` as one :class:`LearnerWarning` (nothing when nothing was counted)."""
        text = self.summary(what)
        if text is not None:
            warnings.warn(text, LearnerWarning, stacklevel=stacklevel + 1)


class CountingExpand:
    """Any black box with its warnings counted per call (a :class:`WarningTally`), not printed.

    Called in this process, a call counts into :attr:`tally`. A copy running in a worker process
    (``polydom.build(..., n_jobs=...)``) cannot reach this tally, so it sends its counts back
    with the result, in :attr:`Expansion.info`; :meth:`remember`, which the build calls in this
    process for every result from a worker, adds them here and hands the black box's own info
    to the black box's ``remember``, if it has one. Other attributes (``rescore``) are the black
    box's.
    """

    _INFO = "polydom.warnings"

    def __init__(self, expand):
        self.expand = expand
        self.tally = WarningTally()
        self._home = os.getpid()

    def __call__(self, features):
        caught: list = []
        with self.tally.catching(caught):
            result = self.expand(features)
        if not caught or os.getpid() == self._home or not (isinstance(result, Expansion) or is_real(result)):
            return result
        inner = result if isinstance(result, Expansion) else Expansion(result)
        counts = [(category, message, 1) for category, message in caught]
        return Expansion(inner.accuracy, inner.model, inner.std_error, {self._INFO: counts, "info": inner.info})

    def remember(self, features, result) -> None:
        """Counts a worker sent back, and the black box's own info handed on."""
        info = getattr(result, "info", None)
        if isinstance(info, dict) and self._INFO in info:
            self.tally.add(info[self._INFO])
            result = Expansion(result.accuracy, result.model, result.std_error, info["info"])
        remember = getattr(self.expand, "remember", None)
        if callable(remember):
            remember(features, result)

    def __getattr__(self, name):
        if name.startswith("_") or name in ("expand", "tally"):  # not set yet while unpickling
            raise AttributeError(name)
        return getattr(self.expand, name)
