"""Would scoring feature sets per item size pick better sets at a size? Measured on demo runs.

A feature set is scored once, over training images of every size, and the index serves the best
score that fits at the item's size. The demo's held-out images show sets whose accuracy depends on
the size: at 280x280 the pixel noise drowns hog's and edge_density's gradients, and a model trained
over all sizes loses accuracy there when it adds them. This benchmark asks whether the training
data could have told. For each run it trains *every* subset of the demo's eight features (the
classifier's raced learners, 3-fold grouped CV on the run's training split), and for each cell of
the demo's grid (5 sizes x 11 budgets) picks the affordable set -- predicted cost at the size
within the budget, from the run's fitted curves; lookups only, no clock -- by each rule:

* **monotone**: the weighted isotonic fit of the sets' cross-validated scores on the subset order
  (the classifier's default ranking; weights from each score's binomial standard error);
* **measured**: the cross-validated scores themselves (the paper's ranking);
* **per size**: the measured score plus the set's out-of-fold deviation at that size (its accuracy
  on that size's training images minus its accuracy on all);
* **shrunk**: the measured score plus that deviation shrunk by empirical Bayes (the deviations'
  variance across sets over their binomial noise, per size);
* **monotone per size**: the isotonic fit, at each size, of the shrunk score;
* **oracle**: the affordable set most accurate on the held-out images of the cell (a bound, not a
  rule).

Each pick is judged on the held-out images of that size, paired against *monotone* over the
held-out pictures; runs pool cell by cell (the mean of the runs' gaps, ± sqrt(Σ se²) / runs).

    python -P benchmarks/backends.py --out RUN [--dataset fashion-mnist] [--seed S]
    python -P benchmarks/size_scores.py RUN [RUN ...]

Writes ``benchmarks/results/size-scores-DATASET.md``. About six minutes per run on two cores (all
256 sets are trained, and each set's out-of-fold probabilities once more); each run's training
and held-out correctness are kept in ``RUN/cache/size-scores.npz`` and read back on a second call.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import sys
import time
import warnings

import numpy as np

# Run as ``python -P``, a script's own folder is not on sys.path; ``lab`` is the package beside it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
#: Where a run's per-item correctness is kept, inside the run's directory.
CACHE = os.path.join("cache", "size-scores.npz")


def per_item(args):
    """Every subset's out-of-fold correctness on the training images, held-out correctness, CV score."""
    import polydom
    from lab.job import load_run_split, run_arguments
    from lab.settings import DEFAULT_FEATURES, DEFAULT_SIDES
    from polydom.classifier.extraction import extract_features
    from polydom.featurizers import resolve_features
    from polydom.classifier.precomputed import fit_features

    out = args.out
    run = run_arguments(out)
    if tuple(run.sides or DEFAULT_SIDES) != tuple(DEFAULT_SIDES) or tuple(run.features or DEFAULT_FEATURES) != tuple(DEFAULT_FEATURES):
        sys.exit(f"size_scores: {out} is not a run of the demo's sides and features")
    images, labels, train, test = load_run_split(args)
    features = resolve_features(DEFAULT_FEATURES)
    cache = os.path.join(out, "cache", "features")
    train_matrix = extract_features([images[i] for i in train], features, n_jobs=None, cache_dir=cache)
    test_matrix = extract_features([images[i] for i in test], features, n_jobs=None, cache_dir=cache)
    if not (train_matrix.cached and test_matrix.cached):
        sys.exit(f"size_scores: {out} holds no cached features of this split; run the demo there first")
    sizes = {name: np.array([images[i].shape[0] * images[i].shape[1] for i in idx], dtype=float)
             for name, idx in (("train", train), ("test", test))}
    index = polydom.CostSensitiveClassifier.load(os.path.join(out, "index")).planner_.index
    names = list(index.space.names)
    costs = {n: index.costs[j] for j, n in enumerate(names)}
    columns = train_matrix.columns
    fit = fit_features({n: train_matrix.X[:, columns[n]] for n in names}, labels[train], costs,
                       groups=train // len(DEFAULT_SIDES), cv=3, random_state=0)
    learner = fit.learner
    subsets = [frozenset(c) for k in range(len(names) + 1) for c in itertools.combinations(names, k)]
    learner.many(subsets)
    majority = np.bincount(labels[train]).argmax()
    oof, held, score = [], [], []
    for s in subsets:
        score.append(learner.cache[s].accuracy)
        if not s:
            oof.append(labels[train] == majority)
            held.append(labels[test] == majority)
            continue
        proba, classes = learner.oof_proba(s)
        oof.append(classes[proba.argmax(axis=1)] == labels[train])
        cols = np.concatenate([np.arange(columns[n].start, columns[n].stop) for n in names if n in s])
        held.append(learner.cache[s].model.predict(test_matrix.X[:, cols]) == labels[test])
    unique = np.array(sorted(set(sizes["train"])))
    cost = np.array([[sum(float(costs[n](z)) for n in s) for z in unique] for s in subsets])
    masks = np.array([sum(1 << names.index(n) for n in s) for s in subsets], dtype=np.int64)
    return dict(subsets=masks, oof=np.array(oof, dtype=float), held=np.array(held, dtype=float),
                score=np.array(score), cost=cost, sizes=unique, train_sizes=sizes["train"],
                test_sizes=sizes["test"], pictures=test // len(DEFAULT_SIDES))


def run_settings(out: str) -> np.ndarray:
    """What identifies the run in ``out`` (dataset, per-class counts, seed), as a string array."""
    from lab.job import run_arguments

    run = run_arguments(out)
    return np.array([run.dataset, str(run.train_per_class), str(run.held_out_per_class), str(run.seed)])


def load_or_measure(out: str) -> dict:
    """:func:`per_item` of the run in ``out``, read back from its cache when measured on this run
    before (a demo run again into the same directory has other settings, and is measured anew)."""
    path = os.path.join(out, CACHE)
    settings = run_settings(out)
    if os.path.exists(path):
        with np.load(path, allow_pickle=False) as kept:
            if "settings" in kept.files and np.array_equal(kept["settings"], settings):
                return {k: kept[k] for k in kept.files if k != "settings"}
    d = per_item(argparse.Namespace(out=out))
    np.savez(path + ".tmp.npz", settings=settings, **d)
    os.replace(path + ".tmp.npz", path)
    return d


def _monotone(masks: np.ndarray, scores: np.ndarray, std_error: np.ndarray) -> np.ndarray:
    from polydom.lattice import monotone_scores

    fitted = monotone_scores(dict(zip(masks.tolist(), scores.tolist())), dict(zip(masks.tolist(), std_error.tolist())))
    return np.array([fitted[m] for m in masks.tolist()])


def rules(d: dict) -> tuple[dict, list[str]]:
    """Per rule, per size, every set's score; and one line per size describing the deviations."""
    masks, oof, score = d["subsets"], d["oof"], d["score"]
    overall_oof = oof.mean(axis=1)
    overall_se = np.sqrt(np.clip(score * (1 - score), 1e-4, None) / oof.shape[1])
    monotone = _monotone(masks, score, overall_se)
    names = ("monotone", "measured", "per size", "shrunk", "monotone per size")
    out, lines = {name: [] for name in names}, []
    for size in d["sizes"]:
        at = d["train_sizes"] == size
        n = int(at.sum())
        acc = oof[:, at].mean(axis=1)
        deviation = acc - overall_oof
        noise = acc * (1 - acc) / n * (1 - n / len(at))
        signal = max(float(deviation.var() - noise.mean()), 0.0)
        weight = signal / (signal + noise)
        out["monotone"].append(monotone)
        out["measured"].append(score)
        out["per size"].append(score + deviation)
        out["shrunk"].append(score + weight * deviation)
        out["monotone per size"].append(_monotone(masks, score + weight * deviation, overall_se))
        held_dev = d["held"][:, d["test_sizes"] == size].mean(axis=1) - d["held"].mean(axis=1)
        lines.append((int(round(size ** 0.5)), n, float(deviation.std()), float(np.sqrt(noise.mean())),
                      float(weight.mean()), float(np.corrcoef(deviation, held_dev)[0, 1])))
    return out, lines


def picks(d: dict, scores: dict, budgets) -> dict:
    """Per rule (and the oracle), held-out correctness of its pick in each cell: (cells, pictures)."""
    out = {name: [] for name in list(scores) + ["oracle"]}
    for k, size in enumerate(d["sizes"]):
        test = d["test_sizes"] == size
        held = d["held"][:, test]
        for budget in budgets:
            fits = d["cost"][:, k] <= budget
            for name, per_size in scores.items():
                out[name].append(held[int(np.argmax(np.where(fits, per_size[k], -np.inf)))])
            out["oracle"].append(held[int(np.argmax(np.where(fits, held.mean(axis=1), -np.inf)))])
    return {name: np.array(cells) for name, cells in out.items()}


def pooled_gaps(runs: list[dict], name: str, reference: str):
    """Per cell, the pooled gap of ``name`` over ``reference`` and its SE; and the mean over cells ± SE."""
    gaps = [r[name] - r[reference] for r in runs]  # each (cells, pictures), paired over pictures
    cell = np.mean([g.mean(axis=1) for g in gaps], axis=0)
    cell_se = np.sqrt(np.sum([g.var(axis=1, ddof=1) / g.shape[1] for g in gaps], axis=0)) / len(gaps)
    overall = float(np.mean([g.mean() for g in gaps]))
    overall_se = math.sqrt(sum(g.mean(axis=0).var(ddof=1) / g.shape[1] for g in gaps)) / len(gaps)
    return cell, cell_se, overall, overall_se


def main(argv=None) -> int:
    from lab.job import finished_run, run_arguments
    from polydom.demo.markdown import table
    from lab.settings import DEFAULT_BUDGETS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=finished_run,
                        help="finished `python -P benchmarks/backends.py --out RUN` directories of one dataset")
    parser.add_argument("--results", default=RESULTS, help="where the report goes (default benchmarks/results)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    datasets = {run_arguments(out).dataset for out in args.runs}
    if len(datasets) != 1:
        sys.exit(f"size_scores: the runs mix datasets ({', '.join(sorted(datasets))}); pool runs of one")
    dataset = datasets.pop()

    started = time.perf_counter()
    runs, deviations, n_sets = [], [], set()
    for out in args.runs:
        d = load_or_measure(out)
        n_sets.add(len(d["subsets"]))
        scores, lines = rules(d)
        runs.append(picks(d, scores, DEFAULT_BUDGETS))
        deviations.append(lines)
    sides = [line[0] for line in deviations[0]]
    rows = []
    for name in runs[0]:
        cell, cell_se, overall, overall_se = pooled_gaps(runs, name, "monotone")
        accuracy = np.mean([r[name].mean() for r in runs])
        last = cell[-len(DEFAULT_BUDGETS):]
        rows.append([name, f"{accuracy:.4f}", f"{overall:+.4f} ± {overall_se:.4f}", str(int((cell > cell_se).sum())),
                     str(int((cell < -cell_se).sum())), ", ".join(f"{g:+.3f}" for g in last[-4:])])
    big = [f"{b * 1e3:g}" for b in DEFAULT_BUDGETS[-4:]]
    text = [table(["rule", "mean held-out accuracy over cells", "minus monotone, pooled", "cells > 1 SE better",
                   "cells > 1 SE worse", f"minus monotone at {sides[-1]}x{sides[-1]}, {', '.join(big)} ms"], rows), ""]
    dev_rows = []
    for j, side in enumerate(sides):
        per_run = [lines[j] for lines in deviations]
        dev_rows.append([str(side), str(per_run[0][1])] + [f"{np.mean([r[k] for r in per_run]):.4f}" for k in (2, 3)]
                        + [f"{np.mean([r[4] for r in per_run]):.2f}", f"{np.mean([r[5] for r in per_run]):.2f}"])
    text += [table(["side", "training images per run", "deviation SD across sets", "its binomial noise",
                    "shrink weight (mean)", "correlation with the held-out deviation"], dev_rows)]
    body = "\n".join(text)
    print(body)
    wall = time.perf_counter() - started
    os.makedirs(args.results, exist_ok=True)
    path = os.path.join(args.results, f"size-scores-{dataset}.md")
    names = " ".join(os.path.basename(r.rstrip("/")) for r in args.runs)
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"# Per-size scores against one score per set ({dataset})\n\n"
                f"`python -P benchmarks/size_scores.py {names}` on {len(runs)} demo runs ({wall:.0f} s here; "
                f"per-item correctness read from each run's `{CACHE}` when kept): all "
                f"{', '.join(map(str, sorted(n_sets)))} subsets trained per run, the affordable set of each of the "
                f"{runs[0]['monotone'].shape[0]} cells picked by each rule from predicted costs and judged on that "
                "size's held-out images (one per picture); gaps paired over pictures, pooled over runs. The "
                "deviation table averages the runs.\n\n" + body + "\n")
    print(f"size_scores: report written to {path} ({wall:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
