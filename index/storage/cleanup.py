"""Removing what a save leaves behind: remains of killed saves and versions no longer kept.

Called by :func:`~.writer.save_index` while it holds ``.writer.lock``, so no other save owns
anything removed here. A version is removed only if no reader pins it: the save takes
``LOCK_EX | LOCK_NB`` on the version's pin (readers hold ``LOCK_SH``, :mod:`.versions`) and renames
the directory to ``.trash-Z`` while holding it, so a reader either pinned the version first (and
it stays) or finds it gone and resolves ``current`` again. Everything here is best effort: what
fails to go now is removed by the next save.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil

from .layout import NEXT_PREFIX, PIN, TMP_PREFIX, TRASH_PREFIX, version_number, versions

__all__ = ["remove_leftovers", "remove_old_versions"]


def remove_leftovers(root: str) -> None:
    """Remove every ``.tmp-*``, ``.trash-*`` and ``.current-*`` entry: no live save owns one."""
    for entry in os.listdir(root):
        full = os.path.join(root, entry)
        if entry.startswith((TMP_PREFIX, TRASH_PREFIX)):
            shutil.rmtree(full, ignore_errors=True)
        elif entry.startswith(NEXT_PREFIX):
            try:
                os.unlink(full)
            except FileNotFoundError:
                pass


def _remove_version(root: str, name: str) -> None:
    """Delete a version unless a reader pins it."""
    vdir = os.path.join(root, name)
    try:
        fd = os.open(os.path.join(vdir, PIN), os.O_RDONLY)
    except FileNotFoundError:
        fd = None
    trash = os.path.join(root, TRASH_PREFIX + secrets.token_hex(8))
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return
        os.rename(vdir, trash)
    finally:
        if fd is not None:
            os.close(fd)
    shutil.rmtree(trash, ignore_errors=True)


def remove_old_versions(root: str, previous: str | None, current: str, keep: int) -> None:
    """Keep ``current`` and the ``keep - 1`` newest versions published before it.

    Versions numbered above ``previous`` (the pointer before this save) other than ``current``
    were never published: orphans of killed saves.
    """
    before = version_number(previous) if previous else 0
    listed = versions(root)
    orphans = [name for n, name in listed if n > before and name != current]
    published = [name for n, name in listed if n <= before] + [current]
    for name in orphans + published[:-keep]:
        try:
            _remove_version(root, name)
        except OSError:
            pass  # best effort: the next save tries again
