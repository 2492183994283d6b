"""What an interrupted command kept: the trained sets in its expansion cache.

``polydom build --cache`` and ``polydom demo`` commit every trained feature set to an expansion
cache as soon as it is trained, so Ctrl-C loses at most the sets in flight and the next run
resumes. :func:`interrupted` turns a ``KeyboardInterrupt`` into the one line that says so::

    polydom demo: interrupted; 116 sets cached in demo-out/cache/expansions; run again to resume
"""

from __future__ import annotations

import os
import subprocess
import sys

from . import Interrupted

__all__ = ["cached_sets", "interrupted"]

# The cache is still open in this process when Ctrl-C arrives, and an LMDB environment cannot be
# opened twice in one process, so a child process counts its entries (all keys) read-only,
# holding the cache's sidecar lock shared so that no other build writes meanwhile
# (see polydom.cache).
_COUNT = """\
import fcntl, os, sys, lmdb
try:
    lock = os.open(os.path.join(sys.argv[1], sys.argv[2]), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
except OSError:
    lock = None
else:
    fcntl.flock(lock, fcntl.LOCK_SH)
env = lmdb.open(sys.argv[1], readonly=True, lock=False, max_dbs=2, subdir=True)
try:
    db = env.open_db(b"expansions", create=False)
except lmdb.NotFoundError:
    print(0)
else:
    with env.begin(db=db) as txn:
        print(txn.stat(db)["entries"])
"""


def cached_sets(path) -> int | None:
    """Entries of the expansion cache at ``path`` (0 when there is none); None if unreadable."""
    path = os.fspath(path)
    if not os.path.isfile(os.path.join(path, "data.mdb")):
        return 0
    try:
        from polydom.cache import LOCK_FILE

        done = subprocess.run([sys.executable, "-P", "-c", _COUNT, path, LOCK_FILE], capture_output=True, text=True, timeout=30)
        return int(done.stdout.strip()) if done.returncode == 0 else None
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def interrupted(cache, *, kept: bool = True) -> Interrupted:
    """The :class:`~polydom.cli.Interrupted` error for a run stopped while training into ``cache``.

    Parameters
    ----------
    cache : path or None
        The expansion cache directory; None when the run had none.
    kept : bool, default True
        False when the cache was a scratch directory that goes with the run (``--no-cache``).
    """
    if cache is None:
        return Interrupted("nothing was cached (no cache directory); run again with a cache to make runs resumable")
    if not kept:
        return Interrupted("nothing was kept (--no-cache); run again without it to make runs resumable")
    n = cached_sets(cache)
    count = "trained sets are" if n is None else f"{n} set{'' if n == 1 else 's'}"
    return Interrupted(f"{count} cached in {os.fspath(cache)}; run again to resume")
