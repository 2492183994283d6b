"""``polydom lookup PATH --size N --budget C``: the most accurate feature set within a budget.

Neither scikit-learn nor sympy is imported: the answer comes from the stored index alone, and
whether the set has a model is read from the model table's keys.
"""

from __future__ import annotations

import argparse

from .text import dumps, names, number

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="index directory (written by index.save)")
    parser.add_argument("--size", type=float, required=True, metavar="N", help="item size n")
    parser.add_argument("--budget", type=float, required=True, metavar="C", help="time budget c (same unit as the costs)")
    parser.add_argument("--json", action="store_true",
                        help='print JSON (strict: an infinite budget is written "inf")')


def run(args: argparse.Namespace) -> int:
    import polydom
    from polydom.index.store import store_of

    index = polydom.load(args.path)
    choice = index.lookup(args.size, args.budget)
    has_model = choice.key in index.models  # reads the key only: no model is loaded
    if args.json:
        print(dumps({
            "features": sorted(choice.features), "accuracy": choice.accuracy, "std_error": choice.std_error,
            "cost": choice.cost,
            "key": choice.key, "model": has_model, "size": args.size, "budget": args.budget,
            "version": store_of(index).version,
        }))
    else:
        rows = [
            ("features", names(choice.features)),
            ("accuracy", number(choice.accuracy) + ("" if choice.std_error is None else f" ± {number(choice.std_error)}")),
            ("cost", f"{number(choice.cost)}  (budget {number(args.budget)} at size {number(args.size)})"),
            ("model", "stored" if has_model else "none"),
        ]
        print("\n".join(f"{label:<9} {value}" for label, value in rows))
    return 0
