"""Demo runs with independent seeds, pooled cell by cell: which misses belong to one sample and which persist.

One demo run judges every (item size, budget) cell on one draw of held-out pictures, and the same
draw every time it is run again, so a cell it misses by one or two standard errors may be that
draw's. Runs with other ``--seed`` values draw other pictures, render and split them anew and
retrain everything: independent samples of the same experiment. This script reads each run's
``answers.npz`` and pools, per cell, the paired gaps of the runs (the mean of the runs' gaps; its
standard error ``sqrt(sum se_r^2) / R``, the runs being independent), then judges the bars of
the demo's cell-by-cell section on the pooled numbers:

* the primary (PolyDom α=1) against the best of its rivals in each cell, and on the mean over cells;
* the anytime walk against plain serving (median curves, and the paper's 0.95-quantile curves
  without guards) and against GreedyCost, on time (late answers wrong), and the share of late
  answers per cell;
* the confidence cascade against a plain walk of its own index from the same guards: the mean
  measured extraction time it saves per budget and the accuracy it gives up;
* with ``--scores``: the primary's saved index ranked by its measured scores and by their monotone
  fit (``scores="measured"`` / ``"monotone"``, swept again, nothing retrained), both served on the
  run's recorded held-out times, each against the best rival and against each other.

Usage::

    for s in 0 1 2 3; do python -P benchmarks/backends.py --seed $s --out build/d$s; done
    python -P benchmarks/seeds.py build/d0 build/d1 build/d2 build/d3 --name digits [--scores]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

# Run as ``python -P``, a script's own folder is not on sys.path; ``lab`` is the package beside it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def pooled(estimates):
    """The mean of independent runs' estimates, with its standard error."""
    from polydom.demo.stats import Estimate

    values = np.array([e.value for e in estimates])
    ses = np.array([e.se for e in estimates])
    return Estimate(float(values.mean()), float(math.sqrt(np.sum(ses ** 2)) / len(estimates)))


def load_runs(paths):
    from lab.answers import ANSWERS_FILE, load_answers

    runs = []
    for path in paths:
        file = os.path.join(path, ANSWERS_FILE)
        if not os.path.exists(file):
            sys.exit(f"seeds: {path} holds no {ANSWERS_FILE}; run `python -P benchmarks/backends.py --out {path} --seed N` first")
        runs.append(load_answers(file))
    budgets = [tuple(r[0][next(iter(r[0]))].budgets) for r in runs]
    sides = [tuple(np.unique(r[1])) for r in runs]
    if len(set(budgets)) != 1 or len(set(sides)) != 1:
        sys.exit("seeds: the runs differ in their budgets or sizes; pool runs of one experiment")
    return runs


#: The grids ``--scores`` adds to each run: the primary ranked each way (``bounded``: the
#: classifier's default, which replays the run's own answers).
SCORE_GRIDS = {"measured": "PolyDom α=1, measured scores", "monotone": "PolyDom α=1, monotone scores",
               "bounded": "PolyDom α=1, bounded scores"}


def add_score_grids(paths, runs):
    """Serve each run's saved primary index ranked both ways (:data:`SCORE_GRIDS`) on the run's
    recorded held-out times, and add the grids to the run's."""
    import polydom
    from polydom.demo.evaluation import serve_grid
    from lab.job import load_run_held_out, run_arguments, with_scores

    for path, (grids, sizes, _, y) in zip(paths, runs):
        try:
            matrix, held_sizes, held_y, _ = load_run_held_out(run_arguments(path))
        except ValueError as error:
            sys.exit(f"seeds: {error}")
        if not (np.array_equal(held_y, y) and np.array_equal(held_sizes, sizes)):
            sys.exit(f"seeds: {path}'s cached held-out images are not the ones its answers were given on")
        clf = polydom.CostSensitiveClassifier.load(os.path.join(path, "index"))
        budgets = grids[next(iter(grids))].budgets
        for scores, name in SCORE_GRIDS.items():
            print(f"seeds: serving {path} ranked by {scores} scores", file=sys.stderr)
            grids[name] = serve_grid(with_scores(clf, scores), matrix.X, matrix.seconds, sizes, y, budgets,
                                     cpu_seconds=matrix.cpu_seconds)


def score_section(runs, rivals) -> list[str]:
    """The report's section on the two rankings (see :data:`SCORE_GRIDS`)."""
    measured, monotone = SCORE_GRIDS["measured"], SCORE_GRIDS["monotone"]
    out = ["## Monotone against measured scores (issue 10)", "",
           "The primary's saved index swept again ranked each way and served on the run's recorded held-out times "
           "(`--scores`), so the two differ in nothing but the ranking; a set that only the other ranking makes "
           "servable keeps the score it was trained with (a refit would rescore it).", ""]
    for name in (measured, monotone):
        found = best_rival_cells(runs, name, list(rivals))
        counts = run_counts(runs, name, rivals)
        out += [f"**{name}.** Each run alone: within one SE of its best rival in {', '.join(map(str, counts))} of "
                f"{len(found)} cells.", ""]
        out += cells_summary(found, "the best of " + ", ".join(rivals), name)
        out.append("")
    out += [f"| rival | {measured} minus it | {monotone} minus it | per run (monotone) |", "|---|---|---|---|"]
    for rival in rivals:
        a, _ = mean_over_cells(runs, measured, rival)
        b, per_run = mean_over_cells(runs, monotone, rival)
        out.append(f"| {rival} | {a.text(signed=True)} | {b.text(signed=True)} | "
                   + ", ".join(e.text(signed=True) for e in per_run) + " |")
    total, per_run = mean_over_cells(runs, monotone, measured)
    out.append(f"| {measured} | – | {total.text(signed=True)} | " + ", ".join(e.text(signed=True) for e in per_run) + " |")
    found = best_rival_cells(runs, monotone, [measured])
    out += ["", cells_summary(found, measured, monotone)[0], ""]
    return out


def run_cells(runs, reference, rivals, on_time=False):
    """Per run, :func:`lab.cells.versus` of ``reference`` against the best of ``rivals``
    in each cell (late answers counted wrong with ``on_time``)."""
    from lab import cells

    found = []
    for grids, sizes, pictures, _ in runs:
        if on_time:
            grids = {n: g.on_time() for n, g in grids.items()}
        found.append(cells.versus(grids, reference, list(rivals), sizes, pictures))
    return found


def per_cell(runs, reference, rival, on_time=False):
    """Per cell, each run's :class:`~lab.cells.Cell` of ``rival`` against ``reference``."""
    return list(zip(*run_cells(runs, reference, [rival], on_time)))  # one tuple of runs per cell


def best_rival_cells(runs, reference, rivals, on_time=False):
    """Per cell: the pooled :class:`~lab.cells.Cell` of the rival with the best pooled
    accuracy there, and that rival's per-run gaps."""
    from lab.cells import Cell

    by_rival = {n: per_cell(runs, reference, n, on_time) for n in rivals}
    out = []
    for k in range(len(by_rival[rivals[0]])):
        best = max(rivals, key=lambda n: pooled([c.best for c in by_rival[n][k]]).value)
        cell_runs = by_rival[best][k]
        cell = Cell(cell_runs[0].size, cell_runs[0].budget, best, pooled([c.reference for c in cell_runs]),
                    pooled([c.best for c in cell_runs]), pooled([c.gap for c in cell_runs]))
        out.append((cell, [c.gap for c in cell_runs]))
    return out


def mean_over_cells(runs, reference, other, on_time=False):
    """Pooled paired difference ``reference - other`` of the mean over cells, and the per-run ones."""
    from polydom.demo import stats

    per_run = []
    for grids, sizes, pictures, _ in runs:
        a, b = grids[reference], grids[other]
        if on_time:
            a, b = a.on_time(), b.on_time()
        # Every size has one item per picture, so over all items every cell weighs the same (as the
        # report's mean over cells); the standard error is over pictures, which every size shares.
        per_run.append(stats.overall_difference(a.correct, b.correct, pictures))
    return pooled(per_run), per_run


def cells_summary(found, what, reference):
    from lab.conclusions import side
    from polydom.demo.markdown import ms

    cells_only = [c for c, _ in found]
    within = sum(c.within(1.0) for c in cells_only)
    behind = sum(c.behind(2.0) for c in cells_only)
    ahead = sum(c.ahead(2.0) for c in cells_only)
    lines = [f"Pooled: {reference} is within one standard error of {what} in **{within} of {len(found)}** "
             f"cells, more than two behind in {behind}, more than two ahead in {ahead}."]
    missed = [(c, gaps) for c, gaps in found if not c.within(1.0)]
    if missed:
        lines.append("")
        lines.append("| cell | rival | pooled gap (rival − reference) | gap per run |")
        lines.append("|---|---|---|---|")
        for c, gaps in missed:
            lines.append(f"| {side(c.size)} at {ms(c.budget)} ms | {c.rival} | {c.gap.text(signed=True)} | "
                         + ", ".join(g.text(signed=True) for g in gaps) + " |")
    return lines


def run_counts(runs, reference, rivals, on_time=False):
    """Per run, the cells within one SE of the best rival (that run's own best)."""
    return [sum(c.within(1.0) for c in found) for found in run_cells(runs, reference, rivals, on_time)]


def violations(runs, name):
    """Per cell: pooled share of late answers and the worst run's share."""
    from lab import cells

    per_run = [cells.violations(grids[name], sizes) for grids, sizes, _, _ in runs]
    keys = list(per_run[0])
    return {k: (float(np.mean([v[k] for v in per_run])), float(max(v[k] for v in per_run))) for k in keys}


def cascade_rows(runs, pair):
    from lab import cells

    per_run = []
    for grids, _, pictures, _ in runs:
        per_run.append(cells.cost_saving(grids, f"{pair}/cascade", f"{pair}/select", pictures))
    rows = []
    for k in range(len(per_run[0])):
        items = [r[k] for r in per_run]
        savings = [s["saving"] for s in items if np.isfinite(s["saving"])]
        multi = [s["multi_saving"] for s in items if np.isfinite(s["multi_saving"])]
        rows.append({"budget": items[0]["budget"], "multi": float(np.mean([s["multi"] for s in items])),
                     "saving": (float(np.mean(savings)), min(savings), max(savings)) if savings else None,
                     "multi_saving": (float(np.mean(multi)), min(multi), max(multi)) if multi else None,
                     "gap": pooled([s["gap"] for s in items]), "gaps": [s["gap"] for s in items]})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="finished `python -P benchmarks/backends.py --out DIR --seed N` directories")
    parser.add_argument("--name", default="digits", help="names the report: results/seeds-NAME.md")
    parser.add_argument("--results", default=RESULTS, help="where the report goes (default benchmarks/results)")
    parser.add_argument("--scores", action="store_true",
                        help="also serve each run's primary index ranked by measured and by monotone scores")
    args = parser.parse_args(argv)
    if len(args.runs) < 2:
        sys.exit("seeds: give at least two runs")

    from lab.conclusions import side
    from polydom.demo.markdown import ms
    from lab.settings import CASCADE_PAIR, PLAIN, PRIMARY, RIVALS, WORST_CASE

    started = time.perf_counter()
    runs = load_runs(args.runs)
    if args.scores:
        add_score_grids(args.runs, runs)
    n_pictures = [len(np.unique(r[2])) for r in runs]
    out = [f"# Demo runs with independent seeds, pooled: {args.name}", "",
           f"`python -P benchmarks/seeds.py {' '.join(os.path.basename(p.rstrip('/')) for p in args.runs)} "
           f"--name {args.name}{' --scores' if args.scores else ''}` on {len(runs)} demo runs (`python -P benchmarks/backends.py --seed N`), each with its own "
           f"held-out pictures ({', '.join(map(str, n_pictures))}), training pictures, renderings, folds and timings. "
           "Per cell, the pooled gap is the mean of the runs' paired gaps, ± sqrt(Σ se²) / runs.", ""]

    out += ["## Against the other backends (issue 10)", ""]
    found = best_rival_cells(runs, PRIMARY, list(RIVALS))
    counts = run_counts(runs, PRIMARY, RIVALS)
    out += [f"Each run alone: within one SE of its best rival in {', '.join(map(str, counts))} of {len(found)} cells.", ""]
    out += cells_summary(found, "the best of " + ", ".join(RIVALS), PRIMARY)
    out += ["", "| rival | PolyDom α=1 minus it, mean over cells, pooled | per run |", "|---|---|---|"]
    for rival in RIVALS:
        total, per_run = mean_over_cells(runs, PRIMARY, rival)
        out.append(f"| {rival} | {total.text(signed=True)} | " + ", ".join(e.text(signed=True) for e in per_run) + " |")
    out.append("")

    if args.scores:
        out += score_section(runs, RIVALS)

    out += ["## Anytime serving, on time (issue 11)", ""]
    for other in (PLAIN, WORST_CASE, "GreedyCost"):
        found = best_rival_cells(runs, PRIMARY, [other], on_time=True)
        counts = run_counts(runs, PRIMARY, [other], on_time=True)
        out += [f"**Against {other}.** Each run alone: within one SE in {', '.join(map(str, counts))} of "
                f"{len(found)} cells.", ""]
        out += cells_summary(found, other, PRIMARY)
        total, per_run = mean_over_cells(runs, PRIMARY, other, on_time=True)
        out += ["", f"Mean over cells, on time, PolyDom α=1 minus {other}: pooled {total.text(signed=True)}; per run "
                + ", ".join(e.text(signed=True) for e in per_run) + ".", ""]
        if other in (PLAIN, WORST_CASE):
            late = violations(runs, other)
            missed = [c for c, _ in found if not c.within(1.0)]
            if missed:
                out += [f"{other}'s late answers in those cells (pooled share; worst run): " + "; ".join(
                    f"{side(c.size)} at {ms(c.budget)} ms {100 * late[(c.size, c.budget)][0]:.1f}% "
                    f"({100 * late[(c.size, c.budget)][1]:.1f}%)" for c in missed) + ".", ""]
    out += ["| backend | late answers, pooled over runs: mean over cells | worst cell in any run | cells above 2% in any run |",
            "|---|---|---|---|"]
    for name in (PRIMARY, "GreedyCost", PLAIN, WORST_CASE):
        late = violations(runs, name)
        worst = max(late.items(), key=lambda kv: kv[1][1])
        over = sum(v[1] > 0.02 for v in late.values())
        out.append(f"| {name} | {100 * np.mean([v[0] for v in late.values()]):.2f}% | {100 * worst[1][1]:.1f}% "
                   f"({side(worst[0][0])} at {ms(worst[0][1])} ms) | {over} of {len(late)} |")
    out.append("")

    out += ["## Confidence cascade (issue 14)", "",
            "The cascade's own index walked plainly and with the cascade from one snapshot of its learned guards "
            "(the demo's second cascade table), per budget over all sizes. Saving: 1 − cascade's mean measured "
            "extraction time / the plain walk's, mean over runs (lowest–highest run); gap: cascade minus plain walk, "
            "paired, pooled.", "",
            "| budget (ms) | multi-feature answers | saving | saving on multi-feature answers | gap, pooled | gap per run |",
            "|---|---|---|---|---|---|"]

    def pct(t):
        return "–" if t is None else f"{100 * t[0]:.0f}% ({100 * t[1]:.0f}–{100 * t[2]:.0f}%)"

    for row in cascade_rows(runs, CASCADE_PAIR):
        out.append(f"| {ms(row['budget'])} | {100 * row['multi']:.0f}% | {pct(row['saving'])} | "
                   f"{pct(row['multi_saving'])} | {row['gap'].text(signed=True)} | "
                   + ", ".join(g.text(signed=True) for g in row["gaps"]) + " |")
    out += ["", f"Pooled in {time.perf_counter() - started:.0f} s."]

    text = "\n".join(out) + "\n"
    print(text)
    os.makedirs(args.results, exist_ok=True)
    path = os.path.join(args.results, f"seeds-{args.name}.md")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    print(f"written {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
