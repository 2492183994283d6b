"""PolyDom's stored form: the index as JSON-able metadata and flat numeric arrays, and back."""

from __future__ import annotations

import math

import numpy as np

from polydom.lattice import FeatureSpace

from .cascade import Cascades
from .costcurve import CostCurve
from .state import IndexState

__all__ = ["encode", "decode"]


def encode(index):
    """An ``IndexState`` of ``index``: the shared header, then the skylines, the trained sets with
    their standard errors (NaN where none was reported), the prefix chains and the cascades."""
    offsets = np.zeros(len(index.skylines) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(s) for s in index.skylines])
    meta = index.state_header()
    classes, cascade_arrays = index.cascades.to_state()
    meta["cascade_classes"] = classes
    chains = index.chains
    arrays = {
        "candidates": np.array(index.candidates, dtype=np.int64),
        "candidate_accuracy": np.array(index.candidate_accuracy, dtype=np.float64),
        "bounds": np.array(index.bounds, dtype=np.float64),
        "skyline_offsets": offsets,
        "skyline_ids": np.array([c for s in index.skylines for c in s], dtype=np.int64),
        "explored_masks": np.array(list(index.explored), dtype=np.int64),
        "explored_accuracy": np.array(list(index.explored.values()), dtype=np.float64),
        "explored_std_error": np.array([index.std_error.get(m, math.nan) for m in index.explored], dtype=np.float64),
        "chain_masks": np.array(list(chains), dtype=np.int64),
        "chain_offsets": np.cumsum([0] + [len(o) for o in chains.values()], dtype=np.int64),
        "chain_features": np.array([i for o in chains.values() for i in o], dtype=np.int64),
        **cascade_arrays,
    }
    return IndexState(meta, arrays, index.models)


def decode(cls, state):
    """Inverse of :func:`encode`; arrays added after the first format (standard errors, chains,
    cascades) may be absent, and then the index has none."""
    meta, arrays = state.meta, state.arrays
    lo, hi = meta["domain"]
    offsets = arrays["skyline_offsets"].tolist()
    ids = arrays["skyline_ids"].tolist()
    masks = arrays["explored_masks"].tolist()
    se = arrays.get("explored_std_error")
    return cls(
        FeatureSpace(meta["features"]), [CostCurve(c) for c in meta["costs"]], (float(lo), float(hi)),
        arrays["candidates"].tolist(), arrays["candidate_accuracy"].tolist(), arrays["bounds"].tolist(),
        [ids[a:b] for a, b in zip(offsets, offsets[1:])],
        models=state.models, explored=dict(zip(masks, arrays["explored_accuracy"].tolist())),
        stats=meta.get("stats"), params=meta.get("params"),
        std_error={} if se is None else {m: v for m, v in zip(masks, se.tolist()) if v == v},
        chains=_chains(arrays), cascades=Cascades.from_state(meta.get("cascade_classes"), arrays),
    )


def _chains(arrays) -> dict[int, tuple[int, ...]]:
    if "chain_masks" not in arrays:
        return {}
    offsets = arrays["chain_offsets"].tolist()
    flat = arrays["chain_features"].tolist()
    return {m: tuple(flat[a:b]) for m, a, b in zip(arrays["chain_masks"].tolist(), offsets, offsets[1:])}
