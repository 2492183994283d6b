"""``report.md``: the Conclusions first, then the tables they come from, with the PNG plots beside it.

Every accuracy is printed with its standard error over pictures (:mod:`polydom.demo.stats`), and
backends are compared by paired differences. Timings come from one source each: the stage table
adds up to the wall time in the title, and the fit table splits each backend's fit stage into the
classifier's own parts (``fit_stats_``).
"""

from __future__ import annotations

import datetime
import os

import numpy as np

from . import conclusions as concl
from polydom.demo import stats

from . import bars, headline
from polydom.demo.markdown import ms as _ms
from polydom.demo.markdown import pct as _pct
from polydom.demo.markdown import table as _table
from polydom.demo.markdown import us as _us
from .settings import SPECULATIVE, PLAIN, PRIMARY, TIES

__all__ = ["write_report"]

_DATASETS = {"digits": "scikit-learn's bundled digits", "fashion-mnist": "Fashion-MNIST (Debian's package)"}


def _img(path: str, alt: str) -> str:
    return f"![{alt}]({os.path.basename(path)})"


def _index_counts(index) -> dict:
    """Skyline entries, size ranges, candidates (or Greedy's distinct sequences) and models."""
    summary = index.summary()
    details = summary["details"]
    return {"entries": details.get("entries", "-"), "ranges": details.get("ranges", 1),
            "candidates": details.get("candidates", summary["stats"].get("sequences", "-")),
            "models": len(index.models)}


def _ranking(index) -> str:
    """How the primary index ranks its sets, for the *What was run* table."""
    if index.params.get("scores") != "monotone":
        return "; sets ranked by those scores"
    stats = index.stats
    return (f"; sets ranked by the monotone fit of those scores (`scores=\"monotone\"`: a superset never ranks "
            f"below its subset), which moved {stats.get('scores_moved', 0)} of {len(index.explored)} scores, "
            f"by at most +{stats.get('score_largest_rise', 0.0):.3f} / -{stats.get('score_largest_fall', 0.0):.3f}")


def _headline_section(r: dict, comparison: dict) -> list[str]:
    out = ["## Headline numbers\n"]
    out.append(f"Mean held-out accuracy over the {len(r['budgets'])} budgets (each budget weighs the same), ± one "
               f"standard error over pictures; `headline.json` keeps them for the next run. Difference from "
               f"{PRIMARY}: paired, ± its standard error.\n")
    h = r["headline"]["backends"]
    pictures = r["test_pictures"]
    primary_correct = r["grids"][PRIMARY].correct
    status = comparison["status"]
    rows = []
    moved = {name: (a, b, c) for name, a, b, c in comparison.get("rows", [])}
    for name, grid in r["grids"].items():
        est = stats.Estimate(h[name]["mean"], h[name]["se"])
        diff = "–" if name == PRIMARY else stats.overall_difference(grid.correct, primary_correct, pictures).text(signed=True)
        row = [name, est.text(), diff]
        if status == "compared" and name in moved:
            before, _, change = moved[name]
            row += [before.text(), change.text(signed=True), "yes" if abs(change.value) <= change.se else "**no**"]
        rows.append(row)
    header = ["backend", "this run", f"vs {PRIMARY}"]
    if status == "compared":
        header += ["previous run", "change", "within 1 SE of the change"]
    out.append(_table(header, rows))
    out.append("")
    if status == "compared":
        wall = comparison.get("wall_seconds")
        out.append(f"Previous run: `{comparison['path']}`, generated {comparison['generated']}"
                   + (f", wall time {wall:.0f} s" if wall else "") + ". The standard error of a change combines both "
                   "runs' as if independent, which overstates it: both runs use the same images, folds and seeds, so "
                   "what moves between them is this machine's timing (the cost curves, and the measured times the "
                   "anytime walk reacts to).\n")
    else:
        out.append(concl.headline_sentence(comparison, PRIMARY) + "\n")
    return out


def _served_sets_table(r: dict, name: str) -> list[list[str]]:
    """Per budget and size, the set ``name`` served most often, to what share of the images, and
    the held-out accuracy at that size."""
    grid, planner = r["grids"][name], r["fitted"][name].planner_
    sizes, pictures = r["test_sizes"], r["test_pictures"]
    rows = []
    for b, budget in enumerate(r["budgets"]):
        row = [_ms(budget)]
        for s in r["unique_sizes"]:
            rows_s = sizes == s
            names, share, _ = concl._modal(grid, planner, b, rows_s)
            acc = stats.accuracy(grid.correct[b:b + 1, rows_s], pictures[rows_s])[0]
            row.append(f"{concl.set_text(names)} {share:.0%}; {acc.value:.2f}")
        rows.append(row)
    return rows


def write_report(path, r: dict) -> str:
    """Write the markdown report for the results ``r`` of :func:`lab.job.run_demo`; returns ``path``."""
    fitted, grids = r["fitted"], r["grids"]
    names = list(grids)
    primary = fitted[PRIMARY]
    _, timing, _, serving = primary._policies()
    budgets = r["budgets"]
    sizes, unique, pictures = r["test_sizes"], r["unique_sizes"], r["test_pictures"]
    n_feat = len(r["features"])
    comparison = headline.compare(r["previous"], r["headline"])
    out = []
    add = out.append

    add("# polydom backend comparison\n")
    load = r.get("load", ("?", "?"))
    add(f"Generated {datetime.datetime.now().isoformat(timespec='seconds')} on {r['machine']} (load average "
        f"{load[0]} at the start, {load[1]} at the end). **Wall time: {r['wall_seconds']:.1f} s**, from loading the "
        "data to writing this report; the stage table under *What was run* adds up to it.\n")
    add("Costs and budgets are **seconds on this machine**; the item size `n` of an image is its pixel count.\n")

    out.extend(concl.conclusions(r, PRIMARY, comparison, TIES))
    add("Per budget: the best backend on held-out images, the backends within noise of it and those significantly "
        "behind, each with its paired gap ± standard error.\n")
    add(_table(["budget", "best", "its accuracy", "within noise (gap)", "significantly behind (gap)"],
               concl.budget_table(concl.budget_verdicts(r))))
    add("")

    out.extend(_headline_section(r, comparison))
    out.extend(bars.section(r))

    add("## What was run\n")
    learners = ", ".join(primary.fit_stats_.get("learners", [])) or "the default learners"
    add(_table(["", ""], [
        ["data", f"{_DATASETS[r['dataset']]}, rendered at sides {', '.join(map(str, r['sides']))} (jitter + noise), "
                 f"whole pictures on one side of the split; seed {r['random_state']} (`--seed`)"],
        ["images", f"{r['n_train']} training ({r['train_per_class']} pictures per class), {r['n_test']} held out "
                   f"({r['held_out_per_class']} pictures per class, {r['n_test_pictures']} pictures)"],
        ["features", f"{n_feat}: {', '.join(r['features'])}"],
        ["learners", f"{learners}, raced per feature set (the classifier's default)"],
        ["scoring", f"{r['cv']}-fold stratified, grouped CV accuracy"
                    + (f" over {r['cv_repeats']} draws of the folds" if r.get("cv_repeats", 1) > 1 else "")
                    + " with its standard error; servable sets rescored on further folds"
                    + _ranking(primary.index_)
                    + "; final model refitted on all training images; {} = majority class"],
        ["cost fits", f"degree {timing.degree}, non-negative and non-decreasing, following the "
                      f"{timing.quantile} quantile of the training extraction's calls and of {timing.repeats} "
                      f"passes x {timing.images} resized images at sides {', '.join(map(str, primary.timing_sides_))}"
                      + (", raised by the overhead a request pays (a + b·n, from the training extraction's wall "
                         f"times); cost guard {serving.guard}" if timing.calibrate else "")],
        ["backends", "; ".join(names) + f" (Greedy n0 = median training size = {primary.n0_:g})"],
        ["budgets (ms)", ", ".join(_ms(b) for b in budgets)],
        ["cache", r["cache_dir"] or "none"],
        ["threads", f"n_jobs={r['n_jobs']} joblib workers; BLAS limited to one thread each"],
    ]))
    add("")
    add("Stage timings (seconds; they add up to the wall time above):\n")
    stages = dict(r["stages"])
    rows = [[k, f"{v:.1f}"] for k, v in stages.items()]
    rows.append(["other (report, bookkeeping)", f"{max(0.0, r['wall_seconds'] - sum(stages.values())):.1f}"])
    rows.append(["**total**", f"**{r['wall_seconds']:.1f}**"])
    add(_table(["stage", "s"], rows))
    add("")
    add("The fit stage per backend (seconds), split into the classifier's parts; later fits reuse the first one's "
        "features (the feature cache) and its trained sets (the expansion cache):\n")
    rows = []
    for n, m in fitted.items():
        s = m.fit_stats_
        parts = s["extract_seconds"] + s["timing_seconds"] + s["build_seconds"]
        total = r["fit_seconds"][n]
        rows.append([n, f"{s['extract_seconds']:.1f}", f"{s['timing_seconds']:.1f}", f"{s['build_seconds']:.1f}",
                     f"{max(0.0, total - parts):.1f}", f"{total:.1f}"])
    add(_table(["backend", "extract features", "time features", "train sets + build index", "other", "fit total"],
               rows))
    add("")

    add("## Fitted cost curves\n")
    add(f"Seconds as a polynomial in `n`; cost at the served sizes in ms. {_img(r['figures']['cost_curves'], 'cost curves')}\n")
    rows = []
    for name, fit in primary.cost_fits_.items():
        rows.append([name, f"`{fit.expression()}`"] + [_ms(fit.curve(s)) for s in unique])
    add(_table(["feature", "cost(n) in s"] + [f"{concl.side(s)} (ms)" for s in unique], rows))
    add("")

    add("## Served sets by size\n")
    add("Per budget and size, the feature set served most often, the share of the images it was served to, and the "
        f"held-out accuracy at that size. {_img(r['figures']['features_by_size'], 'features by size')}\n")
    for name in (PRIMARY, TIES):
        if name in grids:
            add(f"{name}:\n")
            add(_table(["budget (ms)"] + [concl.side(s) for s in unique], _served_sets_table(r, name)))
            add("")

    add("## Accuracy vs budget (held-out images, all sizes)\n")
    add(_img(r["figures"]["accuracy_vs_budget"], "accuracy vs budget") + "\n")
    acc = {n: stats.accuracy(g.correct, pictures) for n, g in grids.items()}
    rows = [[_ms(b)] + [acc[n][k].text() for n in names] for k, b in enumerate(budgets)]
    add(_table(["budget (ms)"] + names, rows))
    add("")
    add("Mean measured extraction time per image of the answers (ms; what the accuracy above cost):\n")
    rows = [[_ms(b)] + [_ms(grids[n].measured[k].mean()) for n in names] for k, b in enumerate(budgets)]
    add(_table(["budget (ms)"] + names, rows))
    add("")
    add(f"Paired difference from {PRIMARY} (other minus {PRIMARY}, ± standard error; **bold**: significant):\n")
    rows = []
    for k, b in enumerate(budgets):
        row = [_ms(b)]
        for n in names[1:]:
            d = stats.difference(grids[n].correct[k:k + 1], grids[PRIMARY].correct[k:k + 1], pictures)[0]
            row.append(f"**{d.text(signed=True)}**" if d.significant() else d.text(signed=True))
        rows.append(row)
    add(_table(["budget (ms)"] + names[1:], rows))
    add("")
    add(f"Per size, {PRIMARY} (± standard error; one image per picture and size): "
        f"{_img(r['figures']['accuracy_by_size'], 'accuracy by size')}\n")
    g = grids[PRIMARY]
    per_size = {s: stats.accuracy(g.correct[:, sizes == s], pictures[sizes == s]) for s in unique}
    rows = [[_ms(b)] + [per_size[s][k].text() for s in unique] for k, b in enumerate(budgets)]
    add(_table(["budget (ms)"] + [concl.side(s) for s in unique], rows))
    add("")

    add("## Budget violations\n")
    add("Share of (held-out image, budget) answers whose **measured** extraction time exceeded the budget, per "
        "size, over all budgets. Each feature of each held-out image was computed once, sequentially, and timed on "
        "the wall clock; a set's measured time on an image is the sum of its features' times there. Every backend "
        "answers through its index's `select`, as at serving time, with a clock replaying those times: sets are "
        f"chosen from the fitted ({timing.quantile} quantile) curves, and a feature starts only while the time "
        f"already spent plus its guarded predicted cost fits (`Serving(guard={serving.guard})`); where the guard "
        "refuses a feature whose unguarded cost fits and that would serve a more accurate set, the speculative "
        "variant (`speculate=True`) tries it and, if its replayed time would pass the budget, abandons it there and "
        f"answers with what it had, on time. {_img(r['figures']['violations_by_size'], 'violations')}\n")
    rows = []
    for n in names:
        gr = grids[n]
        over = gr.measured > gr.budgets[:, None]
        rows.append([n] + [_pct(over[:, sizes == s].mean()) for s in unique] + [_pct(over.mean())])
    add(_table(["backend"] + [f"{concl.side(s)} (%)" for s in unique] + ["all (%)"], rows))
    add("")
    rows = []
    for n in names:
        gr = grids[n]
        used = gr.n_features > 0
        ratio = gr.measured[used] / np.maximum(gr.predicted[used], 1e-12)
        rows.append([n, f"{np.median(ratio):.2f}" if used.any() else "-",
                     f"{np.percentile(ratio, 95):.2f}" if used.any() else "-"])
    add("Measured / predicted extraction time of the chosen sets (answers with at least one feature):\n")
    add(_table(["backend", "median", "95th percentile"], rows))
    add("")

    add("## Expansions\n")
    add(f"Feature sets expanded while building (a set served from the expansion cache counts, as in the paper; "
        f"NaiveExpandAll expands all 2^{n_feat} = {2 ** n_feat}). {_img(r['figures']['expansions'], 'expansions')}\n")
    rows = []
    for n, m in fitted.items():
        if n in (TIES, PLAIN, SPECULATIVE):
            continue
        s = m.fit_stats_
        total = s["trained"] + s["reused"]
        rows.append([n, total, s["trained"], s["reused"], f"{total / 2 ** n_feat:.1%}"])
    add(_table(["backend", "expanded", "trained in this fit", "from the cache", "of NaiveExpandAll"], rows))
    add("")
    if TIES in fitted:
        add(f"{TIES} is {PRIMARY}'s trained sets swept again with `tolerance=None`: it expands and trains nothing "
            "(a refit with that tolerance gives the same index; `lab.job.with_tolerance`).\n")
    race = primary.fit_stats_.get("learner_race", {})
    chosen = primary.fit_stats_.get("learner_chosen", {})
    if race:
        add(f"Learner race in the {PRIMARY} fit: {race.get('started', 0)} learner-set pairs started on the first fold, "
            f"{race.get('dropped', 0)} stopped there; sets won: "
            + ", ".join(f"{k} {v}" for k, v in chosen.items())
            + (f"; retired: {', '.join(race['retired'])}" if race.get("retired") else "") + ".\n")

    add("## Index size\n")
    rows = []
    for n, m in fitted.items():
        c = _index_counts(m.index_)
        rows.append([n, c["entries"], c["ranges"], c["candidates"], c["models"], f"{r['index_bytes'][n] / 1024:.0f}"])
    add(_table(["backend", "skyline entries", "ranges", "candidates / sequences", "models stored", "LMDB data (KiB)"], rows))
    add("")
    add(f"The {PRIMARY} classifier is at `{r['index_dir']}` (`polydom inspect {r['index_dir']}`); saved and "
        f"loaded back, it answers every held-out (image, budget) pair identically: **{'yes' if r['round_trip'] else 'NO'}**.\n")

    add("## Latency\n")
    rows = [[n, _us(v["lookup"]), _us(v["lookup_many_per_query"])] for n, v in r["latency"].items()]
    add("Lookup (µs per query, best of 5 passes over 2,000 random held-out sizes and budgets; Greedy's `lookup` "
        "is the predicted walk):\n")
    add(_table(["backend", "lookup", "lookup_many per query"], rows))
    add("")
    o = r["overhead"]
    add(f"Per-item serving overhead apart from feature extraction (loaded {PRIMARY} classifier, medians over "
        f"{o['samples']} item x budget requests): lookup, assembling the chosen features' vector, and predicting "
        f"with the lean numpy path ({o['lean_share']:.0%} of the sets served were lean; lean labels identical to "
        f"scikit-learn's: **{'yes' if o['identical'] else 'NO'}**):\n")
    add(_table(["part", "µs"], [
        ["lookup (+ cached plan)", _us(o["lookup"])], ["assemble vector", _us(o["assemble"])],
        ["lean predict", _us(o["lean_predict"])], ["**total**", f"**{_us(o['total'])}** (p95 {_us(o['total_p95'])})"],
        ["scikit-learn `predict` on the same row, for comparison", _us(o["sklearn_predict"])],
    ]))
    add("")
    add("Real serving pass: held-out images served one at a time with their features computed now (`explain`); "
        "`wall` is the whole call, extraction included; `wall - extraction` is everything else a request paid "
        "(validation, lookup, vector, lean predict, the record). Accuracy ± standard error (few images: a check "
        "that real serving agrees with the replayed grid, not a measurement of accuracy).\n")
    rows = []
    for n, arr in r["real"].items():
        for b in sorted(set(arr[:, 0].tolist())):
            sel = arr[arr[:, 0] == b]
            ok = sel[:, 5]
            se = ok.std(ddof=1) / np.sqrt(len(ok)) if len(ok) > 1 else float("nan")
            rows.append([n, _ms(b), len(sel), f"{ok.mean():.2f} ± {se:.2f}", _ms(np.median(sel[:, 3])),
                         _ms(np.median(sel[:, 2])), _pct((sel[:, 3] > b).mean()), _ms(np.median(sel[:, 4])),
                         _ms(np.percentile(sel[:, 4], 95)), _us(np.median(sel[:, 4] - sel[:, 3]))])
    add(_table(["backend", "budget (ms)", "items", "accuracy", "measured extraction (ms, median)",
                "predicted (ms, median)", "over budget (%)", "wall per item (ms, median)", "wall p95 (ms)",
                "wall - extraction (µs, median)"], rows))
    add("")

    add("## Notes\n")
    notes = [
        "Standard errors cover the choice of held-out pictures (each picture is one observation, its renderings at "
        "every size together), not the training images, the folds or the machine's timing; the headline table "
        "shows how far timing moves the numbers between runs.",
        "Accuracy and violations are computed from one timed extraction of every feature of every held-out "
        "image (so every backend and budget is judged on the same times); the real pass computes features for "
        "real on a subset.",
        "Cost curves are fitted to timings of the classifier's own timing pass; held-out times are wall-clock, "
        "taken later. On a shared machine both vary with the load, which is why violations are reported per size "
        "and the measured/predicted ratio is shown.",
        "Non-negative coefficients make every cost curve convex and non-decreasing in `n`; a feature whose "
        "time grows concavely with size is over-estimated at the small sizes, which costs accuracy at budgets "
        "near its cost but never under-provisions.",
        f"Features cached from an earlier run: training {'yes' if primary.fit_stats_.get('features_cached') else 'no'}, "
        f"held-out {'yes' if r['held_out_cached'] else 'no'}.",
    ]
    notes += [f"During the fits: {n}" for n in r.get("notes", [])]
    if "gabor" not in r["features"]:
        notes.append(
            f"The lattice uses {n_feat} of the built-in features: `size_meta` is chance-level here (every class "
            "comes at the same sizes) and `gabor` costs 15–170 ms an image at these sizes, ten times the others "
            "together, for under a point of accuracy on these digits; `python -P benchmarks/backends.py --features all` runs them all.")
    add("\n".join(f"* {n}" for n in notes))
    add("")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(out))
    return os.fspath(path)
