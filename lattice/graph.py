"""The explored lattice as a networkx Hasse diagram, for inspection and plots."""

from __future__ import annotations

from collections.abc import Iterable

from .explorer import Exploration

__all__ = ["lattice_graph"]


def lattice_graph(exploration: Exploration, candidates: Iterable[int] = (), *, full: bool = False):
    """Hasse diagram of the explored lattice.

    Nodes are masks, with attributes ``features`` (tuple of names), ``size``, ``status``
    (``"candidate"``, ``"expanded"``, ``"pruned"`` or ``"unvisited"``) and ``accuracy`` (expanded
    sets only). An edge ``u -> v`` joins ``u`` to each parent ``v = u + one feature``.

    Parameters
    ----------
    exploration : Exploration
    candidates : iterable of int
        Masks that became candidates (marked ``"candidate"``; they are also expanded).
    full : bool, default False
        Include every set of the lattice, marking the ones never reached ``"unvisited"``;
        otherwise only expanded and pruned sets appear.

    Returns
    -------
    networkx.DiGraph
    """
    import networkx as nx

    space = exploration.space
    cand = set(candidates)
    nodes = set(space.all_masks()) if full else set(exploration.accuracy) | exploration.pruned
    g = nx.DiGraph()
    for m in sorted(nodes):
        if m in cand:
            status = "candidate"
        elif m in exploration.accuracy:
            status = "expanded"
        elif m in exploration.pruned:
            status = "pruned"
        else:
            status = "unvisited"
        attrs = {"features": space.sorted_names(m), "size": m.bit_count(), "status": status}
        if m in exploration.accuracy:
            attrs["accuracy"] = exploration.accuracy[m]
        g.add_node(m, **attrs)
    for m in nodes:
        for p in space.parents(m):
            if p in nodes:
                g.add_edge(m, p)
    return g
