"""The report's Conclusions, written from the numbers of one run.

Each finding is computed, then phrased; nothing here is a sentence fixed in advance about what
the run will show. In order:

1. **Which backend for which budget** (:func:`budget_verdicts`): per budget, the most accurate
   backend on held-out images, the backends within noise of it (paired difference within
   :data:`~polydom.demo.stats.Z` standard errors) and those significantly behind; consecutive
   budgets with the same verdict are told as one range.
2. **Why the size matters** (:func:`size_story`): where the served features differ between the
   smallest and the largest items, and the cost crossings behind it.
3. **What looks surprising, and why** (:func:`surprises`): accuracy falling as the budget
   rises, a backend at chance while others are not, the exact backend behind another one, what
   the opt-in tie rule trades (:func:`tie_story`), and budget violations -- each with the numbers
   that explain it.
4. **How far the headline moved** since the previous run (:mod:`lab.headline`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from polydom.demo import stats
from .settings import ABLATIONS

__all__ = ["BudgetVerdict", "compared", "budget_verdicts", "budget_table", "range_sentences", "size_story", "cost_crossings",
           "surprises", "tie_story", "conclusions"]


def ms(seconds: float) -> str:
    """Milliseconds with three significant digits."""
    return f"{seconds * 1e3:.3g} ms"


def side(size: float) -> str:
    s = int(round(math.sqrt(size)))
    return f"{s}x{s}"


def set_text(names) -> str:
    """``{hog, thumbnail}``, or ``{}`` for the empty set."""
    return "{" + ", ".join(sorted(names)) + "}"


def _join(words: list[str]) -> str:
    if len(words) <= 2:
        return " and ".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]


@dataclass(frozen=True)
class BudgetVerdict:
    """The comparison of the backends at one budget.

    Attributes
    ----------
    budget : float
    best : str
        The backend with the highest held-out accuracy.
    accuracy : dict of str to Estimate
    tied : list of (str, Estimate)
        Other backends within noise of ``best``: their paired difference ``best - other``.
    behind : list of (str, Estimate)
        Backends significantly behind ``best``, with the gap.
    nothing_fits : bool
        Every backend answered every item with the empty set.
    """

    budget: float
    best: str
    accuracy: dict
    tied: list
    behind: list
    nothing_fits: bool

    @property
    def leaders(self) -> frozenset:
        """The best backend and those tied with it."""
        return frozenset([self.best] + [n for n, _ in self.tied])


def compared(r: dict) -> dict:
    """The grids the Conclusions rank: every backend a user can choose, without the ablations
    (:data:`~lab.settings.ABLATIONS`), which the cell-by-cell section shows."""
    return {n: g for n, g in r["grids"].items() if n not in ABLATIONS}


def budget_verdicts(r: dict) -> list[BudgetVerdict]:
    """One :class:`BudgetVerdict` per budget of the run's results ``r``."""
    grids, pictures = compared(r), r["test_pictures"]
    acc = {n: stats.accuracy(g.correct, pictures) for n, g in grids.items()}
    out = []
    for b, budget in enumerate(r["budgets"]):
        best = max(grids, key=lambda n: (acc[n][b].value, -list(grids).index(n)))
        tied, behind = [], []
        for name, grid in grids.items():
            if name == best:
                continue
            gap = stats.difference(grids[best].correct[b:b + 1], grid.correct[b:b + 1], pictures)[0]
            (behind if gap.significant() else tied).append((name, gap))
        nothing = all(not np.any(g.n_features[b]) for g in grids.values())
        out.append(BudgetVerdict(float(budget), best, {n: acc[n][b] for n in grids}, tied, behind, nothing))
    return out


def budget_table(verdicts: list[BudgetVerdict]) -> list[list[str]]:
    """Rows of the per-budget table: budget, best (accuracy), tied (gap), significantly behind (gap)."""
    def gap(g) -> str:
        return "same answers" if g.value == 0 and g.se == 0 else stats.Estimate(-g.value, g.se).text(signed=True)

    rows = []
    for v in verdicts:
        tied = ", ".join(f"{n} ({gap(g)})" for n, g in v.tied) or "–"
        behind = ", ".join(f"{n} ({gap(g)})" for n, g in v.behind) or "–"
        best = "no feature computed: all serve {}" if v.nothing_fits else v.best
        rows.append([ms(v.budget), best, v.accuracy[v.best].text(), tied, behind])
    return rows


def range_sentences(verdicts: list[BudgetVerdict], chance: float) -> list[str]:
    """Consecutive budgets with the same leaders (best and tied), told as one range each."""
    groups: list[list[BudgetVerdict]] = []
    for v in verdicts:
        key = (v.nothing_fits, v.leaders)
        if groups and (groups[-1][0].nothing_fits, groups[-1][0].leaders) == key:
            groups[-1].append(v)
        else:
            groups.append([v])
    everyone = verdicts[0].leaders | {n for n, _ in verdicts[0].behind} if verdicts else frozenset()
    out = []
    for group in groups:
        lo, hi = group[0].budget, group[-1].budget
        span = ms(lo) if lo == hi else f"{ms(lo)} to {ms(hi)}"
        first = group[0]
        if first.nothing_fits:
            out.append(f"**{span}**: no backend computes a feature at any size (none fits its guarded cost); "
                       f"every backend serves the majority class "
                       f"({first.accuracy[first.best].text()}, chance {chance:.3f}).")
            continue
        bests = list(dict.fromkeys(v.best for v in group))
        accs = [v.accuracy[v.best].value for v in group]
        level = f"{min(accs):.3f}" if len(group) == 1 else f"{min(accs):.3f}–{max(accs):.3f}"
        if first.leaders == everyone:
            out.append(f"**{span}**: all backends are within noise of each other (best {_join(bests)}, {level}).")
            continue
        others = sorted(first.leaders - set(bests))
        tied = f"; within noise of it: {_join(others)}" if others else ""
        gaps: dict[str, list] = {}
        for v in group:
            for name, gap in v.behind:
                gaps.setdefault(name, []).append(gap.value)
        behind = "; ".join(f"{n} behind by {min(g):.3f}" + (f"–{max(g):.3f}" if len(g) > 1 else "")
                           for n, g in gaps.items())
        lead = _join(bests) if len(bests) == 1 else f"{_join(bests)} in turn"
        out.append(f"**{span}**: best {lead} ({level}){tied}; significantly behind: {behind or '–'}.")
    return out


def cost_crossings(fits: dict, lo: float, hi: float, limit: int = 3) -> list[str]:
    """Pairs of features whose cost order flips between item sizes ``lo`` and ``hi``, where they cross."""
    names = list(fits)
    found = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            fa, fb = fits[a].curve, fits[b].curve
            d_lo, d_hi = fa(lo) - fb(lo), fa(hi) - fb(hi)
            if d_lo * d_hi >= 0:
                continue
            x0, x1 = lo, hi  # bisection on the difference of the two fitted polynomials
            for _ in range(60):
                mid = math.sqrt(x0 * x1)
                if (fa(mid) - fb(mid)) * d_lo > 0:
                    x0 = mid
                else:
                    x1 = mid
            cheap_small, cheap_large = (a, b) if d_lo < 0 else (b, a)
            # The larger the change in ratio, the more the crossing reorders what fits.
            swing = abs(math.log(max(fa(hi), 1e-12) / max(fb(hi), 1e-12)) - math.log(max(fa(lo), 1e-12) / max(fb(lo), 1e-12)))
            found.append((swing, f"{cheap_small} is cheaper than {cheap_large} at {side(lo)} "
                                 f"({ms(fits[cheap_small].curve(lo))} vs {ms(fits[cheap_large].curve(lo))}) but "
                                 f"dearer at {side(hi)} ({ms(fits[cheap_small].curve(hi))} vs "
                                 f"{ms(fits[cheap_large].curve(hi))}); they cross near {side(x1)}"))
    found.sort(key=lambda t: -t[0])
    return [text for _, text in found[:limit]]


def _modal(grid, planner, b: int, rows: np.ndarray):
    """The set served most often among ``rows`` at budget index ``b``: (names, share, mask)."""
    keys = grid.keys[b, rows]
    values, counts = np.unique(keys, return_counts=True)
    k = int(np.argmax(counts))
    return planner.plan(int(values[k])).names, counts[k] / len(keys), int(values[k])


def _size_difference(r: dict, name: str):
    """Where ``name``'s answers differ most between the smallest and the largest items.

    Returns ``(budgets where the modal sets differ, (b, small set, its share, large set, its
    share))``, the second None when they never differ. Budgets where both sizes get features
    are preferred: there the sizes change the choice, not just whether anything fits.
    """
    grid, planner, sizes = r["grids"][name], r["fitted"][name].planner_, r["test_sizes"]
    rs, rl = sizes == min(r["unique_sizes"]), sizes == max(r["unique_sizes"])
    candidates = []
    for b in range(len(r["budgets"])):
        ns, share_s, _ = _modal(grid, planner, b, rs)
        nl, share_l, _ = _modal(grid, planner, b, rl)
        if set(ns) != set(nl):
            candidates.append((bool(ns and nl), len(set(ns) ^ set(nl)), b, ns, share_s, nl, share_l))
    if not candidates:
        return [], None
    return [c[2] for c in candidates], max(candidates, key=lambda c: (c[0], c[1], -c[2]))[2:]


def size_story(r: dict, names: list[str]) -> list[str]:
    """How the answers of the backends ``names`` change between the smallest and largest items,
    and the cost crossings behind it."""
    sizes, pictures = r["test_sizes"], r["test_pictures"]
    small, large = min(r["unique_sizes"]), max(r["unique_sizes"])
    rs, rl = sizes == small, sizes == large
    out = []
    grids = compared(r)
    # A backend that gave exactly the answers of one before it is named with it, not told twice.
    same = {n: next((m for m in names[:i] if np.array_equal(grids[m].keys, grids[n].keys)), None)
            for i, n in enumerate(names)}
    for name in names:
        if same[name] is not None:
            continue
        twins = [n for n in names if same[n] == name]
        label = name + (f" (and {_join(twins)}, with the same answers)" if twins else "")
        differ, where = _size_difference(r, name)
        if where is None:
            out.append(f"{label} serves the same features at {side(small)} and {side(large)} at every budget.")
            continue
        b, ns, share_s, nl, share_l = where
        grid = r["grids"][name]
        a_s = stats.accuracy(grid.correct[b:b + 1, rs], pictures[rs])[0]
        a_l = stats.accuracy(grid.correct[b:b + 1, rl], pictures[rl])[0]
        out.append(f"**{label}: the answer depends on the item's size** at {len(differ)} of the {len(r['budgets'])} "
                   f"budgets. At {ms(r['budgets'][b])} it computes {set_text(ns)} for {share_s:.0%} of the "
                   f"{side(small)} images (accuracy {a_s.text()}) but {set_text(nl)} for {share_l:.0%} of the "
                   f"{side(large)} images ({a_l.text()}); see *Served sets by size*.")
    crossings = cost_crossings(r["fitted"][names[0]].cost_fits_, float(small), float(large))
    if crossings:
        out.append("Feature costs grow at different rates with the size and cross: " + "; ".join(crossings) + ".")
    return out


def _served_cv(grid, index, b: int, rows: np.ndarray) -> float:
    """Mean cross-validated accuracy of the sets served at budget index ``b`` to ``rows`` (as
    measured, also where the index ranks sets by a fit of the scores)."""
    scores = getattr(index, "measured_scores", index.trained)
    return float(np.mean([scores.get(int(k), math.nan) for k in grid.keys[b, rows]]))


def _behind(r: dict, primary: str, run: list) -> str:
    """Why ``primary`` was significantly behind at the budgets of ``run`` ((b, leader, gap) each)."""
    grids, fitted, budgets, pictures = compared(r), r["fitted"], r["budgets"], r["test_pictures"]
    everyone = np.ones(len(pictures), dtype=bool)
    leaders = _join(list(dict.fromkeys(o for _, o, _ in run)))
    gaps = [g for _, _, g in run]
    first, last = budgets[run[0][0]], budgets[run[-1][0]]
    span = ms(first) if first == last else f"{ms(first)} to {ms(last)}"
    size = (f"{min(g.value for g in gaps):.3f}" + (f"–{max(g.value for g in gaps):.3f}" if len(run) > 1 else "")
            + f" (standard errors ≤ {max(g.se for g in gaps):.3f})")
    b, leader = run[-1][0], run[-1][1]
    cv_p = _served_cv(grids[primary], fitted[primary].index_, b, everyone)
    cv_o = _served_cv(grids[leader], fitted[leader].index_, b, everyone)
    scores = f"mean cross-validated score of the sets served at {ms(budgets[b])}: {cv_p:.3f} against {cv_o:.3f}"
    text = f"**{primary} is behind {leaders} at {span}** by {size}, significant. "
    if cv_p >= cv_o:
        return text + ("It served the sets with the higher cross-validated score, and held-out images did not "
                       "confirm the ranking: PolyDom is exact with respect to the scores and predicted costs it is "
                       f"given, not to accuracy on new images ({scores}).")
    if fitted[primary].index_.params.get("tolerance") is None:
        return text + (f"Its tie rule served cheaper sets whose scores were within one standard error of the best "
                       f"affordable one ({scores}).")
    own = fitted[primary].index_
    if own.params.get("scores") == "monotone":
        fit_p, fit_o = (float(np.mean([own.explored.get(int(k), math.nan) for k in grids[name].keys[b]]))
                        for name in (primary, leader))
        if fit_p >= fit_o:
            return text + (f"{leader} served sets that score higher in cross-validation ({scores}), but {primary} "
                           "ranks sets by the monotone fit of those scores, which placed them no higher than its "
                           f"own ({fit_o:.3f} against {fit_p:.3f}): a superset scoring below its subset was taken "
                           "for noise.")
    ratio = np.median(grids[leader].measured[b] / np.maximum(grids[leader].predicted[b], 1e-12))
    return text + (f"{leader} served sets that score higher in cross-validation too ({scores}): {primary} judged "
                   "them unaffordable from its predicted costs, while the leader's walk measured the clock as it "
                   f"went and fit them (its sets took {ratio:.2f} times their predicted cost at the median).")


def tie_story(r: dict, primary: str, ties: str) -> str | None:
    """What the opt-in tie rule (the ``ties`` backend) trades against ``primary``'s most accurate sets."""
    grids, fitted, budgets, pictures = compared(r), r["fitted"], r["budgets"], r["test_pictures"]
    if ties not in grids:
        return None
    everyone = np.ones(len(pictures), dtype=bool)
    diffs = stats.difference(grids[ties].correct, grids[primary].correct, pictures)
    overall = stats.overall_difference(grids[ties].correct, grids[primary].correct, pictures)
    cost_t, cost_p = grids[ties].measured.mean(), grids[primary].measured.mean()
    text = (f"**The tie rule trades accuracy for time.** {ties} (`tolerance=None`: among affordable sets within one "
            "standard error of the best, the cheapest) spends on average "
            f"{ms(cost_t)} of extraction per image against {ms(cost_p)} for {primary}, for a mean accuracy change "
            f"of {overall.text(signed=True)}")
    losses = [b for b, d in enumerate(diffs) if d.significant() and d.value < 0]
    if not losses:
        return text + "; it is never significantly behind at a single budget."
    b = min(losses, key=lambda k: diffs[k].value)
    index = fitted[ties].index_
    served, _, mask = _modal(grids[ties], fitted[ties].planner_, b, everyone)
    best, _, best_mask = _modal(grids[primary], fitted[primary].planner_, b, everyone)
    se = [index.std_error.get(m, math.nan) for m in (mask, best_mask)]
    return text + (f"; it is significantly behind at {len(losses)} of the {len(budgets)} budgets, most at "
                   f"{ms(budgets[b])} ({diffs[b].text(signed=True)}), where it serves {set_text(served)} "
                   f"(cross-validated {index.measured_scores.get(mask, math.nan):.3f} ± {se[0]:.3f}) instead of "
                   f"{set_text(best)} ({index.measured_scores.get(best_mask, math.nan):.3f} ± {se[1]:.3f}): the gap is "
                   f"within √(se₁² + se₂²) = {math.hypot(*se):.3f}, a margin that treats the two scores as "
                   "independent although every set is scored on the same folds.")


def cost_story(r: dict, primary: str) -> str:
    """What each backend spends per image at the largest budget, and the accuracy it buys."""
    grids, pictures = compared(r), r["test_pictures"]
    b = len(r["budgets"]) - 1
    parts = []
    for name, grid in grids.items():
        acc = stats.accuracy(grid.correct[b:b + 1], pictures)[0]
        parts.append(f"{name} {ms(grid.measured[b].mean())} ({acc.value:.3f})")
    return (f"**What the accuracy costs.** At the largest budget, {ms(r['budgets'][b])}, the mean measured "
            f"extraction time per image (and accuracy) is: {'; '.join(parts)}.")


def surprises(r: dict, primary: str, verdicts: list[BudgetVerdict]) -> list[str]:
    """Findings a reader would not expect, each with the numbers that explain it."""
    grids, pictures, budgets = compared(r), r["test_pictures"], r["budgets"]
    fitted, chance = r["fitted"], r["chance"]
    out = []

    # Accuracy falling as the budget rises.
    for name, grid in grids.items():
        drops = []
        for b in range(len(budgets) - 1):
            step = stats.difference(grid.correct[b + 1:b + 2], grid.correct[b:b + 1], pictures)[0]
            if step.value < 0:
                drops.append((b, step))
        significant = [(b, s) for b, s in drops if s.significant()]
        if significant:
            b, s = min(significant, key=lambda t: t[1].value)
            index, planner = fitted[name].index_, fitted[name].planner_
            changed = grid.keys[b] != grid.keys[b + 1]
            before, _, _ = _modal(grid, planner, b, changed) if changed.any() else ((), 0, 0)
            after, _, _ = _modal(grid, planner, b + 1, changed) if changed.any() else ((), 0, 0)
            cv_b, cv_a = _served_cv(grid, index, b, changed), _served_cv(grid, index, b + 1, changed)
            ho_b, ho_a = grid.correct[b, changed].mean(), grid.correct[b + 1, changed].mean()
            text = (f"**{name} loses accuracy as the budget rises** from {ms(budgets[b])} to {ms(budgets[b + 1])} "
                    f"({s.text(signed=True)}, significant). The {int(changed.sum())} images whose answer changed "
                    f"went mostly from {set_text(before)} to {set_text(after)}: cross-validation scored the new "
                    f"sets {cv_a:.3f} against {cv_b:.3f}, held-out images {ho_a:.3f} against {ho_b:.3f}. ")
            sizes_changed, counts = np.unique(r["test_sizes"][changed], return_counts=True)
            if counts.max() >= 0.8 * counts.sum():
                where = sizes_changed[np.argmax(counts)]
                text += (f"{counts.max() / counts.sum():.0%} of them are {side(where)} images: a set is scored once, "
                         "over training images of every size, so the index cannot see that a set which is better "
                         f"on average is worse at one size (here at {side(where)}, where the features "
                         f"{set_text(sorted(set(after) - set(before)))} it adds help less).")
            else:
                ranked = ("the monotone fit of the cross-validated scores (a superset never ranks below its subset)"
                          if index.params.get("scores") == "monotone" else "the cross-validated score")
                text += (f"The index maximises {ranked}; a lead smaller than the scores' standard "
                         "errors can reverse on new images (and the sets chosen for the larger budget are the most "
                         "optimistic of more candidates).")
            out.append(text)
        elif name == primary and drops:
            worst = min(drops, key=lambda t: t[1].value)[1]
            out.append(f"{name}'s accuracy dips at {len(drops)} of the {len(budgets) - 1} budget steps, each within "
                       f"noise (largest {worst.text(signed=True)}); held-out accuracy measures cross-validated "
                       "choices on new images, so small dips are expected and not a defect.")

    # A backend at chance while others are not.
    for name, grid in grids.items():
        acc = stats.accuracy(grid.correct, pictures)
        stuck = [b for b, v in enumerate(verdicts)
                 if not v.nothing_fits and v.best != name and acc[b].value <= chance + stats.Z * acc[b].se
                 and any(n == name for n, _ in v.behind)]
        if not stuck:
            continue
        last = stuck[-1]
        empty = float(np.mean(grid.n_features[last] == 0))
        index = fitted[name].index_
        why = f"it computes no feature for {empty:.0%} of the images at {ms(budgets[last])}"
        if hasattr(index, "sequence") and getattr(index, "lambdas", None):
            first = index.sequence(index.lambdas[0])[:1]
            if first:
                curve = fitted[name].cost_curves_[first[0]]
                lo, hi = min(r["unique_sizes"]), max(r["unique_sizes"])
                order = {"greedy-acc": "by accuracy alone", "greedy-cost": "by cost alone"}.get(index.backend,
                                                                                          "by its λ-weighted gain")
                why = (f"it walks its features {order} and its first, {first[0]}, costs {ms(curve(lo))} at "
                       f"{side(lo)} to {ms(curve(hi))} at {side(hi)}: below that nothing fits, and {why}")
        span = ms(budgets[stuck[0]]) if len(stuck) == 1 else f"{ms(budgets[stuck[0]])} to {ms(budgets[last])}"
        out.append(f"**{name} stays at chance** ({chance:.3f}) from {span} while the best backend does not: {why}.")

    # The primary backend significantly behind another one: runs of budgets told once, with the
    # cross-validated scores of what each served, which say which explanation applies.
    runs: list[list] = []
    for b, v in enumerate(verdicts):
        gap = next((g for n, g in v.behind if n == primary), None)
        if v.nothing_fits or v.best == primary or gap is None:
            continue
        if runs and runs[-1][-1][0] == b - 1:
            runs[-1].append((b, v.best, gap))
        else:
            runs.append([(b, v.best, gap)])
    for run in runs:
        out.append(_behind(r, primary, run))
    # Budget violations.
    rates = {n: float((g.measured > g.budgets[:, None]).mean()) for n, g in grids.items()}
    worst = max(rates, key=rates.get)
    if rates[worst] > 0.05:
        g = grids[worst]
        used = g.n_features > 0
        ratio = np.median(g.measured[used] / np.maximum(g.predicted[used], 1e-12)) if used.any() else math.nan
        clf = fitted[worst]
        seconds, sizes = r["held_out_seconds"], r["test_sizes"]
        # The seconds follow the index's items: the steps the features share, then the features.
        over = np.mean([seconds[:, j] > clf.cost_fits_[n].curve_values(sizes) for j, n in enumerate(clf.index_.features)])
        quantile = clf._policies()[1].quantile
        expected = f"about {1 - quantile:.0%}" if isinstance(quantile, float) else "none"
        load = r.get("load", ("?", "?"))
        out.append(f"**{worst} overran {rates[worst]:.1%} of its budgets** (measured extraction time above the "
                   f"budget); its chosen sets took {ratio:.2f} times their predicted cost at the median. The cost "
                   f"curves follow the {quantile} quantile of the timing pass, so on a steady machine {expected} of "
                   f"single feature times would exceed them; {over:.1%} of the held-out feature times did. A set "
                   "is a sum of features, and a walk that starts a feature close to the budget overruns whenever "
                   f"that feature is slower than its curve (load average {load[0]} at the start of the run, "
                   f"{load[1]} at the end).")
    else:
        out.append(f"Budgets held: at most {rates[worst]:.1%} of the answers of any backend ({worst}) took longer "
                   "than their budget on the measured clock.")
    return out


def conclusions(r: dict, primary: str, comparison: dict, ties: str | None = None) -> list[str]:
    """The Conclusions section's markdown lines."""
    verdicts = budget_verdicts(r)
    out = ["## Conclusions\n"]
    out.append("Held-out accuracy on "
               f"{r['n_test']} images ({r['n_test_pictures']} pictures x {len(r['sides'])} sizes, "
               f"{side(min(r['unique_sizes']))} to {side(max(r['unique_sizes']))}); every accuracy is ± one "
               "standard error over pictures, and a difference is *significant* when it exceeds "
               f"{stats.Z:g} standard errors of the paired difference.\n")
    out.append("**Which backend for which budget:**\n")
    out += [f"* {s}" for s in range_sentences(verdicts, r["chance"])]
    out.append("")
    out += [f"* {s}" for s in size_story(r, [n for n in (primary, ties) if n in r["grids"]])]
    out.append(f"* {cost_story(r, primary)}")
    out += [f"* {s}" for s in surprises(r, primary, verdicts)]
    tied = tie_story(r, primary, ties) if ties else None
    if tied:
        out.append(f"* {tied}")
    out.append(f"* {headline_sentence(comparison, primary)}")
    out.append("")
    return out


def headline_sentence(comparison: dict, primary: str) -> str:
    """One sentence on how far the headline moved since the previous run."""
    status = comparison["status"]
    if status == "none":
        return ("**Reproducibility:** this is the first run in this directory; run `python -P benchmarks/backends.py` again (or pass "
                "`--compare OTHER_OUT`) and this line says how far the headline numbers moved.")
    if status == "different":
        return (f"**Reproducibility:** the previous run ({comparison['path']}) used other settings "
                f"({', '.join(comparison['differs'])}), so its headline is not compared.")
    rows = comparison["rows"]
    biggest = max(rows, key=lambda row: abs(row[3].value))
    name, k, step = comparison["largest"]
    verdict = ("every backend's mean accuracy moved by less than the standard error of the change"
               if comparison["within"] else "some moved by more than one standard error of the change")
    return (f"**Reproducibility:** against the previous run ({comparison['generated']}), {verdict}; the largest "
            f"move was {biggest[0]}'s, {biggest[3].text(signed=True)}, and at a single budget {name}'s "
            f"{step.text(signed=True)} (table *Headline numbers*).")
