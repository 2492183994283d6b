"""Would scoring feature sets per item size pick better sets at a size? Measured, on a demo run.

A feature set is scored once, over training images of every size, and the index serves the best
score that fits at the item's size. The demo's held-out images show sets whose accuracy depends on
the size (on digits, edge_density and lbp help less at 280x280). This benchmark asks whether the
training data could have told: it trains *every* subset of the demo's eight features (the
classifier's raced learners, 3-fold grouped CV on the demo's training split), and for each cell of
the demo's grid (5 sizes x 11 budgets) picks the affordable set -- predicted cost at the size
within the budget, from the run's fitted curves; lookups only, no clock -- by four scores:

* **overall**: the set's cross-validated accuracy (what polydom uses);
* **per size**: its out-of-fold accuracy on the training images of that size alone;
* **shrunk**: the overall score plus the per-size deviation shrunk by empirical Bayes (the
  deviations' variance across sets over their binomial noise);
* **half**: the overall score plus half the deviation.

Each pick is judged on the held-out images of that size; differences are paired against
*overall* over the held-out pictures. It also prints how well a set's per-size deviation out of
fold predicts its held-out deviation (correlation across the 256 sets).

    polydom demo --out OUT [--dataset fashion-mnist]
    python -P benchmarks/size_scores.py --out OUT

Writes ``benchmarks/results/size-scores-DATASET.md``. Several minutes per data set on two cores
(all 256 sets are trained, and each set's out-of-fold probabilities once more).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
import warnings

import numpy as np

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def per_item(args):
    """Every subset's out-of-fold correctness on the training images, held-out correctness, CV score."""
    import polydom
    from polydom.demo.job import load_run_split, run_arguments
    from polydom.demo.settings import DEFAULT_FEATURES, DEFAULT_SIDES
    from polydom.extraction import extract_features
    from polydom.featurizers import resolve_features
    from polydom.precomputed import fit_features

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
    return dict(subsets=subsets, oof=np.array(oof, dtype=float), held=np.array(held, dtype=float),
                score=np.array(score), cost=cost, sizes=unique, train_sizes=sizes["train"],
                test_sizes=sizes["test"], pictures=test // len(DEFAULT_SIDES))


def rules(d: dict) -> tuple[dict, list[str]]:
    """Per rule and size, every set's score; and lines describing the deviations."""
    overall_oof = d["oof"].mean(axis=1)
    out, lines = {"overall": [], "per size": [], "shrunk": [], "half": []}, []
    for size in d["sizes"]:
        at = d["train_sizes"] == size
        n = int(at.sum())
        acc = d["oof"][:, at].mean(axis=1)
        deviation = acc - overall_oof
        noise = acc * (1 - acc) / n * (1 - n / len(at))
        signal = max(float(deviation.var() - noise.mean()), 0.0)
        weight = signal / (signal + noise)
        out["overall"].append(d["score"])
        out["per size"].append(d["score"] + deviation)
        out["shrunk"].append(d["score"] + weight * deviation)
        out["half"].append(d["score"] + 0.5 * deviation)
        held_dev = d["held"][:, d["test_sizes"] == size].mean(axis=1) - d["held"].mean(axis=1)
        lines.append(f"| {int(round(size ** 0.5))} | {n} | {deviation.std():.4f} | {np.sqrt(noise.mean()):.4f} | "
                     f"{weight.mean():.2f} | {np.corrcoef(deviation, held_dev)[0, 1]:.2f} |")
    return out, lines


def judge(d: dict, scores: dict, budgets) -> list[str]:
    """Per rule: mean held-out accuracy over cells, paired gap to *overall*, cells 1 SE better/worse."""
    picked = {name: [] for name in scores}
    for k, size in enumerate(d["sizes"]):
        test = d["test_sizes"] == size
        for budget in budgets:
            fits = d["cost"][:, k] <= budget
            for name, per_size in scores.items():
                best = int(np.argmax(np.where(fits, per_size[k], -np.inf)))
                picked[name].append(d["held"][best, test])
    base = np.array(picked["overall"])
    lines = []
    for name, cells in picked.items():
        cells = np.array(cells)  # (cells, pictures): one held-out image per picture in each cell
        gap = cells - base
        per_picture = gap.mean(axis=0)
        se = per_picture.std(ddof=1) / np.sqrt(len(per_picture))
        cell_se = gap.std(axis=1, ddof=1) / np.sqrt(gap.shape[1])
        better = int((gap.mean(axis=1) > cell_se).sum()) if name != "overall" else 0
        worse = int((gap.mean(axis=1) < -cell_se).sum()) if name != "overall" else 0
        lines.append(f"| {name} | {cells.mean():.4f} | {gap.mean():+.4f} ± {se:.4f} | {better} | {worse} |")
    return lines


def main(argv=None) -> int:
    from polydom.demo.job import add_run_arguments, run_arguments

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_arguments(parser)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    from polydom.demo.settings import DEFAULT_BUDGETS

    started = time.perf_counter()
    dataset = run_arguments(args.out).dataset
    d = per_item(args)
    scores, deviation_lines = rules(d)
    table = ["| rule | mean held-out accuracy over cells | minus overall | cells > 1 SE better | cells > 1 SE worse |",
             "|---|---|---|---|---|"] + judge(d, scores, DEFAULT_BUDGETS)
    deviations = ["| side | training images | deviation SD across sets | its binomial noise | shrink weight "
                  "(mean) | correlation with the held-out deviation |", "|---|---|---|---|---|---|"] + deviation_lines
    text = "\n".join(table + [""] + deviations)
    print(text)
    wall = time.perf_counter() - started
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, f"size-scores-{dataset}.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"# Per-size scores against one score per set ({dataset})\n\n"
                f"`python -P benchmarks/size_scores.py --out OUT` ({dataset}) on a demo run "
                f"({wall:.0f} s): all {len(d['subsets'])} subsets trained, the affordable set of each of the "
                f"{len(d['sizes']) * len(DEFAULT_BUDGETS)} cells picked by each rule from predicted costs and "
                f"judged on that size's held-out images ({len(d['pictures'])} images, one per picture per size); "
                "gaps paired over pictures.\n\n" + text + "\n")
    print(f"size_scores: report written to {path} ({wall:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
