"""The demo's report: a recommendation first, then the evidence behind it.

Accuracies are *on time*: an answer whose measured extraction time exceeded its budget counts as
wrong. Standard errors are over held-out pictures (:mod:`polydom.demo.stats`); PolyDom and
Greedy answer the same items, so they are compared paired.
"""

from __future__ import annotations

import collections
import datetime

import numpy as np

from . import stats
from .markdown import ms, pct, table

__all__ = ["write_report", "recommendation"]

#: Replayed and real late shares that differ by more than this are called out.
LATE_GAP = 0.02


def _budget(seconds: float) -> str:
    return f"{ms(seconds)} ms" if seconds < 1 else f"{seconds:g} s"


def recommendation(r) -> list[str]:
    """Which backend to use at which budgets, what it costs, and how often it was late."""
    budgets = r.settings.budgets
    polydom, greedy = r.replayed["PolyDom"], r.replayed["Greedy"]
    diffs = stats.difference(polydom.correct, greedy.correct, r.held_out_pictures)
    behind = [b for b, d in zip(budgets, diffs) if d.value < 0 and d.significant()]
    ahead = [b for b, d in zip(budgets, diffs) if d.value > 0 and d.significant()]
    acc = stats.accuracy(polydom.correct, r.held_out_pictures)
    fit_p, fit_g = r.fit_seconds["PolyDom"], r.fit_seconds["Greedy"]
    lines = []
    if not behind:
        lines.append(f"**Use PolyDom, the default, at every budget from {_budget(budgets[0])} to "
                     f"{_budget(budgets[-1])}.** It is never significantly behind Greedy on time, and ahead at "
                     f"{len(ahead)} of {len(budgets)} budgets"
                     + (f" ({', '.join(_budget(b) for b in ahead)})." if ahead else "."))
    else:
        lines.append(f"**Use PolyDom, the default, except at {', '.join(_budget(b) for b in behind)}**, where "
                     f"Greedy is significantly more accurate on time; PolyDom is ahead at {len(ahead)} of "
                     f"{len(budgets)} budgets.")
    lines.append(f"On time, PolyDom answers {acc[0].value:.2f} of the images correctly at {_budget(budgets[0])} "
                 f"and {acc[-1].value:.2f} at {_budget(budgets[-1])} (chance: {r.chance:.2f}).")
    lines.append(f"The cost: PolyDom's fit took {fit_p:.0f} s, Greedy's {fit_g:.0f} s "
                 f"(PolyDom trained {_trained(r.fit_stats['PolyDom'])}). The index is "
                 f"{r.index_bytes / 1e6:.1f} MB on disk; a lookup takes {r.lookup_seconds * 1e6:.1f} µs.")
    worst_replayed = float(polydom.late.mean(axis=1).max())
    worst_real = float(r.real.late.mean(axis=1).max())
    lines.append(f"Late answers: at most {pct(worst_replayed)}% of the images at any budget on the replayed "
                 f"clock, at most {pct(worst_real)}% served for real ({r.real.late.shape[1]} images per budget).")
    gaps = late_gaps(r)
    if gaps:
        n = r.real.late.shape[1]
        lines.append("**The replayed and real passes disagree on late answers** at " + "; ".join(
            f"{_budget(b)} ({pct(rep)}% replayed, {pct(real)}% real: {round(real * n)} of {n})"
            for b, rep, real in gaps)
            + ". The real pass times each answer as a service would; plan with it.")
    else:
        lines.append(f"The replayed and real passes agree on late answers within {pct(LATE_GAP)} points at "
                     "every budget.")
    return lines


def late_gaps(r) -> list[tuple[float, float, float]]:
    """``(budget, replayed late share, real late share)`` on the items served both ways, where the
    two differ by more than :data:`LATE_GAP`."""
    replayed = r.replayed["PolyDom"].late[:, r.real_items].mean(axis=1)
    real = r.real.late.mean(axis=1)
    return [(b, float(a), float(c)) for b, a, c in zip(r.settings.budgets, replayed, real) if abs(a - c) > LATE_GAP]


def _trained(fit_stats: dict) -> str:
    fully = fit_stats.get("fully_trained")
    screened = fit_stats.get("trained", 0) + fit_stats.get("reused", 0)
    if fully is None:
        return f"{screened} feature sets"
    return f"{fully} feature sets fully of {screened} scored"


def served_sets(r, budget_positions) -> str:
    """The set PolyDom served most often per size range, at each of ``budget_positions``."""
    served = r.replayed["PolyDom"].features
    rows = []
    for name_i, name in enumerate(r.range_names):
        items = np.flatnonzero(r.ranges == name_i)
        row = [name]
        for b in budget_positions:
            counts = collections.Counter(served[b][i] for i in items)
            features, n = counts.most_common(1)[0]
            row.append(f"{', '.join(features) or '(none: majority class)'} ({pct(n / len(items))}%)")
        rows.append(row)
    header = ["size"] + [_budget(r.settings.budgets[b]) for b in budget_positions]
    return table(header, rows)


def cells(r) -> str:
    """On-time accuracy per (size range, budget), both backends, with late shares."""
    rows = []
    for name_i, name in enumerate(r.range_names):
        items = np.flatnonzero(r.ranges == name_i)
        pictures = r.held_out_pictures[items]
        p = stats.accuracy(r.replayed["PolyDom"].correct[:, items], pictures)
        g = stats.accuracy(r.replayed["Greedy"].correct[:, items], pictures)
        d = stats.difference(r.replayed["PolyDom"].correct[:, items], r.replayed["Greedy"].correct[:, items],
                             pictures)
        late = r.replayed["PolyDom"].late[:, items].mean(axis=1)
        for b, budget in enumerate(r.settings.budgets):
            mark = "**" if d[b].significant() else ""
            rows.append([name, _budget(budget), len(items), p[b].text(), g[b].text(),
                         f"{mark}{d[b].text(signed=True)}{mark}", pct(late[b])])
    return table(["size", "budget", "items", "PolyDom", "Greedy", "PolyDom − Greedy", "PolyDom late %"], rows)


def late_table(r) -> str:
    """Per (size range, budget): late shares replayed and real on the same items, and the real
    answers' whole wall time."""
    replayed = r.replayed["PolyDom"].late[:, r.real_items]
    ranges = r.ranges[r.real_items]
    rows = []
    for name_i, name in enumerate(r.range_names):
        cols = np.flatnonzero(ranges == name_i)
        for b, budget in enumerate(r.settings.budgets):
            wall = r.real_wall[b, cols]
            rows.append([name, _budget(budget), len(cols), pct(replayed[b, cols].mean()),
                         pct(r.real.late[b, cols].mean()), ms(float(np.median(wall))), ms(float(np.max(wall))),
                         f"{r.real.correct[b, cols].mean():.2f}"])
    return table(["size", "budget", "items", "late % replayed", "late % real", "median answer (ms)",
                  "slowest answer (ms)", "on time, real"], rows)


def decoding(r) -> str:
    """What decoding the held-out JPEG files cost, per size range, and the curve serving checks."""
    if r.decode_seconds is None:
        return ""
    rows = []
    for name_i, name in enumerate(r.range_names):
        items = np.flatnonzero(r.ranges == name_i)
        seconds = r.decode_seconds[items]
        rows.append([name, len(items), ms(float(np.median(seconds))), ms(float(np.quantile(seconds, 0.9)))])
    fit = r.decode_fit
    curve = "none was fitted" if fit is None else f"`{fit.curve}` seconds at n pixels, guard {fit.guard:.2f}"
    return ("## Decoding\n\nThe held-out images came as JPEG bytes (quality 90). Every budget covers the whole "
            "answer: decoding, then the features. Serving decodes an image only if the decode curve fitted on "
            f"the training files, times its guard, fits the budget ({curve}); the features get what the decode "
            "leaves.\n\n" + table(["size", "images", "median decode (ms)", "0.9 quantile (ms)"], rows) + "\n")


def write_report(path, r) -> str:
    """Write the report of :class:`~polydom.demo.job.DemoResult` ``r`` to ``path``; returns the path."""
    s = r.settings
    n_budgets = len(s.budgets)
    picks = sorted({0, n_budgets // 2, n_budgets - 1})
    fit = "; ".join(f"{name} {sec:.1f} s" for name, sec in r.fit_seconds.items())
    parts = [
        f"# polydom demo: {s.dataset}\n",
        f"{r.n_train} training images, {len(r.held_out_sizes)} held out; features {', '.join(s.features)}; "
        f"budgets {', '.join(_budget(b) for b in s.budgets)} "
        + ("per image's whole answer, decoding its JPEG file included. " if s.encoded
           else "of feature extraction per image. ") +
        f"Written {datetime.date.today().isoformat()} on {r.machine} in {r.wall_seconds:.0f} s.\n",
        "## Recommendation\n",
        "\n\n".join(recommendation(r)) + "\n",
        "## What PolyDom served, by image size\n",
        "The feature set served most often in each size range (share of the range's images):\n",
        served_sets(r, picks) + "\n",
        "## Accuracy on time\n",
        "Replayed clock: each held-out image's features were computed and timed once, one image at a "
        "time, and every request replays those times. A late answer counts as wrong. ± one standard "
        "error over pictures; the difference is paired, in bold where it exceeds two standard errors.\n",
        cells(r) + "\n",
        "## Late answers, replayed and real\n",
        f"{r.real.late.shape[1]} held-out images ({s.real_per_range} per size range) were served again at "
        "every budget through the index loaded from disk, their features computed now. *Late* means the "
        "measured extraction" + (", decoding included," if s.encoded else "") + " exceeded the budget; the "
        "answer's wall time adds the lookup, the prediction and Python's overhead.\n",
        late_table(r) + "\n",
        decoding(r),
        "## Fit and deploy\n",
        f"Fit wall time: {fit}. The PolyDom index was saved to `index/` and loaded back; "
        + ("the loaded index served exactly the sets the fitted classifier served."
           if r.round_trip else "**the loaded index served other sets than the fitted classifier.**") + "\n",
        table(["stage", "seconds"], [[k, f"{v:.1f}"] for k, v in r.stages.items()]) + "\n",
        "Reproduce: `polydom demo --dataset " + s.dataset + "`. The comparison of every backend and serving "
        "variant is `python -P benchmarks/backends.py` in the source tree.\n",
    ]
    text = "\n".join(parts)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return str(path)
