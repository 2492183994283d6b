"""The ``polydom`` command line: a table of commands, each in a module of this package.

Usage::

    polydom inspect PATH [--json] [--ranges N]        (polydom.cli.inspect)
    polydom lookup PATH --size N --budget C [--json]  (polydom.cli.lookup)
    polydom plan PATH --sizes FILE --total-budget S   (polydom.cli.plan)
    polydom build SPEC --out PATH ...                 (polydom.cli.build)
    polydom recost PATH ...                           (polydom.cli.recost)
    polydom demo --out DIR ...                        (polydom.cli.demo)
    polydom triage PATH SOURCE --k K --total-budget S (polydom.cli.triage)

A command is a name, a one-line help, ``configure(parser)`` declaring its arguments and
``run(args) -> int``. Register one with :func:`add_command`, or with :func:`add_lazy_command`
naming a module that defines ``configure`` and ``run`` -- that module is imported only when its
command runs, so ``polydom lookup`` never pays for what another command imports::

    add_lazy_command("triage", "the K images of a folder or file list most likely positive, within a total budget",
                 "polydom.cli.triage")
add_lazy_command("recost", "re-measure feature costs and republish", "polydom.cli.recost")

Every command follows one convention for errors and exit codes (:data:`CONVENTIONS`, also shown
by ``polydom --help``): a command raises, :func:`main` prints one line on stderr and picks the
status -- :class:`UsageError` 2, :class:`Interrupted` or Ctrl-C 130, a polydom error or a
built-in ``ValueError``/``TypeError``/``OSError`` 1. Anything else is a bug and keeps its
traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from typing import NamedTuple

from .errors import Interrupted, UsageError  # noqa: F401 - defined with the package's errors

__all__ = ["main", "add_command", "add_lazy_command", "UsageError", "Interrupted", "CONVENTIONS"]

#: What ``polydom --help`` says about errors, exit codes and output streams.
CONVENTIONS = """\
exit status:
  0    done
  1    error while working (a bad path, a damaged index, a value the library refuses,
       a failed build); nothing is published
  2    usage error: the command line cannot be used as given (an unknown option, a value
       of the wrong type or out of range, a SPEC that names nothing usable); nothing is done
  130  interrupted (Ctrl-C); what was kept is said, e.g. the trained sets in a cache

errors are one line on stderr:
  polydom COMMAND: error: MESSAGE
  polydom COMMAND: interrupted; WHAT WAS KEPT

results go to stdout; progress and notes to stderr (plain lines when stderr is not a terminal).
--json output is strict JSON: a number that is not finite (an unlimited budget, an unbounded
domain) is written as the string "inf", "-inf" or "nan".
"""


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


add_lazy_command("inspect", "features, cost curves, counts, bounds and the skyline of each range", "polydom.cli.inspect")
add_lazy_command("lookup", "the most accurate feature set within a budget at a size", "polydom.cli.lookup")
add_lazy_command("plan", "one set per item of a batch sharing a total budget, against an equal split",
                 "polydom.cli.plan")
add_lazy_command("build", "precompute an index from a build script (SPEC) and publish it", "polydom.cli.build")
add_lazy_command("demo", "the main job on embedded real images: precompute, serve, write a report", "polydom.cli.demo")
add_lazy_command("triage", "the K images of a folder or file list most likely positive, within a total budget",
                 "polydom.cli.triage")
add_lazy_command("recost", "re-measure a saved classifier's feature costs here and republish it, training nothing",
                 "polydom.cli.recost")


# ----------------------------------------------------------------------------------------- main


def _build_parser(chosen: str | None) -> argparse.ArgumentParser:
    from polydom import __version__

    parser = _Parser(prog="polydom", description="Cost-sensitive prediction indexes: build, inspect and query them.",
                     epilog=CONVENTIONS, formatter_class=argparse.RawDescriptionHelpFormatter)
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


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    """Run the ``polydom`` command line; returns the exit status (see :data:`CONVENTIONS`)."""
    from polydom.errors import PolydomError
    from polydom.index.store import StoreError

    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    args = _build_parser(chosen if chosen in _COMMANDS else None).parse_args(argv)
    where = f"polydom {args.command}"
    try:
        return int(args._run(args) or 0)
    except BrokenPipeError:  # `polydom inspect PATH | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except UsageError as exc:
        print(f"{where}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except Interrupted as exc:
        print(f"{where}: interrupted; {_one_line(exc)}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print(f"{where}: interrupted", file=sys.stderr)
        return 130
    except (PolydomError, StoreError, ValueError, TypeError, OSError) as exc:
        print(f"{where}: error: {_one_line(exc)}", file=sys.stderr)
        return 1
