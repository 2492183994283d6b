"""The root of polydom's exception hierarchy, as the index and its storage layer import it.

:class:`PolydomError` is defined at the bottom of the stack (:mod:`polydom.lattice.errors`, which
imports nothing) so that every layer can derive from it; this module and :mod:`polydom.errors`
re-export that same class.
"""

from polydom.lattice.errors import PolydomError, PolydomWarning

__all__ = ["PolydomError", "PolydomWarning", "QueryError", "QueryTypeError",
           "BackendError", "FeatureTimeout", "ExtrapolationWarning", "TheoremViolation"]


class QueryError(PolydomError, ValueError):
    """A size or budget that is not a valid query: NaN, negative, infinite size, outside the domain."""


class QueryTypeError(PolydomError, TypeError):
    """A size or budget that is not a real number (a string, a complex number, an array where one is
    expected)."""


class BackendError(PolydomError, TypeError):
    """A class registered as a backend does not implement the backend contract in full."""


class FeatureTimeout(PolydomError):
    """Raised by ``compute(name, deadline)`` when the feature did not finish by ``deadline``:
    the walk answers with the sets already computed (the module docstring, *trying past the
    guard*)."""


class ExtrapolationWarning(PolydomWarning):
    """A lookup at a size where the cost curves were not measured (they are extrapolated there)."""


class TheoremViolation(PolydomError, AssertionError):
    """``validate=True`` found a stored skyline that is wrong: a Theorem 3.13 verdict that
    disagrees with a recomputation, or a set that beats the skyline somewhere in the domain."""
