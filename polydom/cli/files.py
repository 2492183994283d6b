"""Files named on the command line, read with bounds: regular files only, a line at a time.

A FIFO or a device named where a file is expected would block a read or never end; both readers
here refuse anything but a regular file before reading, and read at most ``max_line`` bytes of a
line before judging it, so a file without newlines is never read whole.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator

__all__ = ["open_regular", "bounded_lines"]


def open_regular(path, error: type, where: str, not_regular: str):
    """``path`` opened for binary reading if it is a regular file.

    Raises ``error(f"{where}: <reason>")`` when it cannot be opened, and ``error(not_regular)``
    when it is not a regular file (opened without blocking, so a FIFO is refused at once).
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise error(f"{where}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise error(not_regular)
    return os.fdopen(fd, "rb")


def bounded_lines(path, error: type, where: str, not_regular: str, *, max_line: int,
                  one_per_line: str) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` for each line of the regular file ``path``, decoded as UTF-8.

    Raises ``error`` naming ``where`` and the line for a line over ``max_line`` bytes (``one_per_line``
    says what a line should hold) or one that is not UTF-8, and as :func:`open_regular` does.
    """
    with open_regular(path, error, where, not_regular) as lines:
        for number, raw in enumerate(iter(lambda: lines.readline(max_line + 1), b""), 1):
            if len(raw) > max_line:
                raise error(f"{where}, line {number}: longer than {max_line} bytes; {one_per_line}")
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError:
                raise error(f"{where}, line {number}: not UTF-8 text") from None
