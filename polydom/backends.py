"""The one table of index backends: each name, the class that serves and loads it, and how to
build it.

Every place that accepts a backend name (``polydom.build``, the classifier, the build command,
loading a stored index) asks this table; nothing else compares backend names. A backend enters
the table through :func:`register_backend`, which refuses a class that does not implement the
backend contract (:class:`~polydom.index.protocol.CostSensitiveIndex`) in full, so serving calls
that contract without probing an index for what it can do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from polydom.greedy.build import build_greedy
from polydom.greedy.index import GreedyIndex
from polydom.index.baselines import PolyDomIndexAll
from polydom.index.build import build_polydom
from polydom.index.errors import BackendError
from polydom.index.protocol import check_backend
from polydom.index.skyline import PolyDomIndex

__all__ = ["Backend", "BackendSpec", "BACKENDS", "buildable", "backend_spec", "index_class", "register_backend"]


@dataclass(frozen=True)
class Backend:
    """One backend.

    Attributes
    ----------
    name : str
        The tag ``polydom.build(backend=...)`` takes and a stored index carries.
    index_class : type
        The index, a :class:`~polydom.index.protocol.CostSensitiveIndex` implementing the contract.
    builder : callable or None
        Builds it from validated inputs, ``builder(space, curves, recorder, *, domain, serving,
        **options)``, and stores ``serving`` (a :class:`~polydom.index.serving.params.ServingParams`
        or None) and ``requires`` (when an option) in the index's params as it builds them; None
        for indexes that are only derived from another (the paper's baselines), which can be
        loaded but not built by name.
    options : tuple of str
        The keyword options of :func:`polydom.build` this backend uses.
    fixed : mapping
        Options the builder always receives (the Greedy variants share a builder and differ
        by the tag they are built under).
    """

    name: str
    index_class: type
    builder: Callable | None
    options: tuple[str, ...]
    fixed: Mapping = field(default_factory=lambda: MappingProxyType({}))

    def load_class(self) -> type:
        """The class that rebuilds a stored index of this backend."""
        return self.index_class

    def build(self, space, curves, recorder, *, domain, serving=None, **options):
        """Build the index with :attr:`builder`; ``serving`` is what its walks read."""
        if self.builder is None:
            raise ValueError(f"backend {self.name!r} is derived from a built index and cannot be built by name")
        return self.builder(space, curves, recorder, domain=domain, serving=serving, **self.fixed, **options)


#: The former name of :class:`Backend`.
BackendSpec = Backend

#: Every registered backend by name, in registration order.
BACKENDS: dict[str, Backend] = {}


def register_backend(backend: Backend) -> Backend:
    """Add ``backend`` to the table, after checking that its index class implements the backend
    contract in full (:func:`~polydom.index.protocol.check_backend`).

    Raises
    ------
    BackendError
        The class lacks part of the contract, the builder is not callable, or the name is taken.
    """
    check_backend(backend.index_class)
    if backend.builder is not None and not callable(backend.builder):
        raise BackendError(f"backend {backend.name!r}: the builder must be callable, got {backend.builder!r}")
    if not isinstance(backend.name, str) or not backend.name or backend.name in BACKENDS:
        raise BackendError(f"backend name {backend.name!r} is empty or already registered")
    BACKENDS[backend.name] = backend
    return backend


_COMMON_OPTIONS = ("measured_range", "extrapolate")
_POLYDOM_OPTIONS = ("alpha", "e", "sandwich", "candidate_alpha", "validate", "tolerance", "prefix_chains", "reference_size",
                    "scores", "requires", "search") + _COMMON_OPTIONS
_GREEDY_OPTIONS = ("n0", "lambdas", "requires") + _COMMON_OPTIONS
_FIXED_GRID_OPTIONS = ("n0", "requires") + _COMMON_OPTIONS

for _backend in (
    Backend("polydom", PolyDomIndex, build_polydom, _POLYDOM_OPTIONS),
    Backend("polydom-index-all", PolyDomIndexAll, None, ()),
    Backend("greedy", GreedyIndex, build_greedy, _GREEDY_OPTIONS, MappingProxyType({"backend": "greedy"})),
    # The single-sequence variants fix their λ grid, so they take no lambdas.
    Backend("greedy-acc", GreedyIndex, build_greedy, _FIXED_GRID_OPTIONS, MappingProxyType({"backend": "greedy-acc"})),
    Backend("greedy-cost", GreedyIndex, build_greedy, _FIXED_GRID_OPTIONS, MappingProxyType({"backend": "greedy-cost"})),
):
    register_backend(_backend)


def buildable() -> tuple[str, ...]:
    """Names ``polydom.build`` accepts, in table order."""
    return tuple(name for name, spec in BACKENDS.items() if spec.builder is not None)


def backend_spec(name) -> Backend:
    """The buildable backend called ``name``, or one ``ValueError`` listing the choices."""
    spec = BACKENDS.get(name) if isinstance(name, str) else None
    if spec is None or spec.builder is None:
        raise ValueError(f"backend must be one of {buildable()}, got {name!r}")
    return spec


def index_class(tag: str) -> type:
    """The class that rebuilds a stored index with backend ``tag``; ``KeyError`` naming the known tags."""
    try:
        return BACKENDS[tag].load_class()
    except KeyError:
        raise KeyError(f"unknown index backend {tag!r}; known: {sorted(BACKENDS)}") from None
