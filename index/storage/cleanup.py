"""Removing what a save leaves behind: remains of killed saves and versions no longer kept.

Called by :func:`~.writer.save_index` while it holds ``.writer.lock``, so no other save owns
anything removed here. A version is removed only if no reader pins it: the save takes
``LOCK_EX | LOCK_NB`` on the version's pin (readers hold ``LOCK_SH``, :mod:`.versions`) and renames
the directory to ``.trash-Z`` while holding it, so a reader either pinned the version first (and
it stays) or finds it gone and resolves ``current`` again. Everything here is best effort: what
fails to go now is removed by the next save.

Nothing is followed through a link: a leftover or a "version" that is a symbolic link is
unlinked (its target untouched), a pin is opened with ``O_NOFOLLOW | O_NONBLOCK``, and
``shutil.rmtree`` removes directories without following the links inside them.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
import stat

from .layout import NEXT_PREFIX, PIN, TMP_PREFIX, TRASH_PREFIX, version_number, versions

__all__ = ["remove_leftovers", "remove_old_versions"]


def _remove(path: str) -> None:
    """Remove a directory tree, or unlink anything else (a link is removed, not followed)."""
    try:
        is_dir = stat.S_ISDIR(os.lstat(path).st_mode)
        if is_dir:
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass  # gone already, or removed by the next save


def remove_leftovers(root: str) -> None:
    """Remove every ``.tmp-*``, ``.trash-*`` and ``.current-*`` entry: no live save owns one."""
    for entry in os.listdir(root):
        if entry.startswith((TMP_PREFIX, TRASH_PREFIX, NEXT_PREFIX)):
            _remove(os.path.join(root, entry))


def _remove_version(root: str, name: str) -> None:
    """Delete a version unless a reader pins it."""
    vdir = os.path.join(root, name)
    if not stat.S_ISDIR(os.lstat(vdir).st_mode):
        _remove(vdir)  # a link or a file under a version's name: no reader can pin it
        return
    try:
        fd = os.open(os.path.join(vdir, PIN), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        fd = None  # no pin, or not a file a reader would pin
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
    were never published: orphans of killed saves. ``current`` itself is never removed.
    """
    before = version_number(previous) if previous else 0
    listed = [(n, name) for n, name in versions(root) if name != current]
    orphans = [name for n, name in listed if n > before]
    published = [name for n, name in listed if n <= before]
    for name in orphans + published[: max(0, len(published) - (keep - 1))]:
        try:
            _remove_version(root, name)
        except OSError:
            pass  # best effort: the next save tries again
