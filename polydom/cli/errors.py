"""The command line's exceptions: a usage error (exit status 2) and an interruption (130)."""

from polydom.lattice.errors import PolydomError

__all__ = ["UsageError", "Interrupted", "SpecError", "SizesError"]


class UsageError(PolydomError, ValueError):
    """The command line cannot be used as given; exit status 2."""


class Interrupted(PolydomError):
    """A command stopped by Ctrl-C, saying what was kept; exit status 130.

    ``str(exc)`` is printed after ``interrupted; ``.
    """


class SpecError(UsageError):
    """SPEC does not name a usable object, or an option does not apply to it (exit status 2)."""


class SizesError(PolydomError, ValueError):
    """A ``--sizes`` file that cannot be read as sizes (the message names the file and line)."""
