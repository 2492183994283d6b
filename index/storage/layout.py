"""The directory an index lives in: the names of its entries, its versions and its ``current`` pointer.

Layout of an index at ``PATH``
------------------------------
::

    PATH/
        current          symlink naming the published version, e.g. "v00000007"
        v00000006/       an older version, kept (``keep``) for processes still using it
        v00000007/       one complete LMDB environment: data.mdb and pin (versions written
                         before polydom stopped using LMDB's lock file also hold lock.mdb)
        .writer.lock     flock'd by a save: saves are serialised
        .tmp-<hex>/      a save in progress, or the remains of a killed one
        .trash-<hex>/    a version being deleted
        .current-<hex>   a new pointer just before it is renamed onto ``current``

A version directory is written once, fsync'd, published by renaming a new symlink onto
``current``, and never written again (:mod:`.writer`). Readers resolve ``current`` and pin the
version it names (:mod:`.versions`); the records inside a version are described in
:mod:`.records`. ``current`` is the only link polydom creates or follows, and only to a bare
version name (no path), so it cannot lead out of the directory; a version, ``pin``, data file
or lock file that is a link is refused.

POSIX only (symlinks, directory fsync; the pins and the writer lock use ``fcntl.flock``).
"""

from __future__ import annotations

import os
import re

from .errors import IndexFormatError

__all__ = [
    "CURRENT", "WRITER_LOCK", "PIN", "TMP_PREFIX", "TRASH_PREFIX", "NEXT_PREFIX",
    "version_name", "version_number", "is_version", "is_ours", "versions", "read_current",
    "fsync_file", "fsync_dir",
]

CURRENT = "current"
WRITER_LOCK = ".writer.lock"
PIN = "pin"
TMP_PREFIX, TRASH_PREFIX, NEXT_PREFIX = ".tmp-", ".trash-", ".current-"
_VERSION = re.compile(r"v(\d{8,})")


def version_name(number: int) -> str:
    """The directory name of version ``number``.

    >>> version_name(7)
    'v00000007'
    """
    return f"v{number:08d}"


def version_number(name: str) -> int:
    """Inverse of :func:`version_name`; ``ValueError`` for a name that is not a version."""
    m = _VERSION.fullmatch(name)
    if m is None:
        raise ValueError(f"{name!r} is not a version name")
    return int(m.group(1))


def is_version(name: str) -> bool:
    return _VERSION.fullmatch(name) is not None


def is_ours(entry: str) -> bool:
    """Whether ``entry`` may appear in an index directory (anything else makes it foreign)."""
    return entry in (CURRENT, WRITER_LOCK) or is_version(entry) or entry.startswith((TMP_PREFIX, TRASH_PREFIX, NEXT_PREFIX))


def versions(root: str) -> list[tuple[int, str]]:
    """Version directories under ``root`` as ``(number, name)``, ascending."""
    return sorted((version_number(entry), entry) for entry in os.listdir(root) if is_version(entry))


def read_current(root: str) -> str:
    """The version name ``current`` points to.

    Raises
    ------
    IndexFormatError
        No ``current``, or it is not a symlink to a version name.
    """
    try:
        name = os.readlink(os.path.join(root, CURRENT))
    except FileNotFoundError:
        raise IndexFormatError(
            f"{root} is not a polydom index (it has no published version: {CURRENT!r} is missing)"
        ) from None
    except OSError:
        raise IndexFormatError(f"{root} is not a polydom index ({CURRENT!r} is not a version pointer)") from None
    if not is_version(name):
        raise IndexFormatError(f"{root}: {CURRENT!r} points to {name!r}, which is not a version of this index")
    return name


def fsync_file(path: str, flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str) -> None:
    """Make the entries of directory ``path`` (creations, renames) durable."""
    fsync_file(path, os.O_RDONLY | os.O_DIRECTORY)
