"""``polydom plan PATH --sizes FILE --total-budget S``: one set per item of a batch sharing a total budget.

Plans the batch with ``index.plan_batch`` (:mod:`polydom.index.serving.planning`), prints a summary --
mean accuracy and predicted spend of the plan, against an equal split of the same total -- and
with ``--out`` writes each item's choice as CSV or JSON. The equal split gives every item the
most accurate of the same options costing at most ``total / N``: the plan chooses among the
same sets at the same accuracies, so the gain is the planning's alone (serving through
``lookup`` applies the index's tie rule on top of either). Like ``lookup``, it reads the stored
index only: no model is loaded, and neither scikit-learn nor sympy is imported (``--exact``
imports SciPy for its solver).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys

import numpy as np

from .errors import SizesError  # noqa: F401 - defined with the package's errors
from .files import bounded_lines, open_regular
from .text import dumps, jsonable_float, number

__all__ = ["configure", "run", "read_sizes", "plan_rows", "summarize", "seconds", "table_file", "FIELDS"]

#: The columns of the CSV, and the keys of each item in the JSON. ``key`` is the set's bitmask in
#: the index (``index.space.frozenset(key)`` gives it back); ``features`` its names, sorted.
FIELDS = ("item", "size", "key", "features", "accuracy", "std_error", "cost")
#: Joins feature names in a CSV cell; the ``key`` column is the unambiguous form.
SEPARATOR = ";"


def seconds(text: str) -> float:
    """An argparse ``type``: a number ``>= 0`` (``inf`` allowed), so that a bad one is a usage error."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


def table_file(text: str) -> str:
    """An argparse ``type``: a path ending in ``.csv`` or ``.json``."""
    if os.path.splitext(text)[1].lower() not in (".csv", ".json"):
        raise argparse.ArgumentTypeError(f"must name a .csv or .json file, got {text!r}")
    return text


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="index directory (written by index.save)")
    parser.add_argument("--sizes", required=True, metavar="FILE",
                        help="item sizes: one number per line (blank lines and # comments skipped), or a .npy array")
    parser.add_argument("--total-budget", type=seconds, required=True, metavar="S",
                        help="the batch's total budget (same unit as the costs)")
    parser.add_argument("--exact", action="store_true", help="solve the integer program (scipy.optimize.milp)")
    parser.add_argument("--max-item-budget", type=seconds, default=None, metavar="S",
                        help="no item gets a set costing more than this")
    parser.add_argument("--out", type=table_file, default=None, metavar="FILE",
                        help="write each item's choice to FILE (.csv or .json)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


#: The longest line ``--sizes`` reads: a size is a number, so a longer line is not one.
MAX_LINE = 256


def _file(path) -> tuple:
    """What :mod:`polydom.cli.files` needs to read ``--sizes``: the error, where, and the refusal
    of a file that is not regular (a FIFO or device is refused without blocking on it)."""
    return SizesError, f"--sizes {path}", f"--sizes {path}: not a regular file (a FIFO, device or folder); give a file of sizes"


def _npy_sizes(path) -> list[float]:
    with open_regular(path, *_file(path)) as file:
        if file.read(6) != b"\x93NUMPY":
            raise SizesError(f"--sizes {path}: not a .npy array file (no NumPy header)")
        file.seek(0)
        try:
            arr = np.load(file, allow_pickle=False)  # never unpickle a file given on the command line
        except ValueError as exc:
            raise SizesError(f"--sizes {path}: not a .npy array of numbers ({exc})") from None
    if arr.ndim != 1 or arr.dtype.kind not in "fiu":
        raise SizesError(f"--sizes {path}: expected a 1-D array of numbers, got shape {arr.shape} of {arr.dtype}")
    return arr.astype(float).tolist()


def read_sizes(path) -> list[float]:
    """Sizes from a text file (one number per line) or a ``.npy`` array of numbers, read from a
    regular file only and a line of at most :data:`MAX_LINE` bytes at a time.

    Raises
    ------
    SizesError
        Not a regular file, a line that is not a number or is too long (named by its line number),
        an array that is not 1-D and numeric, or no sizes at all.
    """
    if str(path).endswith(".npy"):
        sizes = _npy_sizes(path)
    else:
        sizes = []
        lines = bounded_lines(path, *_file(path), max_line=MAX_LINE, one_per_line="expected one number per line")
        for line_number, line in lines:
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            try:
                sizes.append(float(text))
            except ValueError:
                raise SizesError(f"--sizes {path}, line {line_number}: {text!r} is not a number") from None
    if not sizes:
        raise SizesError(f"--sizes {path} holds no sizes")
    return sizes


def plan_rows(index, sizes, plan) -> list[dict]:
    """Each item's choice as a dict with the keys :data:`FIELDS` (``std_error`` None where the index
    keeps none for the set)."""
    choices = plan.choices
    return [
        {"item": i, "size": float(size), "key": int(choices.keys[i]),
         "features": sorted(index.space.frozenset(int(choices.keys[i]))),
         "accuracy": float(choices.accuracy[i]), "std_error": choices[i].std_error, "cost": float(choices.cost[i])}
        for i, size in enumerate(sizes)
    ]


def summarize(index, sizes, plan, max_item_budget=None) -> dict:
    """The plan against an equal split of its total: JSON-able numbers.

    The equal split gives each item the most accurate of its options (under ``max_item_budget``)
    costing at most ``total_budget / N``, the cheapest among equals.
    """
    from polydom.index.serving.planning import option_table

    n = len(sizes)
    share = plan.total_budget / n if max_item_budget is None else min(plan.total_budget / n, max_item_budget)
    options = option_table(index, sizes, max_item_budget=max_item_budget)
    fits = options.valid & (options.costs <= share)
    fits[:, 0] = True  # the cheapest option (the empty set, at no cost) whatever the share
    best = np.argmax(np.where(fits, options.accuracy, -np.inf), axis=1)  # first: costs ascend
    rows = np.arange(n)
    equal_accuracy = float(options.accuracy[rows, best].mean())
    return {
        "items": n, "total_budget": jsonable_float(plan.total_budget), "solver": plan.solver,
        "optimal": bool(plan.optimal),
        "plan": {"mean_accuracy": plan.mean_accuracy, "total_cost": plan.total_cost, "mean_cost": plan.mean_cost,
                 "accuracy_bound": jsonable_float(plan.accuracy_bound)},
        "equal_split": {"per_item_budget": jsonable_float(share), "mean_accuracy": equal_accuracy,
                        "total_cost": math.fsum(options.costs[rows, best].tolist())},
        "gain_points": 100 * (plan.mean_accuracy - equal_accuracy),
    }


def _write(path: str, rows: list[dict], summary: dict) -> None:
    kind = os.path.splitext(path)[1].lower()
    if kind == ".json":
        with open(path, "w", encoding="utf-8") as out:
            out.write(dumps({"summary": summary, "items": rows}, indent=1))
            out.write("\n")
    else:
        with open(path, "w", encoding="utf-8", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=FIELDS)
            writer.writeheader()
            for row in rows:
                writer.writerow({**row, "features": SEPARATOR.join(row["features"])})


def _format(summary: dict) -> str:
    plan, equal = summary["plan"], summary["equal_split"]
    solver = summary["solver"] + (", optimal" if summary["optimal"] else "")
    rows = [
        ("items", str(summary["items"])),
        ("budget", f"{number(float(summary['total_budget']))} in total"),
        ("plan", f"mean accuracy {number(plan['mean_accuracy'])}, spend {number(plan['total_cost'])}  ({solver}; "
                 f"no plan above {number(float(plan['accuracy_bound']))})"),
        ("equal", f"mean accuracy {number(equal['mean_accuracy'])}, spend {number(equal['total_cost'])}  "
                  f"({number(float(equal['per_item_budget']))} per item)"),
        ("gain", f"{summary['gain_points']:+.2f} points over the equal split"),
    ]
    return "\n".join(f"{label:<7} {value}" for label, value in rows)


def run(args: argparse.Namespace) -> int:
    import polydom

    sizes = read_sizes(args.sizes)
    index = polydom.load(args.path)
    plan = index.plan_batch(sizes, args.total_budget, max_item_budget=args.max_item_budget, exact=args.exact)
    summary = summarize(index, sizes, plan, args.max_item_budget)
    if args.out is not None:
        _write(args.out, plan_rows(index, sizes, plan), summary)
    print(dumps(summary) if args.json else _format(summary))
    if args.out is not None:
        print(f"wrote {args.out} ({len(sizes)} items)", file=sys.stderr)
    return 0
