"""The demo report's figures: on-time accuracy against budget per size range, and the late
shares of the real pass against the replayed ones. Drawn with matplotlib (the ``images`` extra)
into PNG files beside the report; none is drawn where matplotlib is missing."""

from __future__ import annotations

import os

import numpy as np

__all__ = ["draw_figures"]


def draw_figures(out: str, r) -> list[tuple[str, str]]:
    """The figures of :class:`~polydom.demo.job.DemoResult` ``r`` written into ``out``, as
    ``(file name, caption)`` pairs; empty without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    budgets_ms = np.asarray(r.settings.budgets, dtype=float) * 1e3
    figures = []
    ranges = len(r.range_names)
    fig, axes = plt.subplots(1, ranges, figsize=(4.2 * ranges, 3.6), sharey=True, squeeze=False)
    for k, name in enumerate(r.range_names):
        ax = axes[0, k]
        rows = r.ranges == k
        for variant, served in r.replayed.items():
            ax.plot(budgets_ms, served.correct[:, rows].mean(axis=1), marker="o", label=variant)
        ax.axhline(r.chance, color="grey", linestyle=":", linewidth=1, label="majority class")
        ax.set_xscale("log")
        ax.set_title(name)
        ax.set_xlabel("budget (ms)")
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("accuracy on time (replayed)")
    axes[0, -1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "on-time-accuracy.png"), dpi=110)
    plt.close(fig)
    figures.append(("on-time-accuracy.png", "Accuracy on time against the budget, per size range and variant "
                                            "(replayed clock; a late answer counts as wrong)."))
    if r.real:
        fig, ax = plt.subplots(figsize=(4.8, 4.4))
        top = 0.0
        for variant, served in r.real.items():
            replayed = r.replayed[variant].late[:, r.real_items]
            for k in range(ranges):
                rows = r.ranges[r.real_items] == k
                if not rows.any():
                    continue
                x, y = replayed[:, rows].mean(axis=1), served.late[:, rows].mean(axis=1)
                top = max(top, float(x.max()), float(y.max()))
                ax.scatter(x, y, s=18, label=f"{variant}, {r.range_names[k]}")
        top = max(top, 0.05) * 1.1
        ax.plot([0, top], [0, top], color="grey", linewidth=1)
        ax.set_xlim(0, top)
        ax.set_ylim(0, top)
        ax.set_xlabel("late share, replayed")
        ax.set_ylabel("late share, real")
        ax.legend(fontsize=6)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "late-shares.png"), dpi=110)
        plt.close(fig)
        figures.append(("late-shares.png", "Each cell's late share served for real against the same cell "
                                           "replayed (one point per budget, size range and variant)."))
    return figures
