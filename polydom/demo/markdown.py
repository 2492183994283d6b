"""Markdown pieces the report's sections share: tables and the units numbers are printed in."""

from __future__ import annotations

__all__ = ["ms", "us", "pct", "table"]


def ms(seconds: float) -> str:
    """Seconds as milliseconds, three significant digits."""
    return f"{seconds * 1e3:.3g}"


def us(seconds: float) -> str:
    """Seconds as microseconds, three significant digits."""
    return f"{seconds * 1e6:.3g}"


def pct(x: float) -> str:
    """A share as a percentage with one decimal (no sign)."""
    return f"{100 * x:.1f}"


def table(header, rows) -> str:
    """A markdown table."""
    lines = ["| " + " | ".join(str(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
