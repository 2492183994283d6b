"""Several labels, one walk: a multilabel classifier against one classifier per label.

The data: moderation-style canvases (:func:`polydom.featurizers.moderation.load_moderation_images`,
0.03 to 2.9 MP), each a photo crop or a flat graphic holding one to three small pictures; five
labels per image: whether it is a photo, and for each of four picture categories whether one
appears. Fashion-MNIST pictures where Debian's ``dataset-fashion-mnist`` is installed
(``--items digits`` otherwise).

1. **Fit**, default settings, the photos demo's six features, on the same training images: one
   multilabel classifier (``fit(images, Y)``), and one single-label classifier per label. They
   share one cache directory, so the features are extracted and timed once.
2. **Serve** every held-out image for real at each total budget per image: the multilabel
   classifier's one walk gets the whole budget; each per-label classifier gets an equal share
   (the budget divided by the number of labels). Each call is timed from outside
   (``time.perf_counter`` around ``explain``): an answer over its budget counts as wrong for
   every label it answers.
3. **Compare**, per budget: the mean per-label accuracy on time of both, the paired difference
   over images (each image's mean over labels) with its standard error, and the late shares. A
   budget *binds* when the one walk computes less than its unlimited set for at least a tenth of
   the images.

    python -P benchmarks/policies.py [--items fashion-mnist|digits] [--train 300] [--held-out 200]
        [--seed 0] [--quick] [--out benchmarks/results/policies.md]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shlex
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
FEATURES = ("intensity_hist", "thumbnail", "fft_bands", "edge_density", "lbp", "hog")
BUDGETS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
BINDS = 0.1


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
         f"Data: {ctx['n_train']} training and {ctx['n_held']} held-out canvases ({ctx['items']} pictures, "
         f"{ctx['mp'][0]:.2f}-{ctx['mp'][1]:.2f} MP held out). Labels and their held-out positive shares: "
         + ", ".join(f"{name} {share:.0%}" for name, share in zip(ctx["labels"], ctx["positives"])) + ". "
         f"Features: {', '.join(FEATURES)}; default settings otherwise. Fits: multilabel "
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


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", choices=("fashion-mnist", "digits"), default=None,
                        help="the small pictures (default Fashion-MNIST where installed, else digits)")
    parser.add_argument("--train", type=int, default=300)
    parser.add_argument("--held-out", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a smoke test: few small canvases")
    parser.add_argument("--out", default=str(HERE / "results" / "policies.md"))
    args = parser.parse_args(argv)
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.0f} s] {message}", file=sys.stderr, flush=True)

    import polydom
    from polydom.featurizers.datasets import fashion_mnist_available
    from polydom.featurizers.moderation import load_moderation_images

    items = args.items or ("fashion-mnist" if fashion_mnist_available() else "digits")
    n_train, n_held = (40, 20) if args.quick else (args.train, args.held_out)
    shape = dict(min_shape=(120, 160), max_shape=(240, 320)) if args.quick else {}
    budgets = BUDGETS[1::3] if args.quick else BUDGETS
    train, Y_train, labels = load_moderation_images(n_train, items=items, random_state=args.seed, **shape)
    held, Y_held, _ = load_moderation_images(n_held, items=items, random_state=args.seed + 1000, **shape)
    sizes = np.array([im.shape[0] * im.shape[1] for im in held], dtype=float)
    log(f"{n_train} training and {n_held} held-out canvases made ({items})")
    ctx = dict(items=items, n_train=n_train, n_held=n_held, labels=labels, positives=Y_held.mean(axis=0).tolist(),
               mp=(float(sizes.min() / 1e6), float(sizes.max() / 1e6)),
               command="python -P benchmarks/policies.py" + ("" if not sys.argv[1:] else " " + shlex.join(sys.argv[1:])),
               machine=f"Load average at the start: {' '.join(f'{v:.1f}' for v in os.getloadavg())}.")
    with tempfile.TemporaryDirectory(prefix="polydom-policies-") as cache:
        def make():
            return polydom.CostSensitiveClassifier(features=list(FEATURES), cache_dir=cache, random_state=args.seed)

        t0 = time.perf_counter()
        multi = make().fit(train, Y_train)
        ctx["fit_multi"] = time.perf_counter() - t0
        log(f"multilabel classifier fitted in {ctx['fit_multi']:.0f} s")
        t0 = time.perf_counter()
        singles = [make().fit(train, Y_train[:, label]) for label in range(len(labels))]
        ctx["fit_singles"] = time.perf_counter() - t0
        log(f"{len(labels)} per-label classifiers fitted in {ctx['fit_singles']:.0f} s")
    full = multi.explain(held[:1], budget=None)[0]
    ctx["unlimited_set"], ctx["unlimited_score"] = full.features, full.estimated_accuracy
    unlimited = [frozenset(e.features) for e in multi.explain(held, budget=None)]
    for image in held[:3]:  # the first walks of the process, not counted
        multi.explain([image], budget=BUDGETS[0])
        for single in singles:
            single.explain([image], budget=BUDGETS[0])
    rows = compare(multi, singles, held, Y_held.astype(int), budgets, unlimited, log)
    ctx["rows"], ctx["verdict"] = rows, verdict(rows)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    ctx["figure"] = plot(out.with_suffix(".png"), rows)
    write_report(out, ctx)
    v = ctx["verdict"]
    print(f"behind by > 1 SE: {v['behind']}; binding budgets {v['binding']}, ahead by > 2 SE in {v['ahead']}; "
          f"bar {'met' if v['met'] else 'not met'}. Report: {out}")


if __name__ == "__main__":
    main()
