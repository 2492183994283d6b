"""Keep freed memory in the process, so that serving large images does not stall on fresh pages.

At natural sizes a feature allocates tens of megabytes per call (a 3-megapixel RGB image as
floats is 72 MB). glibc's allocator serves blocks that large from fresh ``mmap`` regions and
returns them on ``free``, so every call touches new pages; with transparent huge pages the
kernel may stall the thread while it makes them. The thread's CPU clock does not see the stall,
the wall clock does, and an answer is late. :func:`keep_freed_memory` asks the allocator to
serve large blocks from its heap and keep what is freed, so a service's memory is warm after its
first requests (``docs/decisions/serving-memory.md``).
"""

from __future__ import annotations

import ctypes
import ctypes.util

__all__ = ["keep_freed_memory"]

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_MAX = -4

#: The heap keeps up to this much freed memory at its top instead of returning it (the largest
#: value mallopt accepts).
_KEEP = 2**31 - 1


def keep_freed_memory() -> bool:
    """Make this process's allocator serve large blocks from its heap and keep freed memory.

    Process-wide and not undone: call it once, at a service's start. It uses glibc's
    ``mallopt``; elsewhere it does nothing.

    Returns
    -------
    bool
        Whether the allocator took the settings (False where the C library is not glibc).
    """
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    settings = ((_M_MMAP_MAX, 0), (_M_TRIM_THRESHOLD, _KEEP), (_M_TOP_PAD, 64 << 20))
    return all(mallopt(option, value) == 1 for option, value in settings)
