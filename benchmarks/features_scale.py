"""Sixteen features in minutes: fit time and held-out accuracy on time as features are added.

The data: natural-size pictures (:func:`polydom.featurizers.natural.load_natural_images`, about
0.03 to 1.9 MP) labelled by their background, a photo (1) or a graphic (0); most hold an inset of
the other kind (15-60% of the area) and every one carries sensor-like noise, so that no single
feature settles the question. 240 pictures train, 120 are held out.

Features are added in a fixed order: the ten built-in ones (cheapest first), then the six of
``benchmarks/lab/scale_features.py`` (colour statistics, saturation histogram, grey-level entropy,
palette size, flat share, a face count with scikit-image's bundled cascade).

1. **Extraction**, once: every feature of every training picture, one after another (default
   settings, no parallel workers), and of every held-out picture. A fit with the first ``k``
   features is charged its features' share of that pass.
2. **The rest of the fit**, for each ``k``: ``CostSensitiveClassifier(features=first k)`` with
   default settings on a cache holding only the feature matrix (no cost fits, no trained sets):
   timing pass, screening, training, build.
3. **Held-out comparison** (on time: an answer whose measured time exceeds its budget is wrong),
   in 3 size ranges x 10 budgets, each answer's time the held-out pictures' measured feature
   times: polydom with 12 features against exhaustive cross-validated search over all 4,096
   sets of the 12 (the same two learners, the same folds, the same cost curves: per picture
   and budget the best-scoring set whose predicted cost fits), and polydom with 16 against
   forward selection over the 16 (per picture and budget the longest prefix that fits).

    python -P benchmarks/features_scale.py [--ks 4,5,...,16] [--seed 0] [--quick] [--repeats 1]
        [--cache DIR] [--out benchmarks/results/features-scale.md]

With ``--repeats R`` every ``k`` is fitted R times (the later passes time the fit only, interleaved
over the ``k``), and the timing table reports each ``k``'s median: one fit's search depends on the
cost curves its timing pass measures, so its length varies from fit to fit.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import pathlib
import shlex
import sys
import tempfile
import time
import warnings

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import peers  # noqa: E402  (subsets scored and refitted as the peers benchmark does)
from lab import scale_features  # noqa: E402  (registers the custom features)

BUILTIN_ORDER = ("size_meta", "intensity_hist", "thumbnail", "fft_bands", "edge_density", "lbp", "glcm", "harris",
                 "hog", "gabor")
FEATURE_ORDER = BUILTIN_ORDER + scale_features.CUSTOM_FEATURES
BUDGETS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
RANGES = 3
#: The largest pictures, (height, width) of a landscape one: 1.9 MP, a common web and phone-share size.
MAX_SHAPE = (1200, 1600)


# --------------------------------------------------------------------------- data

def scale_images(n: int, seed: int, *, inset_share=(0.15, 0.6), p_inset=0.8, noise=(2.0, 10.0), **shape):
    """``n`` natural-size pictures labelled by their background kind (1 photo, 0 graphic).

    A share ``p_inset`` of them holds an inset of the other kind covering ``inset_share`` of the
    area; every one gets Gaussian noise with a standard deviation drawn from ``noise`` (grey levels).
    """
    from PIL import Image

    from polydom.featurizers.natural import load_natural_images

    images, labels = load_natural_images(2 * n, random_state=seed, **shape)
    rng = np.random.default_rng(seed + 7)
    donors = {lab: [j for j in range(n, 2 * n) if labels[j] == lab] for lab in (0, 1)}
    out = []
    for i in range(n):
        image, label = images[i].copy(), int(labels[i])
        if rng.random() < p_inset and donors[1 - label]:
            pool = donors[1 - label]
            donor = images[pool[int(rng.integers(len(pool)))]]
            h, w = image.shape[:2]
            share, aspect = rng.uniform(*inset_share), math.exp(rng.uniform(-0.5, 0.5))
            bh = max(8, min(h, int(math.sqrt(share * h * w / aspect))))
            bw = max(8, min(w, int(share * h * w / bh)))
            patch = np.asarray(Image.fromarray(donor).resize((bw, bh), Image.Resampling.BILINEAR))
            top, left = int(rng.integers(h - bh + 1)), int(rng.integers(w - bw + 1))
            image[top:top + bh, left:left + bw] = patch
        sigma = rng.uniform(*noise)
        out.append(np.clip(image + rng.normal(0.0, sigma, image.shape), 0, 255).astype(np.uint8))
    return out, np.asarray(labels[:n], dtype=np.int64)


# --------------------------------------------------------------------------- extraction

def extract_all(images, log, what: str, keep: str | None = None):
    """Every feature of ``FEATURE_ORDER`` (and the grey step) of every image, one after another;
    read from (or written to) the file ``keep`` when given."""
    from polydom.classifier.extraction import FeatureMatrix, extract_features
    from polydom.featurizers import resolve_features, with_steps

    items = with_steps(resolve_features(list(FEATURE_ORDER)), images)
    if keep is not None and os.path.exists(keep):
        with np.load(keep, allow_pickle=False) as data:
            names, widths = [str(n) for n in data["names"]], data["widths"].tolist()
            starts = np.concatenate([[0], np.cumsum(widths)]).astype(int)
            columns = {n: slice(int(a), int(a + w)) for n, a, w in zip(names, starts, widths)}
            log(f"{what}: extraction read from {keep}")
            return FeatureMatrix(data["X"], columns, data["seconds"], cpu_seconds=data["cpu_seconds"]), items
    t = time.perf_counter()
    matrix = extract_features(images, items, steps=False, n_jobs=None)
    if keep is not None:
        widths = [sl.stop - sl.start for sl in matrix.columns.values()]
        np.savez(keep, X=matrix.X, seconds=matrix.seconds, cpu_seconds=matrix.cpu_seconds,
                 names=np.array(list(matrix.columns)), widths=np.array(widths, dtype=np.int64))
    log(f"{what}: {len(images)} pictures x {len(FEATURE_ORDER)} features extracted in {time.perf_counter() - t:.0f} s")
    return matrix, items


def sub_matrix(matrix, names):
    """The columns and seconds of ``names`` (items: steps and features), in that order."""
    from polydom.classifier.extraction import FeatureMatrix

    position = {name: j for j, name in enumerate(matrix.columns)}
    parts, columns, start = [], {}, 0
    for name in names:
        sl = matrix.columns[name]
        parts.append(matrix.X[:, sl])
        columns[name] = slice(start, start + sl.stop - sl.start)
        start += sl.stop - sl.start
    cols = [position[n] for n in names]
    cpu = None if matrix.cpu_seconds is None else matrix.cpu_seconds[:, cols]
    return FeatureMatrix(np.hstack(parts), columns, matrix.seconds[:, cols], cpu_seconds=cpu)


def seed_feature_cache(cache_dir: str, images, matrix, names) -> float:
    """Write the training matrix of the features ``names`` where a classifier's fit reads it;
    the seconds its extraction took in the one pass (its items' share)."""
    from polydom.classifier import extraction
    from polydom.featurizers import resolve_features
    from polydom.featurizers import with_steps

    items = with_steps(resolve_features(list(names)), images)
    sub = sub_matrix(matrix, [item.name for item in items])
    path = extraction._cache_path(os.path.join(cache_dir, "features"), images, items)
    widths = [sub.columns[item.name].stop - sub.columns[item.name].start for item in items]
    extraction._write_cache(path, sub.X, sub.seconds, sub.cpu_seconds, [item.name for item in items], widths)
    return float(sub.seconds.sum())


# --------------------------------------------------------------------------- fits

def fit_polydom(images, y, names, cache_dir: str, seed: int):
    import polydom

    clf = polydom.CostSensitiveClassifier(features=list(names), cache_dir=cache_dir, random_state=seed,
                                          progress=False)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(images, y)
    return clf, time.perf_counter() - t


def fold_splits(y, seed: int):
    """The folds a default fit scores every set on (5-fold, the first of three shuffled draws)."""
    from polydom.classifier.learners import make_splits

    return make_splits(5, y, None, seed, repeats=3)[:5]


def score_sets(X, y, columns, sets, splits):
    """``{set: (mean cv accuracy, learner, fits)}`` with polydom's two default learners, scored as
    the peers benchmark scores its subsets (the better learner wins)."""
    from polydom.classifier.learners import default_learners

    return peers.score_subsets(X, y, columns, sets, default_learners(), splits, n_jobs=2)


def refit(X, y, columns, names, learner):
    """``(model, its columns)`` of ``learner`` on every training row of ``names``; None for no features."""
    from polydom.classifier.learners import default_learners

    model = peers.refit(X, y, columns, names, learner, default_learners())
    return None if model is None else (model, peers.columns_of(columns, names))


class SetCosts:
    """Predicted cost of feature sets at item sizes, from a fitted classifier's curves (the
    grey step counted once, where a set's features need it)."""

    def __init__(self, clf):
        self.index = clf.index_

    def of(self, names, size: float) -> float:
        return float(self.index.cost_of(list(names), float(size))) if names else 0.0


def serve_static(plan, X, columns, seconds, positions, requires, sizes, y, budgets, models, X_train, y_train,
                 train_columns):
    """Correct and on-time arrays (budgets x items) for a per-item plan ``plan[b][i] -> (set, learner)``."""
    correct = np.zeros((len(budgets), len(y)), dtype=bool)
    measured = np.zeros((len(budgets), len(y)))
    majority = np.bincount(y_train).argmax()
    for b in range(len(budgets)):
        for i in range(len(y)):
            names, learner = plan[b][i]
            if names not in models:
                models[names] = refit(X_train, y_train, train_columns, names, learner)
            fitted = models[names]
            if fitted is None:
                predicted = majority
            else:
                model, cols = fitted
                predicted = model.predict(X[i:i + 1, cols])[0]
            correct[b, i] = predicted == y[i]
            items = set(names) | {s for n in names for s in requires.get(n, ())}
            measured[b, i] = sum(seconds[i, positions[n]] for n in items)
    return correct, measured


def exhaustive_plan(scores, costs: SetCosts, sizes, budgets):
    """Per budget and item, the best-scoring set whose predicted cost fits (ties: cheaper, smaller)."""
    plan = [[None] * len(sizes) for _ in budgets]
    for i, size in enumerate(sizes):
        cost = {s: costs.of(s, size) for s in scores}
        ranked = sorted(scores, key=lambda s: (-scores[s][0], cost[s], len(s)))
        for b, budget in enumerate(budgets):
            chosen = next(s for s in ranked if cost[s] <= budget)
            plan[b][i] = (chosen, scores[chosen][1])
    return plan


def forward_selection(X, y, columns, names, splits):
    """Cost-blind forward selection: the order and each prefix's (score, learner)."""
    order, prefix = [], [score_sets(X, y, columns, [()], splits)[()]]
    while len(order) < len(names):
        rest = [n for n in names if n not in order]
        candidates = [tuple(order) + (c,) for c in rest]
        scored = score_sets(X, y, columns, candidates, splits)
        best = max(range(len(rest)), key=lambda j: (scored[candidates[j]][0], -j))
        order.append(rest[best])
        prefix.append(scored[candidates[best]])
    return order, prefix


def forward_plan(order, prefix, costs: SetCosts, sizes, budgets):
    plan = [[None] * len(sizes) for _ in budgets]
    for i, size in enumerate(sizes):
        fits = [costs.of(order[:k], size) for k in range(len(order) + 1)]
        for b, budget in enumerate(budgets):
            k = max(k for k in range(len(order) + 1) if fits[k] <= budget)
            plan[b][i] = (tuple(order[:k]), prefix[k][1])
    return plan


# --------------------------------------------------------------------------- comparison

def polydom_answers(clf, held, sizes, y, budgets):
    """Correct and measured arrays of polydom's replayed walk over the held-out pictures."""
    from polydom.demo.evaluation import serve_grid

    features = sub_matrix(held, list(clf.feature_columns_))
    seconds = held.seconds[:, [list(held.columns).index(n) for n in clf.index_.features]]
    result = serve_grid(clf, features.X, seconds, sizes, y, budgets)
    return result.correct, result.measured


def cells(correct, measured, budgets, ranges):
    """On-time correctness per (range, budget) cell: a vector over the cell's items."""
    on_time = correct & (measured <= np.asarray(budgets)[:, None])
    return {(r, b): on_time[b, rows].astype(float) for r, rows in enumerate(ranges) for b in range(len(budgets))}


def compare(ours: dict, theirs: dict) -> dict:
    """Per cell: difference of on-time accuracy and its paired standard error; counts."""
    out, within, behind = {}, 0, 0
    for cell in ours:
        d = ours[cell] - theirs[cell]
        se = float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else 0.0
        out[cell] = (float(d.mean()), se)
        within += d.mean() >= -se
        behind += -d.mean() > 2 * se
    return dict(cells=out, within=within, behind=behind)


# --------------------------------------------------------------------------- report

def plot(path: pathlib.Path, rows) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    ks = [r["k"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(ks, [r["extract"] for r in rows], "o-", label="extraction")
    left.plot(ks, [r["rest"] for r in rows], "s-", label="the rest of the fit")
    left.set_xlabel("features")
    left.set_ylabel("seconds")
    left.set_yscale("log")
    left.legend()
    right.plot(ks, [r["screened"] for r in rows], "o-", label="sets screened")
    right.plot(ks, [r["fully"] for r in rows], "s-", label="sets trained fully")
    right.plot(ks, [r["served"] for r in rows], "^-", label="sets the index serves")
    right.plot(ks, [2 ** (r["k"] + 1) for r in rows], ":", label="lattice (with the grey step)")
    right.set_yscale("log")
    right.set_xlabel("features")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path.name


def write_report(out: pathlib.Path, ctx: dict) -> None:
    rows, budgets = ctx["rows"], ctx["budgets"]
    L = ["# Sixteen features in minutes: fit time and accuracy on time as features are added", "",
         f"Command: `{ctx['command']}`. {ctx['machine']}", "",
         f"Data: {ctx['n_train']} training and {ctx['n_held']} held-out natural-size pictures "
         f"({ctx['mp'][0]:.2f}-{ctx['mp'][1]:.2f} MP), background photo or graphic, most with an inset of the other "
         f"kind; {ctx['positives']:.0%} photos. Default settings, 2 cores, one fit at a time.", "",
         "## Fit time against the number of features", "",
         "Extraction: each feature's share of one pass over the training pictures (one after another). The rest: "
         "the fit on a cache holding only that feature matrix (timing pass, screening, training, build). Sets "
         "served: the index's candidates, every set it serves at some size and budget; each is trained fully.", "",
         "| features | extraction (s) | the rest (s) | rest / previous | search | sets screened | trained fully "
         "| sets served (/ previous) | rounds | held-out on time, mean over cells |",
         "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    repeats = max(len(r["runs"]) for r in rows) if rows else 1
    if repeats > 1:
        L[-2] = L[-2].replace("| the rest (s) |", f"| the rest (s), median of {repeats} fits | each fit (s) |").replace(
            "| sets screened | trained fully |", "| sets screened (each fit) | trained fully |")
        L[-1] = "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|"
    prev = prev_served = None
    for r in rows:
        ratio = "" if prev is None else f"{r['rest'] / prev:.2f}"
        served = f"{r['served']}" + ("" if not prev_served else f" ({r['served'] / prev_served:.2f})")
        runs = f" | {', '.join(f'{v:.0f}' for v in r['runs'])}" if repeats > 1 else ""
        screened = f"{r['screened']}" + (f" ({', '.join(str(v) for v in r['screened_runs'])})" if repeats > 1 else "")
        L.append(f"| {r['k']} | {r['extract']:.0f} | {r['rest']:.0f}{runs} | {ratio} | {r['search']} | {screened} "
                 f"| {r['fully']} | {served} | {r['rounds']} | {r['on_time']:.3f} |")
        prev, prev_served = r["rest"], r["served"]
    if ctx.get("figure"):
        L += ["", f"![fit time and sets against features]({ctx['figure']})"]
    ek, fk = ctx["exhaustive_k"], ctx["forward_k"]
    for title, key in ((f"{ek} features: polydom against exhaustive search over all {2 ** ek:,} sets", "vs_exhaustive"),
                       (f"{fk} features: polydom against forward selection over the {fk}", "vs_forward"),
                       (f"{fk} features against {ek} features (both polydom)", "vs_twelve")):
        if key not in ctx:
            continue
        c = ctx[key]
        L += ["", f"## {title}", "",
              f"Within one paired standard error (or ahead): **{c['within']} of {len(c['cells'])}** cells; more than "
              f"two behind: **{c['behind']}**. Each cell: difference of on-time accuracy (ours minus theirs) ± paired SE.",
              "", "| size range | " + " | ".join(f"{1e3 * b:g} ms" for b in budgets) + " |",
              "|---|" + "---:|" * len(budgets)]
        for r, label in enumerate(ctx["range_labels"]):
            L.append(f"| {label} | " + " | ".join(f"{c['cells'][(r, b)][0]:+.3f} ± {c['cells'][(r, b)][1]:.3f}"
                                                  for b in range(len(budgets))) + " |")
    if "accuracy" in ctx:
        L += ["", "## On-time accuracy per budget (mean over the held-out pictures) and late share", "",
              "| method | " + " | ".join(f"{1e3 * b:g} ms" for b in budgets) + " |", "|---|" + "---:|" * len(budgets)]
        for name, (acc, late) in ctx["accuracy"].items():
            L.append(f"| {name} | " + " | ".join(f"{a:.3f} ({100 * l:.0f}% late)" for a, l in zip(acc, late)) + " |")
    L += ["", "## Notes", ""] + [f"- {n}" for n in ctx["notes"]]
    out.write_text("\n".join(L) + "\n")


def timed_fit(k: int, label: str, args, ctx: dict, train, y_train, matrix) -> tuple:
    """A default fit with the first ``k`` features on a fresh cache holding only their matrix:
    ``(classifier, the rest in seconds, extraction seconds)``."""
    names = FEATURE_ORDER[:k]
    cache = os.path.join(ctx["tmp"], label)
    extract = seed_feature_cache(cache, train, matrix, names)
    clf, seconds = fit_polydom(train, y_train, names, cache, args.seed)
    return clf, seconds, extract


def add_run(row: dict, clf, seconds: float) -> dict:
    """``row`` (a line of the timing table) with one more fit: its time, sets screened, sets
    trained fully and sets the index serves (its candidates) join the runs, and the line shows
    their medians."""
    stats = clf.fit_stats_
    row.setdefault("runs", []).append(seconds)
    row.setdefault("screened_runs", []).append(stats["fully_trained"] + stats["partly_trained"])
    row.setdefault("fully_runs", []).append(stats["fully_trained"])
    row.setdefault("served_runs", []).append(len(clf.index_.candidates))
    row.update(rest=float(np.median(row["runs"])), screened=int(np.median(row["screened_runs"])),
               fully=int(np.median(row["fully_runs"])), served=int(np.median(row["served_runs"])))
    return row


def fit_and_compare(k: int, args, ctx: dict, data, train, out: pathlib.Path) -> None:
    """The first fit with ``k`` features: its timing row, its held-out answers and the comparisons."""
    matrix, held, y_train, y_held, sizes, ranges, splits, answers, fitted, log = data
    clf, seconds, extract = timed_fit(k, f"k{k}", args, ctx, train, y_train, matrix)
    answers[k] = polydom_answers(clf, held, sizes, y_held, BUDGETS)
    on_time = cells(*answers[k], BUDGETS, ranges)
    row = add_run(dict(k=k, extract=extract, rounds=clf.index_.stats.get("exploration_rounds", 0),
                       search=clf.index_.params.get("search", "lattice"),
                       on_time=float(np.mean([v.mean() for v in on_time.values()]))), clf, seconds)
    ctx["rows"] = sorted(ctx["rows"] + [row], key=lambda r: r["k"])
    fitted[k] = clf
    log(f"{k} features: extraction {extract:.0f} s, the rest {seconds:.0f} s, {row['screened']} sets screened, "
        f"{row['fully']} trained fully ({row['search']}), on time {row['on_time']:.3f}")
    correct, measured = answers[k]
    late = measured > np.asarray(BUDGETS)[:, None]
    if k in (args.exhaustive_k, args.forward_k):
        ctx["accuracy"][f"polydom, {k} features"] = ((correct & ~late).mean(axis=1), late.mean(axis=1))
    if k == args.exhaustive_k:
        compare_peer("exhaustive", k, ctx, data)
    if k == args.forward_k:
        compare_peer("forward", k, ctx, data)
    if args.exhaustive_k in answers and args.forward_k in answers and "vs_twelve" not in ctx:
        ctx["vs_twelve"] = compare(cells(*answers[args.forward_k], BUDGETS, ranges),
                                   cells(*answers[args.exhaustive_k], BUDGETS, ranges))
    ctx["figure"] = plot(out.with_suffix(".png"), ctx["rows"])
    write_report(out, ctx)  # after every fit: a run cut short keeps what it measured


def refit_timing(k: int, repeat: int, args, ctx: dict, train, y_train, matrix, log, out) -> None:
    """Another fit with ``k`` features on an empty fit cache, for the timing table only."""
    clf, seconds, _ = timed_fit(k, f"k{k}-repeat{repeat}", args, ctx, train, y_train, matrix)
    row = add_run(next(r for r in ctx["rows"] if r["k"] == k), clf, seconds)
    log(f"{k} features, repeat {repeat}: the rest {seconds:.0f} s, {row['screened_runs'][-1]} sets screened, "
        f"{row['fully_runs'][-1]} trained fully; median of {len(row['runs'])} runs {row['rest']:.0f} s")
    ctx["figure"] = plot(out.with_suffix(".png"), ctx["rows"])
    write_report(out, ctx)


# --------------------------------------------------------------------------- main

def fit_order(ks, exhaustive_k: int, forward_k: int) -> list:
    """The comparisons' fits first, then the rest of the scale from the top down, so that a run
    cut short still holds the bars."""
    first = [k for k in (exhaustive_k, forward_k) if k in ks]
    return first + sorted((k for k in ks if k not in first), reverse=True)


def compare_peer(peer: str, k: int, ctx, data) -> None:
    """Score ``peer`` over the first ``k`` features and compare polydom's answers with its own."""
    from polydom.featurizers import resolve_features

    matrix, held, y_train, y_held, sizes, ranges, splits, answers, fitted, log = data
    names = FEATURE_ORDER[:k]
    costs = SetCosts(fitted[k])
    t = time.perf_counter()
    if peer == "exhaustive":
        sets = [tuple(n for n, keep in zip(names, mask) if keep) for mask in itertools.product((0, 1), repeat=len(names))]
        scores = score_sets(matrix.X, y_train, matrix.columns, sets, splits)
        plan = exhaustive_plan(scores, costs, sizes, BUDGETS)
        label = f"exhaustive search ({len(sets)} sets)"
    else:
        order, prefix = forward_selection(matrix.X, y_train, matrix.columns, list(names), splits)
        plan = forward_plan(order, prefix, costs, sizes, BUDGETS)
        label = "forward selection"
        ctx["notes"].append("Forward selection's order: " + " → ".join(
            f"{n} ({s[0]:.3f})" for n, s in zip(order, prefix[1:])))
    log(f"{label} at {k} features scored in {time.perf_counter() - t:.0f} s")
    positions = {name: j for j, name in enumerate(held.columns)}
    requires = {f.name: tuple(f.requires) for f in resolve_features(list(FEATURE_ORDER))}
    correct, measured = serve_static(plan, held.X, held.columns, held.seconds, positions, requires, sizes, y_held,
                                     BUDGETS, {}, matrix.X, y_train, matrix.columns)
    ctx["vs_exhaustive" if peer == "exhaustive" else "vs_forward"] = compare(
        cells(*answers[k], BUDGETS, ranges), cells(correct, measured, BUDGETS, ranges))
    late = measured > np.asarray(BUDGETS)[:, None]
    ctx["accuracy"][f"{label}, {k} features"] = ((correct & ~late).mean(axis=1), late.mean(axis=1))


def separation(ctx, matrix, held, y_train, y_held, splits, k_all: int) -> None:
    """How hard the task is: all features against the best single one, cross-validated and held out."""
    single = score_sets(matrix.X, y_train, matrix.columns, [(n,) for n in FEATURE_ORDER[:k_all]], splits)
    best = max(single.items(), key=lambda kv: kv[1][0])
    every = next(iter(score_sets(matrix.X, y_train, matrix.columns, [tuple(FEATURE_ORDER[:k_all])], splits).values()))
    ctx["notes"].append(f"Cross-validated accuracy on the training pictures: all {k_all} features {every[0]:.3f}; "
                        f"the best single feature, {best[0][0]}, {best[1][0]:.3f}.")
    model_all, cols_all = refit(matrix.X, y_train, matrix.columns, tuple(FEATURE_ORDER[:k_all]), every[1])
    model_one, cols_one = refit(matrix.X, y_train, matrix.columns, best[0], best[1][1])
    acc_all = float((model_all.predict(held.X[:, cols_all]) == y_held).mean())
    acc_one = float((model_one.predict(held.X[:, cols_one]) == y_held).mean())
    ctx["notes"].append(f"Held-out accuracy, time aside: all {k_all} features {acc_all:.3f}; {best[0][0]} alone "
                        f"{acc_one:.3f} (the bar: all at most 0.95 and at least 0.05 above the best single feature).")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", default=",".join(str(k) for k in range(4, 17)))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a smoke test: few small pictures")
    parser.add_argument("--exhaustive-k", type=int, default=12, help="features of the exhaustive comparison")
    parser.add_argument("--forward-k", type=int, default=16, help="features of the forward-selection comparison")
    parser.add_argument("--repeats", type=int, default=1,
                        help="fits per k for the timing table (the first also serves the comparisons); "
                             "the table reports each k's median")
    parser.add_argument("--cache", default=None, help="where the extraction is kept between runs")
    parser.add_argument("--out", default=str(HERE / "results" / "features-scale.md"))
    args = parser.parse_args(argv)
    ks = sorted({int(k) for k in args.ks.split(",")})
    started = time.perf_counter()
    log = peers.elapsed_log(started)

    from threadpoolctl import threadpool_limits

    n_train, n_held = (40, 24) if args.quick else (240, 120)
    shape = dict(max_shape=(240, 320), min_shape=(120, 160)) if args.quick else dict(max_shape=MAX_SHAPE)
    images, y = scale_images(n_train + n_held, args.seed, **shape)
    train, held_images = images[:n_train], images[n_train:]
    y_train, y_held = y[:n_train], y[n_train:]
    sizes = np.array([im.shape[0] * im.shape[1] for im in held_images], dtype=np.float64)
    order = np.argsort(sizes, kind="stable")
    ranges = [np.sort(part) for part in np.array_split(order, RANGES)]
    log(f"{n_train} training and {n_held} held-out pictures made")
    out = pathlib.Path(args.out)
    ctx = dict(budgets=BUDGETS, exhaustive_k=args.exhaustive_k, forward_k=args.forward_k, n_train=n_train,
               n_held=n_held, notes=[], rows=[], accuracy={}, positives=float(y.mean()),
               range_labels=[f"{sizes[r].min() / 1e6:.2f}-{sizes[r].max() / 1e6:.2f} MP" for r in ranges],
               mp=(float(sizes.min() / 1e6), float(sizes.max() / 1e6)),
               command="python -P benchmarks/features_scale.py" + ("" if not sys.argv[1:] else " " + shlex.join(sys.argv[1:])),
               machine=f"Load average at the start: {' '.join(f'{v:.1f}' for v in os.getloadavg())}.")
    with threadpool_limits(1), tempfile.TemporaryDirectory(prefix="polydom-scale-") as tmp:
        ctx["tmp"] = tmp
        keep = None if args.cache is None else os.path.join(args.cache, f"extraction-{args.seed}-{n_train}-{{}}.npz")
        if keep is not None:
            os.makedirs(args.cache, exist_ok=True)
        matrix, _ = extract_all(train, log, "training pictures", keep and keep.format("train"))
        held, _ = extract_all(held_images, log, "held-out pictures", keep and keep.format("held"))
        splits = fold_splits(y_train, args.seed)
        separation(ctx, matrix, held, y_train, y_held, splits, max(ks))
        fitted, answers = {}, {}
        data = (matrix, held, y_train, y_held, sizes, ranges, splits, answers, fitted, log)
        for k in fit_order(ks, args.exhaustive_k, args.forward_k):
            fit_and_compare(k, args, ctx, data, train, out)
        for repeat in range(1, args.repeats):  # timing only: interleaved, so a drift in load touches every k
            for k in fit_order(ks, args.exhaustive_k, args.forward_k):
                refit_timing(k, repeat, args, ctx, train, y_train, matrix, log, out)
    log(f"report written to {out}")


if __name__ == "__main__":
    main()
