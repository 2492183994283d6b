"""Several labels, one walk: a multilabel classifier against one classifier per label.

``polydom demo --dataset policies`` and ``benchmarks/policies.py`` run :func:`run_policies`:

1. **Data**: moderation-style images (:func:`polydom.featurizers.moderation.load_moderation_images`),
   five labels each: photo, captioned, blurred, grainy, dark.
2. **Fit**, on the same training images: one multilabel classifier (``fit(images, Y)``), and one
   single-label classifier per label. They share one cache directory, so the features are
   extracted and timed once.
3. **Serve** every held-out image for real at each total budget per image: the multilabel
   classifier's one walk gets the whole budget; each per-label classifier an equal share (the
   budget divided by the number of labels). Each call is timed from outside
   (``time.perf_counter`` around ``explain``): an answer over its budget is wrong for every label
   it answers.
4. **Compare**, per budget: the mean per-label accuracy on time of both, the paired difference
   over images (each image's mean over labels) with its standard error, and the late shares. A
   budget *binds* when the one walk computes less than its unlimited set for at least
   :data:`BINDS` of the images.
"""

from __future__ import annotations

import os
import pathlib
import tempfile
import time
from dataclasses import dataclass

import numpy as np

from .job import PHOTO_FEATURES, stamped_log

__all__ = ["PolicySettings", "policy_settings", "run_policies", "FEATURES", "BUDGETS", "BINDS"]

#: The photos demo's features: natural sizes, and every policy has one that tells it.
FEATURES = PHOTO_FEATURES
BUDGETS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
#: The share of images on which the one walk must stop short of its unlimited set for a budget to bind.
BINDS = 0.1


@dataclass(frozen=True)
class PolicySettings:
    """Sizes of one run: training and held-out images, their shapes, the budgets."""

    n_train: int = 300
    n_held: int = 200
    budgets: tuple = BUDGETS
    shape: tuple = ()  # (min_shape, max_shape); () for the generator's natural sizes
    features: tuple = FEATURES


def policy_settings(quick: bool = False) -> PolicySettings:
    """The demo's settings; ``quick`` is a smoke test whose numbers carry large standard errors."""
    if quick:
        return PolicySettings(n_train=40, n_held=20, budgets=BUDGETS[1::3], shape=((120, 160), (240, 320)),
                              features=("intensity_hist", "edge_density", "lbp"))
    return PolicySettings()


def serve(clf, images, budget: float):
    """``(answers, late, computed)`` of ``clf.explain`` on each image alone, timed from outside."""
    answers, late, computed = [], [], []
    for image in images:
        start = time.perf_counter()
        explanation = clf.explain([image], budget=budget)[0]
        seconds = time.perf_counter() - start
        answers.append(explanation.label)
        late.append(seconds > budget)
        computed.append(frozenset(explanation.features))
    return answers, np.array(late), computed


def compare(multi, singles, images, Y, budgets, unlimited, log) -> list[dict]:
    """Per budget: both methods' mean per-label on-time accuracy, the paired difference and its SE."""
    n, n_labels = Y.shape
    rows = []
    for budget in budgets:
        answers, late, computed = serve(multi, images, budget)
        one = (np.stack(answers) == Y) & ~late[:, None]  # (n, labels): right and on time
        per = np.zeros((n, n_labels), dtype=bool)
        per_late = np.zeros((n, n_labels), dtype=bool)
        for label, single in enumerate(singles):
            got, tardy, _ = serve(single, images, budget / n_labels)
            per[:, label] = (np.asarray(got) == Y[:, label]) & ~tardy
            per_late[:, label] = tardy
        diff = one.mean(axis=1) - per.mean(axis=1)
        short = float(np.mean([c != u for c, u in zip(computed, unlimited)]))
        row = dict(budget=budget, one=float(one.mean()), one_se=float(one.mean(axis=1).std(ddof=1) / np.sqrt(n)),
                   per=float(per.mean()), per_se=float(per.mean(axis=1).std(ddof=1) / np.sqrt(n)),
                   diff=float(diff.mean()), se=float(diff.std(ddof=1) / np.sqrt(n)),
                   one_late=float(late.mean()), per_late=float(per_late.mean()), short=short, binds=short >= BINDS,
                   one_labels=one.mean(axis=0).tolist(), per_labels=per.mean(axis=0).tolist(),
                   features=float(np.mean([len(c) for c in computed])))
        rows.append(row)
        log(f"{1e3 * budget:g} ms: one walk {row['one']:.3f} ({100 * row['one_late']:.1f}% late), per label "
            f"{row['per']:.3f} ({100 * row['per_late']:.1f}% late), difference {row['diff']:+.3f} ± {row['se']:.3f}")
    return rows


def verdict(rows) -> dict:
    behind = [r for r in rows if r["diff"] < -r["se"]]
    binding = [r for r in rows if r["binds"]]
    ahead = [r for r in binding if r["diff"] > 2 * r["se"]]
    return dict(behind=len(behind), binding=len(binding), ahead=len(ahead),
                met=not behind and len(ahead) * 2 >= len(binding) and binding)


def plot(path: pathlib.Path, rows) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    budgets = [1e3 * r["budget"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.errorbar(budgets, [r["one"] for r in rows], yerr=[r["one_se"] for r in rows], fmt="o-", label="one walk")
    left.errorbar(budgets, [r["per"] for r in rows], yerr=[r["per_se"] for r in rows], fmt="s-",
                  label="one classifier per label")
    left.set_xscale("log")
    left.set_xlabel("total budget per image (ms)")
    left.set_ylabel("mean per-label accuracy on time")
    left.legend()
    right.plot(budgets, [100 * r["one_late"] for r in rows], "o-", label="one walk")
    right.plot(budgets, [100 * r["per_late"] for r in rows], "s-", label="per label")
    right.set_xscale("log")
    right.set_xlabel("total budget per image (ms)")
    right.set_ylabel("late answers (%)")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path.name


def write_report(out: pathlib.Path, ctx: dict) -> None:
    rows, v = ctx["rows"], ctx["verdict"]
    L = ["# Several labels, one walk: a multilabel classifier against one classifier per label", "",
         f"Command: `{ctx['command']}`. {ctx['machine']}", "",
         f"Data: {ctx['n_train']} training and {ctx['n_held']} held-out images "
         f"({ctx['mp'][0]:.2f}-{ctx['mp'][1]:.2f} MP held out; `load_moderation_images`). Labels and their held-out positive shares: "
         + ", ".join(f"{name} {share:.0%}" for name, share in zip(ctx["labels"], ctx["positives"])) + ". "
         f"Features: {', '.join(ctx['features'])}; default settings otherwise. Fits: multilabel "
         f"{ctx['fit_multi']:.0f} s, the {len(ctx['labels'])} per-label classifiers {ctx['fit_singles']:.0f} s "
         "together (one shared extraction and timing pass).", "",
         "Each cell is the mean per-label accuracy on time over the held-out images (a late answer is wrong for "
         "every label it answers). The per-label classifiers each get the budget divided by the number of labels. "
         "Difference: one walk minus per label, ± paired standard error over images. "
         f"Binds: the one walk computed less than its unlimited set for at least {BINDS:.0%} of the images.", "",
         "| budget | one walk | late | per label | late | difference | binds | features computed (one walk) |",
         "|---:|---:|---:|---:|---:|---:|---|---:|"]
    for r in rows:
        L.append(f"| {1e3 * r['budget']:g} ms | {r['one']:.3f} | {100 * r['one_late']:.1f}% | {r['per']:.3f} | "
                 f"{100 * r['per_late']:.1f}% | {r['diff']:+.3f} ± {r['se']:.3f} | "
                 f"{'yes' if r['binds'] else 'no'} ({100 * r['short']:.0f}%) | {r['features']:.1f} |")
    L += ["", f"Budgets where the one walk is more than one paired SE behind: **{v['behind']}**. Budgets that bind: "
          f"{v['binding']}; the one walk more than two paired SEs ahead in **{v['ahead']}** of them.", ""]
    if ctx.get("figure"):
        L += [f"![on-time accuracy and late share against the budget]({ctx['figure']})", ""]
    L += ["## Per label, on time", "", "| budget | " + " | ".join(f"{n} (one / per)" for n in ctx["labels"]) + " |",
          "|---:|" + "---:|" * len(ctx["labels"])]
    for r in rows:
        L.append(f"| {1e3 * r['budget']:g} ms | " + " | ".join(
            f"{a:.2f} / {b:.2f}" for a, b in zip(r["one_labels"], r["per_labels"])) + " |")
    L += ["", "## What the multilabel index ranks by", "",
          "Each feature set's score is its label-weighted accuracy: each label's cross-validated accuracy, weighted "
          "equally here (`Selection(label_weights=...)` changes the weights). Its unlimited set: "
          f"{', '.join(sorted(ctx['unlimited_set']))} (score {ctx['unlimited_score']:.3f}).", ""]
    out.write_text("\n".join(L) + "\n")


def run_policies(out, *, settings: PolicySettings | None = None, quick: bool = False, random_state: int = 0,
                 cache_dir=None, command: str = "polydom demo --dataset policies", log=None) -> dict:
    """Run the comparison and write ``out`` (a Markdown report, its figure beside it).

    Returns the report's numbers: ``rows`` (one per budget) and ``verdict``.
    """
    import polydom
    from polydom.featurizers.moderation import load_moderation_images

    settings = settings or policy_settings(quick)
    log = log or stamped_log()

    shape = dict(zip(("min_shape", "max_shape"), settings.shape))
    train, Y_train, labels = load_moderation_images(settings.n_train, random_state=random_state, **shape)
    held, Y_held, _ = load_moderation_images(settings.n_held, random_state=random_state + 1000, **shape)
    sizes = np.array([im.shape[0] * im.shape[1] for im in held], dtype=float)
    log(f"{settings.n_train} training and {settings.n_held} held-out images made")
    ctx = dict(features=settings.features, n_train=settings.n_train, n_held=settings.n_held, labels=labels, positives=Y_held.mean(axis=0).tolist(),
               mp=(float(sizes.min() / 1e6), float(sizes.max() / 1e6)), command=command,
               machine=f"Load average at the start: {' '.join(f'{v:.1f}' for v in os.getloadavg())}.")
    with tempfile.TemporaryDirectory(prefix="polydom-policies-") as scratch:
        cache = cache_dir or scratch

        def make():
            return polydom.CostSensitiveClassifier(features=list(settings.features), cache_dir=cache,
                                                   random_state=random_state)

        t0 = time.perf_counter()
        multi = make().fit(train, Y_train)
        ctx["fit_multi"] = time.perf_counter() - t0
        log(f"multilabel classifier fitted in {ctx['fit_multi']:.0f} s")
        t0 = time.perf_counter()
        singles = []
        for label in range(len(labels)):
            singles.append(make().fit(train, Y_train[:, label]))
            log(f"per-label classifier {label + 1} of {len(labels)} ({labels[label]}) fitted")
        ctx["fit_singles"] = time.perf_counter() - t0
    full = multi.explain(held[:1], budget=None)[0]
    ctx["unlimited_set"], ctx["unlimited_score"] = full.features, full.estimated_accuracy
    unlimited = [frozenset(e.features) for e in multi.explain(held, budget=None)]
    for image in held[:3]:  # the first walks of the process, not counted
        multi.explain([image], budget=settings.budgets[0])
        for single in singles:
            single.explain([image], budget=settings.budgets[0])
    rows = compare(multi, singles, held, Y_held.astype(int), settings.budgets, unlimited, log)
    ctx["rows"], ctx["verdict"] = rows, verdict(rows)
    out = pathlib.Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    ctx["figure"] = plot(out.with_suffix(".png"), rows)
    write_report(out, ctx)
    return ctx
