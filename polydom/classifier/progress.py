"""Plain progress lines for a fit whose output goes to a log rather than a terminal.

A build script's log shows one line per step, and within a long step a line at an interval that
grows with the fit: at least every :data:`MIN_EVERY` seconds, then every :data:`SHARE` of the
time the fit has run so far, at most every :data:`MAX_EVERY` seconds. So no stretch without a
line is longer than a tenth of the fit (once it has run :data:`MIN_EVERY` / :data:`SHARE`
seconds), and a fit of an hour prints a few hundred lines, not thousands.
"""

from __future__ import annotations

import os
import sys
import time

__all__ = ["ProgressLog", "TrainingProgress", "sets_in_cache", "MIN_EVERY", "MAX_EVERY", "SHARE"]

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


class TrainingProgress:
    """``progress(trained)`` for :func:`polydom.build`: sets trained, their rate, and time left.

    How many sets an exploration trains is not known when it starts (pruning decides as it
    goes), so the total shown is an upper bound, ``limit``: the lattice's sets not already in the
    expansion cache. Nothing is claimed beyond it -- no bar that stops at 70 %.

    * On a terminal (``progress`` None or True): a tqdm counter -- sets, rate, elapsed time.
    * Elsewhere, with ``progress=True`` (a log file, a pipe, CI): plain lines, one at the first
      set, then at most one every ``every`` seconds, and one when done::

          polydom: training feature sets: 120 trained (at most 256), 4.1 sets/s, 29 s so far, at most 33 s left

      where the time left is for the remaining sets of ``limit`` at the rate so far.

    * ``progress=None`` elsewhere, or ``progress=False``: nothing.

    Parameters
    ----------
    progress : bool or None
    limit : int
        Most sets this build can train.
    stream : file, optional
        Default ``sys.stderr``.
    every : float, default 10.0
        Seconds between plain lines.
    label : str, default "polydom"
        Prefix of plain lines.
    clock : callable, default time.monotonic
    log : polydom.classifier.progress.ProgressLog, optional
        The fit's log: plain lines come when it says one is due (an interval that grows with
        the fit) instead of every ``every`` seconds.

    Attributes
    ----------
    trained : int
        Sets trained so far.
    """

    def __init__(self, progress, limit: int, *, stream=None, every: float = 10.0, label: str = "polydom",
                 clock=time.monotonic, log=None):
        self.stream = sys.stderr if stream is None else stream
        self.limit, self.every, self.label, self.clock, self.log = int(limit), float(every), label, clock, log
        self.trained = 0
        self.fully = 0
        self.round = None
        self.finish_began = self.finish_limit = None
        self.finish_base = 0
        self.rescore_began = None
        self.bar = None
        self.lines = False
        self.started = self.last = clock()
        terminal = bool(getattr(self.stream, "isatty", lambda: False)())
        if progress is False or self.limit <= 0:
            return
        if terminal:
            try:
                from tqdm.auto import tqdm
            except ImportError:  # tqdm comes with the images extra; plain lines do without it
                self.lines = True
            else:
                self.bar = tqdm(desc=f"training feature sets (at most {self.limit})", unit="set", file=self.stream)
        else:
            self.lines = progress is True

    def line(self) -> str:
        """The progress line as it stands (also what plain mode prints)."""
        elapsed = self.clock() - self.started
        rate = self.trained / elapsed if elapsed > 0 else 0.0
        speed = f"{rate:.1f} sets/s" if rate >= 1 or rate == 0 else f"{1 / rate:.1f} s/set"
        if self.round is not None:  # a skyline search: the total is known a round at a time
            text = (f"{self.label}: training feature sets: searching the skyline, round {self.round}: "
                    f"{self.trained} of {self.limit} asked so far trained, {speed}, {elapsed:.0f} s so far")
            left = "left in this round"
        else:
            text = (f"{self.label}: training feature sets: {self.trained} trained (at most {self.limit}), "
                    f"{speed}, {elapsed:.0f} s so far")
            left = "left"
        if rate > 0 and self.trained < self.limit:
            text += f", at most {(self.limit - self.trained) / rate:.0f} s {left}"
        return text

    def search_round(self, round_: int, asked: int, trained: int) -> None:
        """A skyline search's round ``round_`` asks for ``asked`` sets (``trained`` so far): the
        line's total becomes what is asked so far."""
        self.round = int(round_)
        self.limit = self.trained + int(asked)
        if self.bar is not None:
            self.bar.total = self.limit
            self.bar.set_description(f"training feature sets (skyline search, round {self.round})")
            self.bar.refresh()

    def _due(self) -> bool:
        """Whether a plain line is due: when the fit's log says so, else every ``every`` seconds."""
        return self.log.due() if self.log is not None else self.clock() - self.last >= self.every

    def _print(self, text: str) -> None:
        self.last = self.clock()
        print(text, file=self.stream, flush=True)
        if self.log is not None:
            self.log.last = self.log.clock()

    def __call__(self, trained: int) -> None:
        first = self.trained == 0
        self.trained = trained
        if self.round is not None and trained > self.limit:  # a skyline search's chain prefixes, after its rounds
            self.limit = trained
        if self.bar is not None:
            self.bar.update(trained - self.bar.n)
        elif self.lines and (first or self._due()):
            self._print(self.line())

    def finish_batch(self, count: int) -> None:
        """A batch of ``count`` screened sets starts training fully: the line's total and rate
        are the batches' so far."""
        if self.finish_began is None:
            self.finish_began, self.finish_base = self.clock(), self.fully
        self.finish_limit = self.fully + int(count)

    def finished(self, count: int) -> None:
        """``count`` screened sets trained fully so far (a plain line when one is due)."""
        self.fully = count
        if self.bar is not None:
            self.bar.set_postfix_str(f"{count} trained fully")
        elif self.lines and self._due():
            text = f"{self.label}: training the sets that could be served fully: {count}"
            if self.finish_limit is not None:
                text += f" of {self.finish_limit} asked so far"
            text += f", {self.clock() - self.started:.0f} s since training began"
            if self.finish_began is not None and self.finish_limit is not None and count > self.finish_base:
                left = _seconds_left(count - self.finish_base, self.finish_limit - count, self.clock() - self.finish_began)
                text += f", about {left:.0f} s left in this batch"
            self._print(text)

    def rescored(self, done: int, total: int) -> None:
        """``done`` of ``total`` finalists scored again on further folds (a plain line when due)."""
        now = self.clock()
        if done == 0:  # a call starts: its rate is its own
            self.rescore_began = now
            return
        if self.bar is not None:
            self.bar.set_postfix_str(f"rescoring the finalists: {done} of {total}")
        elif self.lines and self._due():
            left = _seconds_left(done, total - done, now - self.rescore_began)
            self._print(f"{self.label}: scoring the sets that could be served again on further folds: {done} of "
                        f"{total}, {now - self.started:.0f} s since training began, about {left:.0f} s left")

    def close(self, done: bool = True) -> None:
        """Close the bar, or print the last line (how many sets were trained, and how fast) --
        unless the build did not finish (``done=False``): its caller says what happened."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        elif self.lines and self.trained and done:
            elapsed = self.clock() - self.started
            what = (f"screened {self.trained} feature sets and trained {self.fully} fully" if self.fully
                    else f"trained {self.trained} feature sets")
            print(f"{self.label}: {what} in {elapsed:.0f} s", file=self.stream, flush=True)
            self.lines = False


def _seconds_left(done: int, to_go: int, spent: float) -> float:
    """Seconds ``to_go`` more parts take at the rate of ``done`` parts in ``spent`` seconds."""
    return max(0, to_go) * max(1e-9, spent) / done


def sets_in_cache(cache, key: str | None) -> int:
    """Sets already in the expansion cache under ``key`` (0 without a cache or a key)."""
    if cache is None or key is None or not os.path.isdir(cache):
        return 0
    from ..cache import ExpansionStore

    with ExpansionStore(cache, key) as store:
        return len(store)
