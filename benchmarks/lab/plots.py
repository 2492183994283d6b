"""PNG figures for the demo report (matplotlib, Agg backend: no display needed).

Every figure keeps its legend outside the data (beside or below the axes), draws zero-height
bars as a visible outline labelled 0, and puts its y-axis on the range where the curves differ.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

from polydom.demo import stats
from .settings import CASCADE, SPECULATIVE, PLAIN, PRIMARY, TIES

__all__ = ["draw_all", "plot_cost_curves", "plot_accuracy_vs_budget", "plot_violations_by_size",
           "plot_accuracy_by_size", "plot_features_by_size", "plot_expansions", "plot_accuracy_vs_cost"]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")  # "tight" keeps legends placed outside the axes
    import matplotlib.pyplot as plt

    plt.close(fig)
    return os.fspath(path)


def _side(size: float) -> str:
    s = int(round(np.sqrt(size)))
    return f"{s}x{s}"


def _zoom(curves: Sequence[np.ndarray], floor: float) -> tuple[float, float]:
    """y-limits holding every value above ``floor`` with a margin: the range where curves differ."""
    values = np.concatenate([np.asarray(c, dtype=float) for c in curves])
    upper = values[values > floor]
    if not len(upper):
        return 0.0, 1.0
    lo, hi = float(upper.min()), float(upper.max())
    pad = max(0.01, 0.08 * (hi - lo))
    return max(0.0, lo - pad), min(1.0, hi + pad)


def plot_cost_curves(fits: Mapping, path, *, served_sizes: Sequence[int] = (),
                     title: str = "Measured feature costs and fitted curves") -> str:
    """Measured times (dots) and the fitted curve of each feature, on log-log axes, so that costs
    growing at different rates show as different slopes and their crossings are visible."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.0, 5.0))
    colors = plt.cm.tab10(np.linspace(0, 1, 10))
    lo = min(float(f.sizes.min()) for f in fits.values())
    hi = max(float(f.sizes.max()) for f in fits.values())
    grid = np.geomspace(lo * 0.9, hi * 1.1, 200)
    for k, (name, fit) in enumerate(fits.items()):
        color = colors[k % 10]
        ax.scatter(fit.sizes, np.maximum(fit.seconds, 1e-7) * 1e3, s=5, alpha=0.25, color=color)
        ax.plot(grid, np.maximum(fit.curve_values(grid), 1e-7) * 1e3, color=color, lw=1.6, label=name)
    for s in served_sizes:
        ax.axvline(s, color="0.6", lw=0.6, ls=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("item size n (pixels, log scale; dotted: the served sizes)")
    ax.set_ylabel("extraction time (ms, log scale)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="feature")
    return _save(fig, path)


def plot_accuracy_vs_budget(budgets: Sequence[float], estimates: Mapping[str, Sequence], path, *,
                            chance: float, reference: str | None = None,
                            differences: Mapping[str, Sequence] | None = None,
                            title: str = "Held-out accuracy vs budget (all sizes)") -> str:
    """Left: accuracy ± 1 standard error per backend, the y-axis on the band above chance where
    they differ. Right: each backend's paired difference from ``reference``, ± 2 standard errors."""
    plt = _pyplot()
    panels = 2 if differences else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.2 * panels, 4.6), squeeze=False)
    markers = "osD^v<>"
    # Backends that give the same answers would hide each other: each is drawn a little to the side.
    shift = lambda k: np.asarray(budgets) * 1e3 * (1 + 0.04 * (k - (len(estimates) - 1) / 2))  # noqa: E731
    ax = axes[0, 0]
    for k, (name, est) in enumerate(estimates.items()):
        x = shift(k)
        v = np.array([e.value for e in est])
        se = np.array([e.se for e in est])
        ax.plot(x, v, marker=markers[k % len(markers)], ms=4, lw=1.4, label=name, color=f"C{k}")
        ax.fill_between(x, v - se, v + se, alpha=0.18, color=f"C{k}")
    lo, hi = _zoom([[e.value for e in est] for est in estimates.values()], chance + 0.05)
    ax.set_ylim(lo, hi)
    ax.set_xscale("log")
    ax.set_xlabel("budget per image (ms, log scale; backends drawn slightly apart)")
    ax.set_ylabel("accuracy (band: ± 1 standard error)")
    ax.set_title(f"accuracy; y-axis zoomed above chance ({chance:.2f}):\nlower points are off the axis")
    ax.grid(True, which="both", alpha=0.25)
    if differences:
        ax = axes[0, 1]
        for k, (name, est) in enumerate(estimates.items()):
            if name == reference:
                continue
            x = shift(k)
            d = np.array([e.value for e in differences[name]])
            se = np.array([e.se for e in differences[name]])
            ax.plot(x, d, marker=markers[k % len(markers)], ms=4, lw=1.4, color=f"C{k}")
            ax.fill_between(x, d - stats.Z * se, d + stats.Z * se, alpha=0.15, color=f"C{k}")
        ax.axhline(0.0, color="k", lw=0.8)
        finite = [abs(e.value) + stats.Z * e.se for est in differences.values() for e in est
                  if np.isfinite(e.value) and np.isfinite(e.se)]
        # The useful range is set by the differences near zero; a backend far behind goes off the axis.
        span = float(np.clip(np.percentile(finite, 75) if finite else 0.1, 0.02, 1.0))
        ax.set_ylim(-span * 1.1, span * 1.1)
        ax.set_xscale("log")
        ax.set_xlabel("budget per image (ms, log scale)")
        ax.set_ylabel(f"accuracy minus {reference}'s")
        ax.set_title(f"paired difference from {reference}\n(band: ± {stats.Z:g} standard errors; "
                     "outside it the gap is significant)")
        ax.grid(True, which="both", alpha=0.25)
    fig.suptitle(title)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(5, len(labels)), fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def plot_accuracy_vs_cost(points: Mapping[str, tuple[Sequence[float], Sequence]], path, *, chance: float,
                          title: str = "Held-out accuracy vs mean measured extraction time") -> str:
    """Per backend, one point per budget: the mean measured extraction time per item (x, log
    scale) and the accuracy ± 1 standard error (y), joined in budget order, so that a backend
    reaching the same accuracy for less time lies to the left."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.2, 4.6))
    markers = "osD^v<>"
    kept = []
    for k, (name, (seconds, est)) in enumerate(points.items()):
        x = np.asarray(seconds, dtype=float) * 1e3
        v = np.array([e.value for e in est])
        se = np.array([e.se for e in est])
        spent = x > 0  # budgets where nothing was computed have no place on a log axis
        ax.errorbar(x[spent], v[spent], yerr=se[spent], marker=markers[k % len(markers)], ms=4, lw=1.4, capsize=2,
                    label=name, color=f"C{k}")
        kept.append(v[spent])
    lo, hi = _zoom(kept, chance + 0.05)
    ax.set_ylim(lo, hi)
    ax.set_xscale("log")
    ax.set_xlabel("mean measured extraction time per image (ms, log scale); one point per budget")
    ax.set_ylabel("accuracy (bars: ± 1 standard error)")
    ax.grid(True, which="both", alpha=0.25)
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def _bars(ax, x, values, width, label, color):
    """Bars whose zero values stay visible: an outline at the axis and a "0" above it."""
    values = np.asarray(values, dtype=float)
    bars = ax.bar(x, values, width, label=label, color=color, edgecolor=color, linewidth=0.8)
    top = max(1e-9, float(np.nanmax(values)) if len(values) else 1.0)
    for xi, v in zip(x, values):
        if v == 0:
            ax.bar(xi, top * 0.012, width, fill=False, edgecolor=color, linewidth=1.0)
            ax.text(xi, top * 0.02, "0", ha="center", va="bottom", fontsize=7, color=color)
    return bars


def plot_violations_by_size(sizes: Sequence[int], rates: Mapping[str, Sequence[float]], path, *,
                            title: str = "Answers over budget by item size (all budgets)") -> str:
    """Grouped bars: per size, the share of (item, budget) answers whose measured extraction time
    exceeded the budget, per backend."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    names = list(rates)
    width = 0.8 / max(1, len(names))
    x = np.arange(len(sizes))
    top = max([max(np.asarray(v, dtype=float) * 100) for v in rates.values()] + [1.0])
    for k, name in enumerate(names):
        values = np.asarray(rates[name], dtype=float) * 100
        _bars(ax, x + (k - (len(names) - 1) / 2) * width, values, width, name, f"C{k}")
    ax.set_ylim(0, top * 1.15)
    ax.set_xticks(x, [_side(s) for s in sizes])
    ax.set_xlabel("item size")
    ax.set_ylabel("answers over budget (%)")
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.25)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, path)


def plot_accuracy_by_size(budgets: Sequence[float], per_size: Mapping[int, Sequence], path, *, chance: float,
                          title: str) -> str:
    """One line per item size: accuracy ± 1 standard error vs budget."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    x = np.asarray(budgets) * 1e3
    for k, (size, est) in enumerate(per_size.items()):
        v = np.array([e.value for e in est])
        se = np.array([e.se for e in est])
        ax.plot(x, v, marker="o", ms=3, lw=1.3, label=_side(size), color=f"C{k}")
        ax.fill_between(x, v - se, v + se, alpha=0.15, color=f"C{k}")
    lo, hi = _zoom([[e.value for e in est] for est in per_size.values()], chance + 0.05)
    ax.set_ylim(lo, hi)
    ax.set_xscale("log")
    ax.set_xlabel("budget per image (ms, log scale)")
    ax.set_ylabel("accuracy (band: ± 1 standard error)")
    ax.set_title(title + f"\n(y-axis zoomed above chance, {chance:.2f})")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, title="size", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, path)


def plot_features_by_size(shares: Mapping[str, Mapping[float, np.ndarray]], features: Sequence[str],
                          sizes: Sequence[int], path, *, title: str = "Features computed, by item size") -> str:
    """Heat maps, one row per backend and one column per budget: the share of the items of each
    size for which each feature was computed."""
    plt = _pyplot()
    names = list(shares)
    budgets = list(next(iter(shares.values())))
    fig, axes = plt.subplots(len(names), len(budgets), squeeze=False, sharex=True, sharey=True,
                             figsize=(2.6 * len(budgets) + 1.6, (0.3 * len(features) + 0.9) * len(names) + 0.8))
    image = None
    for row, name in enumerate(names):
        for col, budget in enumerate(budgets):
            ax = axes[row, col]
            image = ax.imshow(shares[name][budget], vmin=0, vmax=1, cmap="Blues", aspect="auto")
            ax.set_xticks(range(len(sizes)), [_side(s) for s in sizes], rotation=45, fontsize=7)
            ax.set_yticks(range(len(features)), features, fontsize=7)
            ax.set_title(f"{name}, {budget * 1e3:g} ms", fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.colorbar(image, ax=axes.ravel().tolist(), fraction=0.025, pad=0.02, label="share of items computing it")
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
    ax.set_ylim(0, max(values) * 1.12)
    ax.set_ylabel("feature sets")
    ax.set_title(title)
    ax.tick_params(axis="x", labelsize=8)
    return _save(fig, path)


def _feature_shares(grid, planner, names, sizes, unique) -> np.ndarray:
    """Per budget, feature and size: the share of the items of that size whose answer computed the feature."""
    used = np.zeros((len(grid.budgets), len(names), len(unique)))
    for b in range(len(grid.budgets)):
        for j, s in enumerate(unique):
            keys = grid.keys[b, sizes == s]
            for key in np.unique(keys):
                share = float(np.mean(keys == key))
                for f in planner.plan(int(key)).names:
                    used[b, names.index(f), j] += share
    return used


def draw_all(r: dict, out) -> dict:
    """Every figure of the report for the results ``r`` of :func:`lab.job.run_demo`; paths by name."""
    grids, sizes, pictures, budgets = r["grids"], r["test_sizes"], r["test_pictures"], r["budgets"]
    unique = r["unique_sizes"]
    primary = r["fitted"][PRIMARY]
    acc = {n: stats.accuracy(g.correct, pictures) for n, g in grids.items()}
    diffs = {n: stats.difference(g.correct, grids[PRIMARY].correct, pictures) for n, g in grids.items()}
    path = lambda name: os.path.join(out, f"{name}.png")  # noqa: E731
    names = list(primary.feature_names_)
    g = grids[PRIMARY]
    shown_backends = [n for n in (PRIMARY, TIES) if n in grids]
    used = {n: _feature_shares(grids[n], r["fitted"][n].planner_, names, sizes, unique) for n in shown_backends}
    # Up to five budgets: spread over those where something is computed, and where the answers
    # differ most between the sizes.
    total = sum(u for u in used.values())
    spread = (total.max(axis=2) - total.min(axis=2)).sum(axis=1)
    busy = np.flatnonzero(total.sum(axis=(1, 2)) > 0)
    shown = [int(np.argmax(spread))]
    if len(busy):
        shown += busy[np.round(np.linspace(0, len(busy) - 1, 4)).astype(int)].tolist()
    shown = sorted(set(shown))[:5]
    figures = {}
    if CASCADE in grids:
        figures["accuracy_vs_cost"] = plot_accuracy_vs_cost(
            {n: (grids[n].measured.mean(axis=1), acc[n]) for n in (PRIMARY, CASCADE)}, path("accuracy_vs_cost"),
            chance=r["chance"])
    return figures | {
        "cost_curves": plot_cost_curves(primary.cost_fits_, path("cost_curves"), served_sizes=unique),
        "accuracy_vs_budget": plot_accuracy_vs_budget(budgets, acc, path("accuracy_vs_budget"), chance=r["chance"],
                                                      reference=PRIMARY, differences=diffs),
        "features_by_size": plot_features_by_size({n: {budgets[b]: used[n][b] for b in shown} for n in used}, names,
                                                  unique, path("features_by_size")),
        "violations_by_size": plot_violations_by_size(
            unique, {n: [float((gr.measured[:, sizes == s] > gr.budgets[:, None]).mean()) for s in unique]
                     for n, gr in grids.items()}, path("violations_by_size")),
        "accuracy_by_size": plot_accuracy_by_size(
            budgets, {s: stats.accuracy(g.correct[:, sizes == s], pictures[sizes == s]) for s in unique},
            path("accuracy_by_size"), chance=r["chance"], title=f"{PRIMARY}: held-out accuracy vs budget per size"),
        "expansions": plot_expansions(
            {n: m.fit_stats_["trained"] + m.fit_stats_["reused"] for n, m in r["fitted"].items() if n not in (TIES, PLAIN, SPECULATIVE)},
            2 ** len(r["features"]), path("expansions")),
    }
