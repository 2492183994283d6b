"""PNG figures for the demo report (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["plot_cost_curves", "plot_accuracy_vs_budget", "plot_violations_by_size", "plot_accuracy_by_size",
           "plot_expansions"]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    fig.clf()
    import matplotlib.pyplot as plt

    plt.close(fig)
    return os.fspath(path)


def plot_cost_curves(fits: Mapping, path, *, title: str = "Measured feature costs and fitted curves") -> str:
    """Measured times (dots), their per-size quantile (crosses) and the fitted curve, per feature.

    Parameters
    ----------
    fits : mapping of str to polydom.costs.CostFit
    path : str
        PNG file to write.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 5.5))
    colors = plt.cm.tab10(np.linspace(0, 1, 10))
    lo = min(int(f.sizes.min()) for f in fits.values())
    hi = max(int(f.sizes.max()) for f in fits.values())
    grid = np.linspace(0, hi * 1.05, 200)
    for k, (name, fit) in enumerate(fits.items()):
        color = colors[k % 10]
        jitter = 1 + 0.015 * (k - len(fits) / 2)
        ax.scatter(fit.sizes * jitter, fit.seconds * 1e3, s=6, alpha=0.35, color=color)
        sizes, targets = fit.targets()
        ax.scatter(sizes, targets * 1e3, marker="x", s=30, color=color)
        ax.plot(grid, np.maximum(fit.curve_values(grid), 1e-6) * 1e3, color=color, lw=1.5,
                label=f"{name}: {fit.expression()}")
    ax.set_yscale("log")
    ax.set_xlim(0, hi * 1.05)
    ax.set_xlabel("item size n (pixels)")
    ax.set_ylabel("extraction time (ms, log scale)")
    ax.set_title(title + f"\n(dots: timed calls at sizes {lo}..{hi}; x: the quantile each curve covers)")
    ax.legend(fontsize=6.5, loc="lower right", ncol=1)
    ax.grid(True, which="both", alpha=0.25)
    return _save(fig, path)


def plot_accuracy_vs_budget(budgets: Sequence[float], curves: Mapping[str, Sequence[float]], path, *,
                            title: str = "Held-out accuracy vs budget (all sizes)") -> str:
    """One line per backend: accuracy at each budget (log x)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    markers = "osD^v<>"
    for k, (name, acc) in enumerate(curves.items()):
        ax.plot(np.asarray(budgets) * 1e3, acc, marker=markers[k % len(markers)], ms=4, lw=1.4, label=name)
    ax.set_xscale("log")
    ax.set_xlabel("budget per image (ms of feature extraction, log scale)")
    ax.set_ylabel("accuracy")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_violations_by_size(sizes: Sequence[int], rates: Mapping[str, Sequence[float]], path, *,
                            title: str = "Budget violations by item size") -> str:
    """Grouped bars: per size, the share of (item, budget) answers whose measured extraction time
    exceeded the budget, per backend."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    names = list(rates)
    width = 0.8 / max(1, len(names))
    x = np.arange(len(sizes))
    for k, name in enumerate(names):
        ax.bar(x + (k - (len(names) - 1) / 2) * width, np.asarray(rates[name]) * 100, width, label=name)
    ax.set_xticks(x, [f"{int(round(np.sqrt(s)))}x{int(round(np.sqrt(s)))}" for s in sizes])
    ax.set_xlabel("item size")
    ax.set_ylabel("answers over budget (%)")
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.25)
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_accuracy_by_size(budgets: Sequence[float], per_size: Mapping[int, Sequence[float]], path, *,
                          title: str) -> str:
    """One line per item size: accuracy vs budget (the paper's Fig. 11d)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for size, acc in per_size.items():
        side = int(round(np.sqrt(size)))
        ax.plot(np.asarray(budgets) * 1e3, acc, marker="o", ms=3, lw=1.3, label=f"{side}x{side}")
    ax.set_xscale("log")
    ax.set_xlabel("budget per image (ms, log scale)")
    ax.set_ylabel("accuracy")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, title="size")
    return _save(fig, path)


def plot_expansions(counts: Mapping[str, int], naive: int, path, *, title: str = "Feature sets expanded") -> str:
    """Bars: sets each backend trained (or reused) while building, against NaiveExpandAll."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.0))
    names = list(counts) + ["NaiveExpandAll"]
    values = [counts[n] for n in counts] + [naive]
    bars = ax.bar(names, values, color=["C0"] * len(counts) + ["C7"])
    for bar, v in zip(bars, values):
        ax.text(bar.get_x() + bar.get_width() / 2, v, str(v), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("feature sets")
    ax.set_title(title)
    ax.tick_params(axis="x", labelsize=8)
    return _save(fig, path)
