"""Plain-text helpers the commands share: numbers, feature lists, aligned tables."""

from __future__ import annotations

import argparse
import math

__all__ = ["number", "interval", "names", "table", "jsonable_float", "comma_separated_ints"]


def number(x: float) -> str:
    """Six significant digits; ``inf`` spelled out."""
    if math.isinf(x):
        return "inf"
    return f"{x:.6g}"


def interval(lo: float, hi: float, last: bool) -> str:
    """Ranges are half-open except the last, which is closed at a finite domain end."""
    return f"[{number(lo)}, {number(hi)}{']' if last and math.isfinite(hi) else ')'}"


def names(features) -> str:
    """Sorted feature names, or ``(none)`` for the empty set."""
    return ", ".join(sorted(features)) or "(none)"


def table(header: list[str], rows: list[list[str]], indent: str = "  ") -> str:
    """Left-aligned columns, two spaces apart."""
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows)]
    lines = [header] + rows
    return "\n".join(indent + "  ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines)


def jsonable_float(x: float):
    """``x``, or ``"inf"``/``"-inf"``, which JSON cannot hold as numbers."""
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")


def dumps(value, **options) -> str:
    """Strict JSON for ``--json`` output: a float that is not finite becomes the string
    ``"inf"``, ``"-inf"`` or ``"nan"`` (JSON has no such numbers; Python's ``Infinity`` is
    refused by strict parsers), tuples lists and numpy scalars plain numbers.

    >>> dumps({"budget": float("inf"), "cost": 1.5})
    '{"budget": "inf", "cost": 1.5}'
    """
    import json

    from polydom.index.base import jsonable

    return json.dumps(jsonable(value), allow_nan=False, **options)


def comma_separated_ints(text: str) -> tuple[int, ...]:
    """An argparse ``type``: ``"16,32"`` -> ``(16, 32)``."""
    try:
        return tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
