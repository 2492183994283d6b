"""Plain progress lines for a fit whose output goes to a log rather than a terminal.

A build script's log shows one line per step, and within a long step a line at an interval that
grows with the fit: at least every :data:`MIN_EVERY` seconds, then every :data:`SHARE` of the
time the fit has run so far, at most every :data:`MAX_EVERY` seconds. So no stretch without a
line is longer than a tenth of the fit (once it has run :data:`MIN_EVERY` / :data:`SHARE`
seconds), and a fit of an hour prints a few hundred lines, not thousands.
"""

from __future__ import annotations

import sys
import time

__all__ = ["ProgressLog", "MIN_EVERY", "MAX_EVERY", "SHARE"]

#: Shortest interval between two lines within a step (seconds).
MIN_EVERY = 2.0
#: Longest interval between two lines within a step (seconds).
MAX_EVERY = 30.0
#: The interval as a share of the time since the fit started.
SHARE = 0.1


class ProgressLog:
    """Lines of one fit on ``stream``, each prefixed ``label: ``.

    Parameters
    ----------
    enabled : bool
        Print at all (False: every method is a no-op, ``due`` is False).
    stream : file, optional
        Default ``sys.stderr`` at the time of each line.
    label : str, default "polydom"
    clock : callable, default time.monotonic

    Attributes
    ----------
    started : float
        The clock when the log was made (the start of the fit).
    """

    def __init__(self, enabled: bool = True, *, stream=None, label: str = "polydom", clock=time.monotonic):
        self.enabled, self.stream, self.label, self.clock = bool(enabled), stream, label, clock
        self.started = self.last = clock()

    def interval(self) -> float:
        """Seconds the next line within a step waits for."""
        return min(MAX_EVERY, max(MIN_EVERY, SHARE * (self.clock() - self.started)))

    def due(self) -> bool:
        """Whether a line within a step is due."""
        return self.enabled and self.clock() - self.last >= self.interval()

    def say(self, text: str) -> None:
        """Print ``text`` now (a step starts or ends)."""
        if self.enabled:
            print(f"{self.label}: {text}", file=self.stream or sys.stderr, flush=True)
            self.last = self.clock()

    def counter(self, what: str, total: int, unit: str):
        """``report(done)`` for a step of ``total`` equal parts: when due, a line with the count,
        the time so far and, at the rate so far, the time left."""
        begun = self.clock()

        def report(done: int, total_now: int | None = None) -> None:
            size = total if total_now is None else total_now
            if not self.due() or done <= 0:
                return
            spent = self.clock() - begun
            left = spent / done * (size - done)
            self.say(f"{what}: {done} of {size} {unit}, {spent:.0f} s so far, about {left:.0f} s left")

        return report
