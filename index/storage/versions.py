"""Published versions as this process reads them: pinned, opened read-only, shared, fork-safe.

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
Environments are opened ``readonly=True, lock=False``. LMDB's lock file coordinates readers with
a *writer* (the reader table stops a writer from recycling pages a reader still sees); a
published version has no writer, ever, so there is nothing to coordinate. Hence readers never
block, the reader-slot limit (``max_readers``) does not apply and no stale slot survives a crash.
The known hazard of LMDB -- replacing data files underneath a live lock file, after which new
readers see stale pages -- cannot occur: files are never replaced; a rebuild is a new directory.

LMDB maps the data file, so reading a page past the end of a truncated file would kill the
process with SIGBUS. Before any read the reader checks that the file holds every page LMDB's
meta page claims (LMDB itself refuses page numbers beyond those), which turns truncation into an
:class:`IndexFormatError`.

Sharing and fork
----------------
py-lmdb refuses to open one environment twice in a process, so there is at most one
:class:`OpenVersion` per version directory, shared by every index loaded from it and released
(environment closed, pin dropped) when the last user is gone. An environment must not be used
across ``fork``: lookups never touch LMDB (the index is rebuilt in memory at load), and a model
load in a child first closes the inherited environment (unmapping the child's copy --
``lock=False`` leaves no lock state to disturb) and reopens it.
"""

from __future__ import annotations

import fcntl
import os
import threading
import weakref

import lmdb

from .errors import IndexFormatError
from .layout import PIN
from .records import DATABASES

__all__ = ["OpenVersion", "open_version"]


def _pin(vdir: str) -> int | None:
    """A descriptor holding a shared flock on ``vdir/pin``; None if the version is gone or going."""
    pin = os.path.join(vdir, PIN)
    try:
        fd = os.open(pin, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        held, there = os.fstat(fd), os.stat(pin)
        if (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino):
            return fd
    except (BlockingIOError, FileNotFoundError):
        pass  # a save is deleting this version: the caller resolves ``current`` again
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None


def _open_environment(vdir: str, where: str):
    """Open one version read-only, after checking its data file holds every page LMDB will read."""
    try:
        size = os.stat(os.path.join(vdir, "data.mdb")).st_size
    except OSError:
        raise IndexFormatError(f"{where}: the LMDB data file is missing") from None
    try:
        env = lmdb.open(
            vdir, readonly=True, lock=False, subdir=True, create=False, max_dbs=len(DATABASES), readahead=False,
        )
    except lmdb.Error as exc:
        raise IndexFormatError(f"{where}: not a readable LMDB environment ({exc})") from None
    try:
        needed = (env.info()["last_pgno"] + 1) * env.stat()["psize"]
        if size < needed:
            raise IndexFormatError(f"{where}: the LMDB data file is truncated ({size} bytes, {needed} expected)")
        dbs = {name: env.open_db(name, create=False) for name in DATABASES}
    except lmdb.Error as exc:
        env.close()
        raise IndexFormatError(f"{where}: the LMDB environment is damaged or not a polydom index ({exc})") from None
    except BaseException:
        env.close()
        raise
    return env, dbs


def _release(holder: dict) -> None:
    env = holder.pop("env", None)
    if env is not None:
        try:
            env.close()
        except lmdb.Error:
            pass
    fd = holder.pop("pin", None)
    if fd is not None:
        os.close(fd)


class OpenVersion:
    """One published version as opened by this process: its pin, LMDB environment and lock.

    Attributes
    ----------
    root, name : str
        The index directory and the version's name in it.
    where : str
        Names the version in error messages.
    lock : threading.RLock
        Held while a model is read and decoded, so each is loaded once.
    """

    def __init__(self, root: str, name: str, pin_fd: int):
        self.root, self.name = root, name
        self.dir = os.path.join(root, name)
        self.where = f"index at {root} (version {name})"
        self.lock = threading.RLock()
        env, dbs = _open_environment(self.dir, self.where)
        # The finalizer must not hold ``self``; it closes what the holder names.
        self._holder = {"env": env, "dbs": dbs, "pid": os.getpid(), "pin": pin_fd}
        weakref.finalize(self, _release, self._holder)

    def environment(self):
        """``(env, dbs)`` usable in this process (reopened after a fork)."""
        holder = self._holder
        if holder["pid"] != os.getpid():
            with self.lock:
                if holder["pid"] != os.getpid():
                    inherited, holder["env"] = holder["env"], None
                    if inherited is not None:
                        inherited.close()
                    holder["env"], holder["dbs"] = _open_environment(self.dir, self.where)
                    holder["pid"] = os.getpid()
        return holder["env"], holder["dbs"]

    def __repr__(self) -> str:
        return f"<OpenVersion {self.where}>"


_LIVE: "weakref.WeakValueDictionary[str, OpenVersion]" = weakref.WeakValueDictionary()
_LIVE_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    # Another thread may have held these locks at the fork; the child has only this thread.
    global _LIVE_LOCK
    _LIVE_LOCK = threading.Lock()
    for version in list(_LIVE.values()):
        version.lock = threading.RLock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def open_version(root: str, name: str) -> OpenVersion | None:
    """Version ``name`` of the index at ``root``, pinned and opened; None if it is gone or going.

    Returns the process's existing :class:`OpenVersion` when there is one.

    Raises
    ------
    IndexFormatError
        The version is there but its LMDB environment is missing, truncated or damaged.
    """
    vdir = os.path.join(root, name)
    key = os.path.realpath(vdir)
    with _LIVE_LOCK:
        version = _LIVE.get(key)
        if version is not None:
            return version
        fd = _pin(vdir)
        if fd is None:
            return None
        try:
            version = OpenVersion(root, name, fd)
        except BaseException:
            os.close(fd)
            raise
        _LIVE[key] = version
        return version
