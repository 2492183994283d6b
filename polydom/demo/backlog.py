"""Backlog triage: recall among the top K against the total budget, beside two fixed rankings.

``polydom demo --dataset backlog`` and ``benchmarks/backlog.py`` run :func:`run_backlog`:

1. **Data**: a backlog of JPEG files with a rare positive label
   (:func:`polydom.featurizers.moderation.write_backlog`: 5% captioned), and a labelled training
   sample from the same generator with more positives (30%), as a team labels one.
2. **Fit** the default classifier on the training sample (the photos demo's features).
3. **Two fixed rankings** over the whole backlog, each image decoded and its features computed on
   the real clock: *all features* (the full set's model) and *the cheapest feature* (the
   single feature cheapest at the median size, its model trained by the same black box). Their
   times: every decode plus every feature, or plus the cheapest one.
4. **Triage** (:meth:`~polydom.CostSensitiveClassifier.triage`) at total budgets that are
   fractions of the all-features time, for real, from the files.
5. **Judge**: recall among the top K (positives found over all positives), the time each spent,
   and whether triage ever exceeded its budget by more than its longest single step.
"""

from __future__ import annotations

import os
import pathlib
import tempfile
import time
from dataclasses import dataclass

import numpy as np

from .job import PHOTO_FEATURES, stamped_log

__all__ = ["BacklogSettings", "backlog_settings", "run_backlog"]

FEATURES = PHOTO_FEATURES
POSITIVE = "captioned"


@dataclass(frozen=True)
class BacklogSettings:
    """Sizes of one run."""

    n_backlog: int = 2000
    positive_share: float = 0.05
    k: int = 100
    n_train: int = 400
    train_share: float = 0.3
    fractions: tuple = (0.02, 0.05, 0.1, 0.15, 0.2, 0.3)
    shape: tuple = ()  # (min_shape, max_shape); () for the generator's natural sizes
    features: tuple = FEATURES


def backlog_settings(quick: bool = False) -> BacklogSettings:
    """The demo's settings: a smaller backlog than the benchmark's 2,000 (``quick``: a smoke test)."""
    if quick:
        return BacklogSettings(n_backlog=60, k=3, n_train=60, fractions=(0.1, 0.3), shape=((120, 160), (240, 320)),
                               features=("intensity_hist", "edge_density", "lbp"))
    return BacklogSettings(n_backlog=400, k=20, n_train=300)


def _recall(scores: np.ndarray, y: np.ndarray, k: int) -> float:
    top = np.lexsort((np.arange(len(scores)), -scores))[:k]
    return float(y[top].sum() / max(1, y.sum()))


def _extract(paths, names, features, log) -> tuple[dict, np.ndarray, np.ndarray]:
    """Every feature of every file, timed: ``({name: rows}, decode seconds, (n, features) seconds)``."""
    from polydom.featurizers.sources import decode_image

    vectors = {name: [] for name in names}
    decode = np.zeros(len(paths))
    seconds = np.zeros((len(paths), len(names)))
    begun = time.perf_counter()
    for i, path in enumerate(paths):
        start = time.perf_counter()
        array = decode_image(os.fspath(path), index=i)
        decode[i] = time.perf_counter() - start
        prepared: dict = {}
        for j, name in enumerate(names):  # the cheapest first: it pays the shared grey step
            start = time.perf_counter()
            vectors[name].append(features[name].evaluate(array, index=i, prepared=prepared))
            seconds[i, j] = time.perf_counter() - start
        if (i + 1) % 200 == 0 or i + 1 == len(paths):
            log(f"all features of {i + 1} of {len(paths)} backlog images computed "
                f"({time.perf_counter() - begun:.0f} s)")
    return {name: np.asarray(v) for name, v in vectors.items()}, decode, seconds


def _set_model(train_matrix, y, names):
    """The black box's model for the set ``names`` over the training matrix (the learner race,
    folds and refit a fit uses)."""
    from polydom.classifier.blackbox import FeatureSetLearner
    from polydom.classifier.learners import default_learners, make_splits

    learner = FeatureSetLearner(train_matrix.X, y, train_matrix.columns, default_learners(),
                                make_splits(5, y, random_state=0))
    return learner(names).model


def _scores(model, vectors, names) -> np.ndarray:
    X = np.hstack([vectors[n] for n in names])
    column = int(np.flatnonzero(model.classes_ == 1)[0])
    return model.predict_proba(X)[:, column]


def plot(path: pathlib.Path, ctx) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    runs = ctx["triage"]
    ax.plot([r["budget"] for r in runs], [r["recall"] for r in runs], "o-", label="triage")
    for name, marker in (("all features", "s"), ("cheapest feature", "^")):
        fixed = ctx["fixed"][name]
        ax.plot([fixed["seconds"]], [fixed["recall"]], marker, markersize=9, label=f"{name} (its extraction time)")
    ax.axhline(0.95 * ctx["fixed"]["all features"]["recall"], color="grey", linestyle=":", linewidth=1,
               label="0.95 x all features")
    ax.axvline(0.2 * ctx["fixed"]["all features"]["seconds"], color="grey", linestyle="--", linewidth=1,
               label="20% of the all-features time")
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # decades only: minor labels collide
    ax.set_xlabel("total budget / time spent (s)")
    ax.set_ylabel(f"recall among the top {ctx['k']}")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path.name


def _ratio(recall: float, reference: float) -> str:
    return f"{recall / reference:.2f}" if reference > 0 else "n/a"


def write_report(out: pathlib.Path, ctx) -> None:
    fixed, runs, v = ctx["fixed"], ctx["triage"], ctx["verdict"]
    all_time = fixed["all features"]["seconds"]
    reference = fixed["all features"]["recall"]
    L = ["# Backlog triage: the top K within a total budget", "",
         f"Command: `{ctx['command']}`. {ctx['machine']}", "",
         f"Backlog: {ctx['n']} JPEG files, {ctx['positives']} positive ({ctx['positive']}), "
         f"{ctx['mp'][0]:.2f}-{ctx['mp'][1]:.2f} MP; K = {ctx['k']}. Training: {ctx['n_train']} labelled images "
         f"({ctx['train_share']:.0%} positive); fit in {ctx['fit_seconds']:.0f} s. Features: {', '.join(ctx['features'])}.", "",
         "Recall: positives in the top K over all positives. Time: decoding and feature extraction on the real "
         "clock (for triage also reading image headers); triage's calls took the wall time shown.", "",
         "| ranking | total budget (s) | share of all-features time | time spent (s) | wall (s) | recall | "
         "recall / all features' |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name in ("all features", "cheapest feature"):
        f = fixed[name]
        L.append(f"| {name} | | | {f['seconds']:.1f} | | {f['recall']:.3f} | {_ratio(f['recall'], reference)} |")
    for r in runs:
        L.append(f"| triage ({r['stopped']}) | {r['budget']:.1f} | {r['budget'] / all_time:.0%} | {r['spent']:.1f} | "
                 f"{r['wall']:.1f} | {r['recall']:.3f} | {_ratio(r['recall'], reference)} |")
    L += ["", f"Best triage recall within 20% of the all-features time: **{v['best_recall']:.3f}** "
          f"({_ratio(v['best_recall'], reference)} of the all-features ranking's; the bar is 0.95). Budget exceeded by more than the "
          f"longest single step: **{v['overruns']}** of {len(runs)} runs (largest overrun "
          f"{1e3 * v['largest_overrun']:.1f} ms, longest step {1e3 * v['longest_step']:.1f} ms).", ""]
    if ctx.get("figure"):
        L += [f"![recall against the total budget]({ctx['figure']})", ""]
    out.write_text("\n".join(L) + "\n")


def _kept_extraction(folder, paths, names, features, log):
    """:func:`_extract`'s result, read from ``folder`` where an earlier run on these very files
    measured it, else measured now and kept there."""
    kept = folder / f"extraction-{'-'.join(names)}.npz"
    if kept.is_file():
        with np.load(kept) as saved:
            log(f"the all-features extraction measured earlier is read from {kept}")
            return {n: saved[f"x_{n}"] for n in names}, saved["decode"], saved["seconds"]
    vectors, decode, seconds = _extract(paths, names, features, log)
    np.savez(kept, decode=decode, seconds=seconds, **{f"x_{n}": v for n, v in vectors.items()})
    return vectors, decode, seconds


def _triage_runs(clf, paths, y, settings: BacklogSettings, all_seconds: float, log) -> list[dict]:
    """Triage of the files at each of ``settings.fractions`` of the all-features time, for real."""
    runs = []
    for fraction in settings.fractions:
        budget = fraction * all_seconds
        t0 = time.perf_counter()
        result = clf.triage([os.fspath(p) for p in paths], settings.k, total_budget=budget, progress=True)
        wall = time.perf_counter() - t0
        runs.append(dict(budget=budget, spent=result.spent, wall=wall, longest=result.longest_step,
                         recall=float(y[result.items].sum() / max(1, y.sum())), stopped=result.stopped,
                         refined=result.refined))
        log(f"triage at {budget:.1f} s: recall {runs[-1]['recall']:.3f}, spent {result.spent:.1f} s, "
            f"{result.refined} rungs climbed ({result.stopped})")
    return runs


def _verdict(runs: list[dict], everything: dict) -> dict:
    """The bar: triage's best recall within 20% of the all-features time against the all-features
    recall, and the runs that went past their budget by more than their longest step."""
    within = [r for r in runs if r["budget"] <= 0.2 * everything["seconds"] + 1e-9]
    best = max((r["recall"] for r in within), default=0.0)
    overruns = [r["spent"] - r["budget"] for r in runs]
    verdict = dict(best_recall=best, best_ratio=best / max(everything["recall"], 1e-9),
                   overruns=sum(1 for r, o in zip(runs, overruns) if o > r["longest"]),
                   largest_overrun=max(0.0, max(overruns, default=0.0)),
                   longest_step=max((r["longest"] for r in runs), default=0.0))
    verdict["met"] = verdict["best_ratio"] >= 0.95 and verdict["overruns"] == 0
    return verdict


def run_backlog(out, *, settings: BacklogSettings | None = None, quick: bool = False, random_state: int = 0,
                cache_dir=None, backlog_dir=None, command: str = "polydom demo --dataset backlog", log=None) -> dict:
    """Run the comparison and write ``out`` (a Markdown report, its figure beside it).

    ``backlog_dir``: where the backlog's files are written (default a temporary folder); the
    all-features extraction is kept there too, so a second run on the same files reuses its
    measured times. Returns the report's numbers.
    """
    import polydom
    from polydom.classifier.extraction import extract_features
    from polydom.featurizers import with_steps
    from polydom.featurizers.moderation import iter_backlog, read_backlog, write_backlog
    from polydom.featurizers.sources import header_shape

    settings = settings or backlog_settings(quick)
    log = log or stamped_log()

    shape = dict(zip(("min_shape", "max_shape"), settings.shape))
    with tempfile.TemporaryDirectory(prefix="polydom-backlog-") as scratch:
        folder = pathlib.Path(backlog_dir or os.path.join(scratch, "backlog"))
        if not (folder / "labels.csv").is_file():
            write_backlog(folder, settings.n_backlog, positive=POSITIVE, positive_share=settings.positive_share,
                          random_state=random_state, **shape)
        paths, y = read_backlog(folder)
        log(f"backlog of {len(paths)} files ({int(y.sum())} positive) in {folder}")
        train = list(iter_backlog(settings.n_train, positive=POSITIVE, positive_share=settings.train_share,
                                  random_state=random_state + 1, **shape))
        images, y_train = [a for a, _ in train], np.array([b for _, b in train])
        cache = cache_dir or os.path.join(scratch, "cache")
        t0 = time.perf_counter()
        clf = polydom.CostSensitiveClassifier(features=list(settings.features), cache_dir=cache,
                                              random_state=random_state).fit(images, y_train)
        fit_seconds = time.perf_counter() - t0
        log(f"classifier fitted in {fit_seconds:.0f} s")
        sizes = np.array([h * w for h, w in (header_shape(os.fspath(p)) for p in paths)], dtype=float)
        median = float(np.median(sizes))
        names = sorted(settings.features, key=lambda n: clf.index_.cost_of([n], median))
        features = clf.planner_.features
        vectors, decode, seconds = _kept_extraction(folder, paths, names, features, log)
        # The fit's own items in its order: the training matrix comes from the fit's feature cache.
        matrix = extract_features(images, with_steps([features[n] for n in settings.features], images), steps=False,
                                  cache_dir=os.path.join(cache, "features"))
        fixed = {}
        for name, chosen in (("all features", names), ("cheapest feature", names[:1])):
            model = _set_model(matrix, y_train, chosen)
            spent = float(decode.sum() + seconds[:, :len(chosen)].sum())
            fixed[name] = dict(seconds=spent, recall=_recall(_scores(model, vectors, chosen), y, settings.k))
            log(f"{name}: recall {fixed[name]['recall']:.3f}, {spent:.1f} s")
        runs = _triage_runs(clf, paths, y, settings, fixed["all features"]["seconds"], log)
    verdict = _verdict(runs, fixed["all features"])
    ctx = dict(features=settings.features, n=len(paths), positives=int(y.sum()), positive=POSITIVE, k=settings.k, n_train=settings.n_train,
               train_share=settings.train_share, fit_seconds=fit_seconds,
               mp=(float(sizes.min() / 1e6), float(sizes.max() / 1e6)), fixed=fixed, triage=runs, verdict=verdict,
               command=command,
               machine=f"Load average at the start: {' '.join(f'{v:.1f}' for v in os.getloadavg())}.")
    out = pathlib.Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    ctx["figure"] = plot(out.with_suffix(".png"), ctx)
    write_report(out, ctx)
    return ctx
