"""Published versions as this process reads them: pinned, opened without following links, fork-safe.

Pinning
-------
A reader resolves ``current`` once per load or refresh, then *pins* that version: it opens
``vN/pin``, takes ``flock(LOCK_SH | LOCK_NB)`` on it and checks that ``vN/pin`` is still the file
it locked. A save deletes a version only after taking ``LOCK_EX | LOCK_NB`` on the same pin and
moves the directory away while holding it (:mod:`.cleanup`), so a pinned version is never
deleted -- whether the reader is this process, another one, or a forked child (the pin's file
description, and so the lock, is shared with children). If a version vanishes between resolving
and pinning, :func:`open_version` returns None and the reader resolves ``current`` again. Readers
never wait: the shared lock is non-blocking and a save holds an exclusive one only on versions
``current`` no longer names.

Opening
-------
Nothing inside an index directory is followed through a link: the version directory is opened
with ``O_NOFOLLOW | O_DIRECTORY`` and its ``pin`` and ``data.mdb`` relative to it with
``O_NOFOLLOW``, and each must be a regular file -- a FIFO, a device or a socket is refused
before anything reads from it (opening is non-blocking, so a FIFO cannot stall a load either).

The data file is read through :class:`~.pages.LmdbFile` -- positioned reads of pages checked
before use -- never through LMDB's memory map, so a damaged or crafted page becomes an
:class:`IndexFormatError` rather than a SIGBUS. LMDB's lock file is never opened: a published
version has no writer, ever.

Identity
--------
A version is identified by what it is, not by its name alone: every fresh build publishes
``v00000001``, so a deploy that swaps a new build's directory into place reuses the name. An
:class:`OpenVersion` records the ``(st_dev, st_ino)`` of its directory and of its data file
(:attr:`OpenVersion.identity`) and holds descriptors of both, so neither inode can be reused by
another file while it lives. The process's cache is keyed by the index path, the name and the
directory's identity, and a cached version is reused only while its data file is still the one
in that directory; :meth:`OpenVersion.is_at` tells a refresh whether ``current`` still leads to it.

Sharing and fork
----------------
There is one :class:`OpenVersion` per version directory in a process, shared by every index
loaded from it and released (descriptors closed, pin dropped) when the last user is gone. It
holds only file descriptors, which ``pread`` uses without a file position, so a forked child
reads through them as they are -- no environment to reopen, no transaction of another thread to
inherit. The locks that serialise model decoding are replaced in the child.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import threading
import weakref

from .errors import IndexFormatError
from .layout import PIN
from .pages import LmdbFile

__all__ = ["OpenVersion", "open_version", "open_regular", "DATA_FILE"]

DATA_FILE = "data.mdb"
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def open_regular(name: str, dir_fd: int, where: str) -> int | None:
    """A read-only descriptor of the regular file ``name`` in ``dir_fd``; None if it is missing.

    Raises
    ------
    IndexFormatError
        ``name`` is a symbolic link, a FIFO, a socket, a device or a directory, or cannot be opened.
    """
    try:
        fd = os.open(name, _OPEN_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise IndexFormatError(f"{where}: {name!r} is a symbolic link; polydom follows no links inside an index") from None
        raise IndexFormatError(f"{where}: {name!r} cannot be opened ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise IndexFormatError(f"{where}: {name!r} is not a regular file")
    return fd


def _open_dir(root: str, name: str, where: str) -> int | None:
    """A descriptor of version directory ``root/name``, refusing links; None if it is gone."""
    try:
        return os.open(os.path.join(root, name), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            try:
                link = stat.S_ISLNK(os.lstat(os.path.join(root, name)).st_mode)
            except OSError:
                link = False
            what = "a symbolic link; polydom follows no links inside an index" if link else "not a directory"
            raise IndexFormatError(f"{where}: the version directory is {what}") from None
        raise IndexFormatError(f"{where}: the version directory cannot be opened ({exc.strerror or exc})") from None


def _same_directory(root: str, name: str, dir_fd: int) -> bool:
    try:
        there = os.stat(os.path.join(root, name), follow_symlinks=False)
    except OSError:
        return False
    held = os.fstat(dir_fd)
    return (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)


def _pin(root: str, name: str, dir_fd: int, where: str) -> int | None:
    """A descriptor holding a shared flock on ``name/pin``; None if the version is gone or going."""
    fd = open_regular(PIN, dir_fd, where)
    if fd is None:
        # A save removes a version by renaming its whole directory away, then deleting it; a
        # directory still in place without its pin was damaged.
        if _same_directory(root, name, dir_fd):
            raise IndexFormatError(f"{where}: the version has no {PIN!r} file (it was not written by polydom)")
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        held = os.fstat(fd)
        there = os.stat(os.path.join(root, name, PIN), follow_symlinks=False)
        if (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino) and _same_directory(root, name, dir_fd):
            return fd
    except (BlockingIOError, FileNotFoundError, NotADirectoryError):
        pass  # a save is deleting this version: the caller resolves ``current`` again
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None


def _release(holder: dict) -> None:
    for key in ("data", "pin", "dir"):
        fd = holder.pop(key, None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


class OpenVersion:
    """One published version as opened by this process: its pin, its data file and a lock.

    Attributes
    ----------
    root, name : str
        The index directory and the version's name in it.
    where : str
        Names the version in error messages.
    file : LmdbFile
        The version's records, read through checked pages.
    lock : threading.RLock
        Held while a model is read and decoded, so each is loaded once.
    identity : tuple of int
        ``(st_dev, st_ino)`` of the version directory, then of its data file. Both are held
        open, so no other directory or file can take these numbers while this object lives.
    """

    def __init__(self, root: str, name: str, dir_fd: int, pin_fd: int, data_fd: int):
        self.root, self.name = root, name
        self.where = f"index at {root} (version {name})"
        held_dir, held_data = os.fstat(dir_fd), os.fstat(data_fd)
        self.identity = (held_dir.st_dev, held_dir.st_ino, held_data.st_dev, held_data.st_ino)
        self.file = LmdbFile(data_fd, self.where)  # raises before this object owns the descriptors
        self.lock = threading.RLock()
        # The finalizer must not hold ``self``; it closes what the holder names.
        self._holder = {"pin": pin_fd, "data": data_fd, "dir": dir_fd}
        weakref.finalize(self, _release, self._holder)

    def is_at(self, root: str, name: str) -> bool:
        """Whether ``root/name`` is still this version's directory, holding this data file.

        False when it is gone, or when another directory or data file took its place (a deploy
        that swapped a new build's directory in).
        """
        try:
            there = os.stat(os.path.join(root, name), follow_symlinks=False)
            data = os.stat(os.path.join(root, name, DATA_FILE), follow_symlinks=False)
        except OSError:
            return False
        return (there.st_dev, there.st_ino, data.st_dev, data.st_ino) == self.identity

    def _holds_data_of(self, dir_fd: int) -> bool:
        """Whether the data file in the directory open as ``dir_fd`` is the one this version reads."""
        try:
            data = os.stat(DATA_FILE, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return False
        return (data.st_dev, data.st_ino) == self.identity[2:]

    def __repr__(self) -> str:
        return f"<OpenVersion {self.where}>"


_LIVE: "weakref.WeakValueDictionary[tuple, OpenVersion]" = weakref.WeakValueDictionary()
_LIVE_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    # Another thread may have held these locks at the fork; the child has only this thread.
    global _LIVE_LOCK
    _LIVE_LOCK = threading.Lock()
    for version in list(_LIVE.values()):
        version.lock = threading.RLock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _open(root: str, name: str, dir_fd: int) -> OpenVersion | None:
    """Pin and open version ``name`` whose directory is open as ``dir_fd``; takes ``dir_fd`` over.

    The descriptor is closed here unless the returned :class:`OpenVersion` holds it.
    """
    where = f"index at {root} (version {name})"
    try:
        pin = _pin(root, name, dir_fd, where)
        if pin is None:
            os.close(dir_fd)
            return None
        try:
            data = open_regular(DATA_FILE, dir_fd, where)
            if data is None:
                raise IndexFormatError(f"{where}: the LMDB data file is missing")
        except BaseException:
            os.close(pin)
            raise
    except BaseException:
        os.close(dir_fd)
        raise
    try:
        return OpenVersion(root, name, dir_fd, pin, data)
    except BaseException:
        _release({"pin": pin, "data": data, "dir": dir_fd})
        raise


def open_version(root: str, name: str) -> OpenVersion | None:
    """Version ``name`` of the index at ``root``, pinned and opened; None if it is gone or going.

    Returns the process's existing :class:`OpenVersion` when it is this very directory with this
    very data file; a directory swapped in under the same name is opened anew (see Identity above).

    Raises
    ------
    IndexFormatError
        The version is there but it is a link, holds something other than regular files, or its
        LMDB file is missing, truncated or damaged.
    """
    where = f"index at {root} (version {name})"
    dir_fd = _open_dir(root, name, where)
    if dir_fd is None:
        return None
    try:
        held = os.fstat(dir_fd)
    except BaseException:
        os.close(dir_fd)
        raise
    key = (os.path.realpath(root), name, held.st_dev, held.st_ino)
    with _LIVE_LOCK:
        version = _LIVE.get(key)
        if version is not None and version._holds_data_of(dir_fd):
            os.close(dir_fd)
            return version
        version = _open(root, name, dir_fd)
        if version is not None:
            _LIVE[key] = version
        return version
