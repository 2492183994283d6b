"""The one table of index backends: each name, how to build it, and which class loads it.

Every place that accepts a backend name (``polydom.build``, the classifier, the build command,
loading a stored index) asks this table; nothing else compares backend names. Classes and
builders are imported on first use, so serving a PolyDom index never imports the Greedy code.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

__all__ = ["BackendSpec", "BACKENDS", "buildable", "backend_spec", "index_class"]


@dataclass(frozen=True)
class BackendSpec:
    """One backend.

    Attributes
    ----------
    name : str
        The tag ``polydom.build(backend=...)`` takes and a stored index carries.
    index_class : str
        ``"module:Class"`` of the index, a :class:`~polydom.index.protocol.CostSensitiveIndex`.
    builder : str or None
        ``"module:function"`` that builds it from validated inputs, ``builder(space, curves,
        recorder, *, domain, **options)``; None for indexes that are only derived from another
        (the paper's baselines), which can be loaded but not built by name.
    options : tuple of str
        The keyword options of :func:`polydom.build` this backend uses.
    fixed : dict
        Options the builder always receives (the Greedy variants share a builder and differ
        by the tag they are built under).
    """

    name: str
    index_class: str
    builder: str | None
    options: tuple[str, ...]
    fixed: dict = field(default_factory=dict)

    def load_class(self) -> type:
        return _resolve(self.index_class)

    def build(self, space, curves, recorder, *, domain, **options):
        if self.builder is None:
            raise ValueError(f"backend {self.name!r} is derived from a built index and cannot be built by name")
        return _resolve(self.builder)(space, curves, recorder, domain=domain, **self.fixed, **options)


def _resolve(path: str):
    module, attr = path.split(":")
    return getattr(importlib.import_module(module), attr)


_COMMON_OPTIONS = ("measured_range", "extrapolate")
_POLYDOM_OPTIONS = ("alpha", "e", "sandwich", "candidate_alpha", "validate", "tolerance", "prefix_chains", "reference_size",
                    "scores", "requires") + _COMMON_OPTIONS
_GREEDY_OPTIONS = ("n0", "lambdas", "requires") + _COMMON_OPTIONS
_FIXED_GRID_OPTIONS = ("n0", "requires") + _COMMON_OPTIONS
_GREEDY_CLASS, _GREEDY_BUILDER = "polydom.greedy.index:GreedyIndex", "polydom.greedy.build:build_greedy"

BACKENDS: dict[str, BackendSpec] = {
    spec.name: spec
    for spec in (
        BackendSpec("polydom", "polydom.index.skyline:PolyDomIndex", "polydom.index.build:build_polydom", _POLYDOM_OPTIONS),
        BackendSpec("polydom-index-all", "polydom.index.baselines:PolyDomIndexAll", None, ()),
        BackendSpec("greedy", _GREEDY_CLASS, _GREEDY_BUILDER, _GREEDY_OPTIONS, {"backend": "greedy"}),
        # The single-sequence variants fix their λ grid, so they take no lambdas.
        BackendSpec("greedy-acc", _GREEDY_CLASS, _GREEDY_BUILDER, _FIXED_GRID_OPTIONS, {"backend": "greedy-acc"}),
        BackendSpec("greedy-cost", _GREEDY_CLASS, _GREEDY_BUILDER, _FIXED_GRID_OPTIONS, {"backend": "greedy-cost"}),
    )
}


def buildable() -> tuple[str, ...]:
    """Names ``polydom.build`` accepts, in table order."""
    return tuple(name for name, spec in BACKENDS.items() if spec.builder is not None)


def backend_spec(name) -> BackendSpec:
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
