"""The ``polydom`` command line: ``inspect`` and ``lookup`` a saved index; other commands plug in.

Usage::

    polydom inspect PATH [--json] [--ranges N]
    polydom lookup PATH --size N --budget C [--json]
    polydom build | recost | demo ...     (see polydom.buildcmd, polydom.recostcmd, polydom.demo)

A command is a name, a one-line help, ``configure(parser)`` declaring its arguments and
``run(args) -> int``. Register one with :func:`add_command`, or with :func:`add_lazy_command`
naming a module that defines ``configure`` and ``run`` -- that module is imported only when its
command runs, so ``polydom lookup`` never pays for what another command imports::

    add_lazy_command("recost", "re-measure feature costs and republish", "polydom.recostcmd")

Errors a user can cause (a bad path, a damaged index, a bad number) exit with status 1 and one
line on stderr; usage errors exit with status 2, also on one line.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
from collections.abc import Callable
from typing import NamedTuple

__all__ = ["main", "add_command", "add_lazy_command", "describe_index"]


class _Command(NamedTuple):
    help: str
    configure: Callable[[argparse.ArgumentParser], None] | None
    run: Callable[[argparse.Namespace], int] | None
    module: str | None


_COMMANDS: dict[str, _Command] = {}


def add_command(name: str, help: str, configure: Callable, run: Callable) -> None:
    """Register subcommand ``name``: ``configure(parser)`` adds its arguments, ``run(args)`` returns the exit status."""
    _COMMANDS[name] = _Command(help, configure, run, None)


def add_lazy_command(name: str, help: str, module: str) -> None:
    """Register subcommand ``name`` implemented by ``module.configure`` and ``module.run``, imported on use."""
    _COMMANDS[name] = _Command(help, None, None, module)


def _resolve(command: _Command) -> tuple[Callable, Callable]:
    if command.module is None:
        return command.configure, command.run
    module = importlib.import_module(command.module)
    return module.configure, module.run


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


# ----------------------------------------------------------------------------------- formatting


def _number(x: float) -> str:
    if math.isinf(x):
        return "inf"
    return f"{x:.6g}"


def _interval(lo: float, hi: float, last: bool) -> str:
    """Ranges are half-open except the last, which is closed at a finite domain end."""
    return f"[{_number(lo)}, {_number(hi)}{']' if last and math.isfinite(hi) else ')'}"


def _names(features) -> str:
    return ", ".join(sorted(features)) or "(none)"


def _table(header: list[str], rows: list[list[str]], indent: str = "  ") -> str:
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows)]
    lines = [header] + rows
    return "\n".join(indent + "  ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines)


def _jsonable_float(x: float):
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")


_COUNT_LABELS = {
    "features": "features", "explored": "explored sets", "candidates": "candidates", "ranges": "ranges",
    "skyline_entries": "skyline entries", "models": "models",
}


def _entry(index, mask: int, accuracy: float, cost: float) -> dict:
    return {"features": sorted(index.space.frozenset(mask)), "accuracy": accuracy, "key": mask, "cost": cost}


def describe_index(index) -> dict:
    """What ``polydom inspect`` shows, as JSON-able data, from ``index.summary()``.

    Keys: ``path``, ``version``, ``backend``, ``domain``, ``counts``, ``features`` (name,
    coefficients, readable cost expression), ``params``, ``stats``; for an index whose summary
    has ``bounds`` (PolyDom) also ``bounds`` and ``ranges`` (per range its interval and skyline:
    features, accuracy, key, cost at the range's start); for one whose summary has ``n0``
    (Greedy) ``skyline`` (its prefix skyline, costs at ``n0``).
    """
    from polydom.index.store import store_of

    summary = index.summary()
    details = summary["details"]
    store = store_of(index)
    lo, hi = index.domain
    info = {
        "path": store.path if store else None,
        "version": store.version if store else None,
        "backend": summary["backend"],
        "domain": [lo, _jsonable_float(hi)],
        "counts": {"features": len(summary["features"]), "explored": summary["trained"]},
        "features": [
            {"name": name, "coefficients": list(curve.coefficients), "cost": str(curve.expression())}
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
                "to": _jsonable_float(bounds[r + 1] if r + 1 < len(bounds) else hi),
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
        f"domain         {_interval(lo, float(hi), last=True)}",
        f"counts         {counts}",
        "",
        "features",
        _table(["name", "cost (seconds at size n)"], [[f["name"], f["cost"]] for f in info["features"]]),
    ]

    def skyline_table(entries, size) -> str:
        rows = [[str(i), _number(e["accuracy"]), _number(e["cost"]), _names(e["features"])] for i, e in enumerate(entries)]
        return _table(["#", "accuracy", f"cost@{_number(size)}", "features"], rows, indent="    ")

    if "ranges" in info:
        out += ["", "bounds (range starts)", "  " + ", ".join(_number(b) for b in info["bounds"])]
        ranges = info["ranges"]
        shown = ranges if max_ranges is None else ranges[:max_ranges]
        for r, rng in enumerate(shown):
            out += ["", f"range {r}: {_interval(rng['from'], float(rng['to']), r == len(ranges) - 1)}"]
            out.append(skyline_table(rng["skyline"], rng["from"]))
        if len(shown) < len(ranges):
            out += ["", f"... {len(ranges) - len(shown)} more ranges (--ranges to show more)"]
    elif "skyline" in info:
        out += ["", f"skyline (costs at n0 = {_number(info['n0'])}; one range)", skyline_table(info["skyline"], info["n0"])]
    return "\n".join(out)


# ------------------------------------------------------------------------------------- commands


def _configure_inspect(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="index directory (written by index.save)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--ranges", type=int, default=None, metavar="N", help="show the skylines of the first N ranges only")


def _run_inspect(args: argparse.Namespace) -> int:
    import polydom

    if args.ranges is not None and args.ranges < 0:
        raise ValueError(f"--ranges must be >= 0, got {args.ranges}")
    info = describe_index(polydom.load(args.path))
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print(_format_inspect(info, args.ranges))
    return 0


def _configure_lookup(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="index directory (written by index.save)")
    parser.add_argument("--size", type=float, required=True, metavar="N", help="item size n")
    parser.add_argument("--budget", type=float, required=True, metavar="C", help="time budget c (same unit as the costs)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _run_lookup(args: argparse.Namespace) -> int:
    import polydom
    from polydom.index.store import store_of

    index = polydom.load(args.path)
    choice = index.lookup(args.size, args.budget)
    has_model = choice.key in index.models  # reads the key only: no model is loaded
    if args.json:
        print(json.dumps({
            "features": sorted(choice.features), "accuracy": choice.accuracy, "cost": choice.cost,
            "key": choice.key, "model": has_model, "size": args.size, "budget": args.budget,
            "version": store_of(index).version,
        }))
    else:
        rows = [
            ("features", _names(choice.features)),
            ("accuracy", _number(choice.accuracy)),
            ("cost", f"{_number(choice.cost)}  (budget {_number(args.budget)} at size {_number(args.size)})"),
            ("model", "stored" if has_model else "none"),
        ]
        print("\n".join(f"{label:<9} {value}" for label, value in rows))
    return 0


add_command("inspect", "features, cost curves, counts, bounds and the skyline of each range", _configure_inspect, _run_inspect)
add_command("lookup", "the most accurate feature set within a budget at a size", _configure_lookup, _run_lookup)
add_lazy_command("build", "precompute an index from a build script (SPEC) and publish it", "polydom.buildcmd")
add_lazy_command("demo", "the main job on embedded real images: precompute, serve, write a report", "polydom.demo")
add_lazy_command("recost", "re-measure a saved classifier's feature costs here and republish it, training nothing",
                 "polydom.recostcmd")


# ----------------------------------------------------------------------------------------- main


def _build_parser(chosen: str | None) -> argparse.ArgumentParser:
    from polydom import __version__

    parser = _Parser(prog="polydom", description="Cost-sensitive prediction indexes: inspect and query them.")
    parser.add_argument("--version", action="version", version=f"polydom {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in _COMMANDS.items():
        p = sub.add_parser(name, help=command.help, description=command.help)
        if name == chosen:  # only the command that runs is configured (and, if lazy, imported)
            try:
                configure, run = _resolve(command)
            except ImportError as exc:
                parser.error(f"the {name} command is unavailable: {exc}")
            configure(p)
            p.set_defaults(_run=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``polydom`` command line; returns the exit status."""
    from polydom.index.store import StoreError

    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    args = _build_parser(chosen if chosen in _COMMANDS else None).parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except BrokenPipeError:  # `polydom inspect PATH | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (StoreError, ValueError, TypeError, OSError) as exc:
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(f"polydom {args.command}: error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
