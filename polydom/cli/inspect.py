"""``polydom inspect PATH``: features, cost curves, counts and the skylines of a saved index.

Everything shown comes from the index's ``summary()``; the skylines are listed per range of sizes
for an index whose summary has ``bounds`` (PolyDom), or once at ``n0`` (Greedy).
"""

from __future__ import annotations

import argparse

from . import UsageError
from .text import dumps, interval, jsonable_float, names, number, table

__all__ = ["configure", "run", "describe_index"]

_COUNT_LABELS = {
    "features": "features", "explored": "explored sets", "candidates": "candidates", "ranges": "ranges",
    "skyline_entries": "skyline entries", "models": "models",
}


def _entry(index, mask: int, accuracy: float, cost: float) -> dict:
    entry = {"features": sorted(index.space.frozenset(mask)), "accuracy": accuracy, "key": mask, "cost": cost}
    if mask in index.std_error:
        entry["std_error"] = index.std_error[mask]
    if index.measured:  # ranked by a fit of the scores: the measured one beside it
        entry["measured"] = index.measured_scores.get(mask, accuracy)
    return entry


def _feature_modules(index) -> dict:
    """Feature name -> the module defining it, for an index a classifier saved with its features'
    sources; empty otherwise. Read from the stored metadata: nothing is imported."""
    from polydom.classifier.classifier_state import METADATA_KEY

    data = index.params.get(METADATA_KEY)
    sources = data.get("feature_sources") if isinstance(data, dict) else None
    if not isinstance(sources, list):
        return {}
    return {d["name"]: d["module"] for d in sources
            if isinstance(d, dict) and isinstance(d.get("name"), str) and isinstance(d.get("module"), str)}


def describe_index(index) -> dict:
    """What ``polydom inspect`` shows, as JSON-able data, from ``index.summary()``.

    Keys: ``path``, ``version``, ``backend``, ``domain``, ``counts``, ``features`` (name,
    coefficients, readable cost expression, the defining ``module`` for a saved classifier, the
    steps a feature ``requires`` and ``step: true`` for such a step),
    ``params``, ``stats``; for an index whose summary
    has ``bounds`` (PolyDom) also ``bounds`` and ``ranges`` (per range its interval and skyline:
    features, accuracy, key, cost at the range's start, ``std_error`` when the set has one, and
    ``measured``, the measured score, when the index ranks by a fit of the scores); for one whose
    summary has ``n0``
    (Greedy) ``skyline`` (its prefix skyline, costs at ``n0``).
    """
    from polydom.index.store import store_of

    summary = index.summary()
    details = summary["details"]
    sources = _feature_modules(index)
    requires = (index.params or {}).get("requires") or {}  # the steps features share (polydom.steps)
    steps = {s for needed in requires.values() for s in needed}
    store = store_of(index)
    lo, hi = index.domain
    info = {
        "path": store.path if store else None,
        "version": store.version if store else None,
        "backend": summary["backend"],
        "domain": [lo, jsonable_float(hi)],
        "counts": {"features": len(summary["features"]), "explored": summary["trained"]},
        "features": [
            {"name": name, "coefficients": list(curve.coefficients), "cost": str(curve.expression()),
             **({"module": sources[name]} if name in sources else {}),
             **({"requires": list(requires[name])} if name in requires else {}),
             **({"step": True} if name in steps else {})}
            for name, curve in zip(index.features, index.costs)
        ],
    }
    counts = info["counts"]
    if "bounds" in details:  # sizes split into ranges, one skyline each
        bounds = details["bounds"]
        counts.update(candidates=details["candidates"], ranges=details["ranges"], skyline_entries=details["entries"])
        info["bounds"] = bounds
        info["ranges"] = [
            {
                "from": start,
                "to": jsonable_float(bounds[r + 1] if r + 1 < len(bounds) else hi),
                "skyline": [_entry(index, c.key, c.accuracy, c.cost) for c in index.skyline_at(start)],
            }
            for r, start in enumerate(bounds)
        ]
    elif "n0" in details:  # one skyline, ordered by the costs at n0
        counts["skyline_entries"] = details["entries"]
        info["n0"] = details["n0"]
        info["skyline"] = [_entry(index, e.mask, e.accuracy, e.cost) for e in index.skyline]
    counts["models"] = len(index.models)
    info["params"], info["stats"] = summary["params"], summary["stats"]
    return info


def _format_inspect(info: dict, max_ranges: int | None) -> str:
    lo, hi = info["domain"]
    counts = ", ".join(f"{n} {_COUNT_LABELS.get(k, k)}" for k, n in info["counts"].items())
    out = [
        f"polydom index  {info['path']}  (version {info['version']}, backend {info['backend']})",
        f"domain         {interval(lo, float(hi), last=True)}",
        f"counts         {counts}",
        "",
        "features",
        table(["name", "cost (seconds at size n)", "module"],
              [[f["name"], f["cost"], f.get("module", "")] for f in info["features"]])
        if any("module" in f for f in info["features"]) else
        table(["name", "cost (seconds at size n)"], [[f["name"], f["cost"]] for f in info["features"]]),
    ]

    def skylinetable(entries, size) -> str:
        fitted = any("measured" in e for e in entries)
        errors = any("std_error" in e for e in entries)
        rows = [[str(i), number(e["accuracy"])] + ([number(e.get("measured", e["accuracy"]))] if fitted else [])
                + ([number(e["std_error"]) if "std_error" in e else "-"] if errors else [])
                + [number(e["cost"]), names(e["features"])] for i, e in enumerate(entries)]
        head = (["#", "accuracy"] + (["measured"] if fitted else []) + (["± se"] if errors else [])
                + [f"cost@{number(size)}", "features"])
        return table(head, rows, indent="    ")

    if "ranges" in info:
        out += ["", "bounds (range starts)", "  " + ", ".join(number(b) for b in info["bounds"])]
        ranges = info["ranges"]
        shown = ranges if max_ranges is None else ranges[:max_ranges]
        for r, rng in enumerate(shown):
            out += ["", f"range {r}: {interval(rng['from'], float(rng['to']), r == len(ranges) - 1)}"]
            out.append(skylinetable(rng["skyline"], rng["from"]))
        if len(shown) < len(ranges):
            out += ["", f"... {len(ranges) - len(shown)} more ranges (--ranges to show more)"]
    elif "skyline" in info:
        out += ["", f"skyline (costs at n0 = {number(info['n0'])}; one range)", skylinetable(info["skyline"], info["n0"])]
    return "\n".join(out)



def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="index directory (written by index.save)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--ranges", type=int, default=None, metavar="N", help="show the skylines of the first N ranges only")


def run(args: argparse.Namespace) -> int:
    import polydom

    if args.ranges is not None and args.ranges < 0:
        raise UsageError(f"--ranges must be >= 0, got {args.ranges}")
    info = describe_index(polydom.load(args.path))
    if args.json:
        print(dumps(info, indent=2))
    else:
        print(_format_inspect(info, args.ranges))
    return 0
