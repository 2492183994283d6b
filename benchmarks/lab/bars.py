"""The report's "Cell by cell" section: the primary backend judged where users meet it.

Each (item size, budget) cell is compared on its own (:mod:`lab.cells`): the primary
against the best of its rivals there, the anytime walk against the plain rule and GreedyCost,
budget violations per cell, what confidence cascades save per budget, and what median costs
with a guard buy over worst-case provisioning.
"""

from __future__ import annotations

import os

import numpy as np

from polydom.demo import stats

from . import cells
from .conclusions import side
from polydom.demo.markdown import ms, pct, table
from .settings import CASCADE, CASCADE_SAVING, SPECULATIVE, PLAIN, PRIMARY, RIVALS, WORST_CASE

__all__ = ["section", "VIOLATION_BAR"]

#: The share of answers per cell allowed to overrun the budget.
VIOLATION_BAR = 0.02


def _cells_line(found: list[cells.Cell], what: str) -> str:
    within = sum(c.within(1.0) for c in found)
    behind = [c for c in found if c.behind(2.0)]
    ahead = sum(c.ahead(2.0) for c in found)
    text = (f"{PRIMARY} is within one standard error of {what} in **{within} of {len(found)}** cells, "
            f"more than two behind in {len(behind)}, more than two ahead in {ahead}.")
    missed = [c for c in found if not c.within(1.0)]
    if missed:
        text += " Cells where it is not within one: " + "; ".join(
            f"{side(c.size)} at {ms(c.budget)} ms ({c.rival} {c.gap.text(signed=True)})" for c in missed[:12])
        text += " …" if len(missed) > 12 else ""
    return text + "\n"


def _mean_over_cells(r: dict, names) -> list[list[str]]:
    grids, pictures = r["grids"], r["test_pictures"]
    ref = grids[PRIMARY].correct
    rows = []
    for n in names:
        acc = stats.overall(grids[n].correct, pictures)
        gap = "–" if n == PRIMARY else stats.overall_difference(ref, grids[n].correct, pictures).text(signed=True)
        rows.append([n, acc.text(), gap])
    return rows


def _saving_rows(savings: list[dict]) -> list[list[str]]:
    """Table rows of :func:`cells.cost_saving`: budget, multi-feature share, both costs, saving (all
    answers, then the multi-feature ones), gap."""
    def percent(x):
        return "–" if not np.isfinite(x) else f"{100 * x:.0f}"

    return [[ms(s["budget"]), f"{100 * s['multi']:.0f}", ms(s["reference_cost"]), ms(s["cost"]),
             percent(s["saving"]), percent(s["multi_saving"]), s["gap"].text(signed=True)] for s in savings]


def section(r: dict) -> list[str]:
    """The section's markdown lines (empty when the primary was not run)."""
    grids, sizes, pictures = r["grids"], r["test_sizes"], r["test_pictures"]
    if PRIMARY not in grids:
        return []
    rivals = [n for n in RIVALS if n in grids]
    n_cells = len(r["unique_sizes"]) * len(r["budgets"])
    out = ["## Cell by cell\n",
           f"A cell is one item size and one budget ({n_cells} cells; one held-out image per picture in each, "
           f"{r['n_test_pictures']} pictures). Gaps are paired (other minus {PRIMARY}, same pictures) ± their "
           "standard error; the mean over cells weighs every cell the same.\n"]
    if rivals:
        out.append("**Against the other backends.** " + _cells_line(
            cells.versus(grids, PRIMARY, rivals, sizes, pictures), f"the best of {', '.join(rivals)}"))
        out.append(table(["backend", "mean over cells", f"{PRIMARY} minus it"], _mean_over_cells(r, [PRIMARY] + rivals)))
        out.append("")
    anytime = [n for n in (PLAIN, SPECULATIVE, "GreedyCost") if n in grids]
    if anytime:
        out.append("**Anytime serving.** " + " ".join(
            _cells_line(cells.versus(grids, PRIMARY, [n], sizes, pictures), n).strip() for n in anytime) + "\n")
        # The same comparison for a caller with a hard deadline: an answer that overran is none.
        on_time = {n: grids[n].on_time() for n in [PRIMARY] + anytime}
        means = "; ".join(
            f"{n} {stats.overall(on_time[n].correct, pictures).text()}"
            + ("" if n == PRIMARY else
               f" ({PRIMARY} minus it {stats.overall_difference(on_time[PRIMARY].correct, on_time[n].correct, pictures).text(signed=True)})")
            for n in on_time)
        out.append("**On time.** Counting every answer whose measured extraction time overran its budget as wrong "
                   "(a caller with a hard deadline gets no answer): " + " ".join(
                       _cells_line(cells.versus(on_time, PRIMARY, [n], sizes, pictures), n).strip() for n in anytime)
                   + f" Mean over cells, on time: {means}.\n")
    shown = [n for n in (PRIMARY, PLAIN, SPECULATIVE, "GreedyCost", CASCADE, WORST_CASE) if n in grids]
    rows = []
    for n in shown:
        per_cell = cells.violations(grids[n], sizes)
        worst_cell = max(per_cell, key=per_cell.get)
        over = sum(v > VIOLATION_BAR for v in per_cell.values())
        rows.append([n, pct(float(np.mean(list(per_cell.values())))), pct(per_cell[worst_cell]),
                     f"{side(worst_cell[0])} at {ms(worst_cell[1])} ms", f"{over} of {len(per_cell)}"])
    out.append(f"Budget violations per cell (measured extraction time above the budget; the bar is "
               f"{VIOLATION_BAR:.0%} of a cell's answers):\n")
    out.append(table(["backend", "mean (%)", "worst cell (%)", "worst cell", f"cells above {VIOLATION_BAR:.0%}"],
                     rows))
    out.append("")
    if WORST_CASE in grids:
        gap = stats.overall_difference(grids[WORST_CASE].correct, grids[PRIMARY].correct, pictures)
        guard = r["fitted"][PRIMARY]._policies()[3].guard
        out.append(f"**Median costs with a guard, against worst-case provisioning.** {PRIMARY} fits its cost curves "
                   "at the median of the timing pass, raised by the overhead a request pays (measured on the "
                   f"training extraction), and starts a feature only when {guard} of its measured calls would fit; "
                   f"{WORST_CASE} is the paper's rule (0.95 quantile of the timing pass, plain curves, no guard). "
                   f"Its mean accuracy over cells minus {PRIMARY}'s: {gap.text(signed=True)}.\n")
    if CASCADE in grids:
        rows = _saving_rows(cells.cost_saving(grids, CASCADE, PRIMARY, pictures))
        out.append(f"**Confidence cascades.** Per budget: the share of {PRIMARY}'s answers that used more than one "
                   f"feature, the mean measured extraction time per image of {PRIMARY} and of {CASCADE} (which stops "
                   "computing once a prefix's model is confident; its thresholds, learned out of fold, are the most "
                   f"accurate that save {CASCADE_SAVING:.0%} of each set's extraction time there, and the cheapest of "
                   "those), the saving, and the paired accuracy difference "
                   f"({CASCADE} minus {PRIMARY}):\n")
        out.append(table(["budget (ms)", "multi-feature answers (%)", f"{PRIMARY} (ms)", f"{CASCADE} (ms)",
                          "saving (%)", "saving on multi-feature answers (%)", "accuracy gap"], rows))
        out.append("")
        pair = r.get("cascade_pair")
        if pair:
            # The two backends learn their guards apart; the same index from the same guards
            # isolates what the early stops save and cost.
            rows = _saving_rows(cells.cost_saving(pair, "cascade", "select", pictures))
            out.append(f"The same comparison on {CASCADE}'s own index, walked plainly and with the cascade from one "
                       "snapshot of the guards its grid learned, so that only the early stops differ (the two "
                       "backends above learn their guards apart and can serve other sets at tight budgets):\n")
            out.append(table(["budget (ms)", "multi-feature answers (%)", "plain walk (ms)", "cascade (ms)",
                              "saving (%)", "saving on multi-feature answers (%)", "accuracy gap"], rows))
            out.append("")
        figure = r.get("figures", {}).get("accuracy_vs_cost")
        if figure:
            out.append(f"![accuracy vs mean cost]({os.path.basename(figure)})\n")
    return out
