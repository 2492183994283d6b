"""Precompute wall time and accuracy of the learner lists, on the demo's data, side by side.

Issue 10's bar: the default learner list (LDA and logistic regression, raced per feature set)
must keep precompute within 2x of the single-learner demo. One run fits PolyDom (alpha 1) on the
demo's training images -- the same features, extracted once and shared -- with each learner
list in turn, alternating the order over ``--runs`` rounds so that a drift of the machine load
falls on every list alike; no expansion cache, so every fit trains its sets. Each fit's held-out
accuracy (the demo's held-out images, served on a clock replaying their measured feature times,
averaged over every size and budget) is reported with its standard error over pictures.

    python benchmarks/learners.py [--dataset digits] [--runs 2]

Writes ``benchmarks/results/learners-<dataset>.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

# Run as ``python -P``, a script's own folder is not on sys.path; ``lab`` is the package beside it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

HERE = Path(__file__).resolve().parent


def learner_lists():
    """The lists compared: name -> ``learners=`` value (None: the classifier's default)."""
    from polydom.classifier.learners import default_estimator, default_learners

    lda, logreg = default_learners()
    return {
        "default (lda + logreg, raced)": None,
        "lda alone": [lda],
        "logreg alone": [logreg],
        "paper's SGD alone": [("sgd", default_estimator(0))],
    }


def main(argv=None) -> int:
    from threadpoolctl import threadpool_limits

    import polydom
    from polydom.demo import stats
    from polydom.demo.evaluation import serve_grid
    from lab.job import split_pictures
    from lab.settings import DEFAULT_BUDGETS, DEFAULT_FEATURES, DEFAULT_SIDES, TIMING_SIDES
    from polydom.classifier.extraction import extract_features
    from polydom.featurizers import resolve_features
    from polydom.featurizers.datasets import load_digits_images, load_fashion_mnist_images

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=("digits", "fashion-mnist"), default="digits")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--train-per-class", type=int, default=20)
    parser.add_argument("--held-out-per-class", type=int, default=50)
    parser.add_argument("--n-jobs", type=int, default=-1)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    started = time.perf_counter()

    load = load_digits_images if args.dataset == "digits" else load_fashion_mnist_images
    sides = DEFAULT_SIDES
    images, labels, _ = load(sides=sides, n_per_class=args.train_per_class + args.held_out_per_class, random_state=0)
    train, test = split_pictures(labels, len(sides), args.train_per_class, 0)
    groups = np.arange(len(images)) // len(sides)
    train_images, test_images = [images[i] for i in train], [images[i] for i in test]
    features = resolve_features(DEFAULT_FEATURES)
    held = extract_features(test_images, features, n_jobs=None)
    test_sizes = np.array([im.shape[0] * im.shape[1] for im in test_images])
    pictures = test // len(sides)

    lists = learner_lists()
    seconds = {name: [] for name in lists}
    results = {}
    # One cache directory shares the extraction and the cost fits: only training is compared (the
    # trained sets are cached per learner list, so no list reuses another's).
    shared = tempfile.mkdtemp(prefix="polydom-learners-")
    base = dict(features=list(DEFAULT_FEATURES), cv=3, timing=polydom.Timing(sides=TIMING_SIDES, images=4, repeats=5),
                n_jobs=args.n_jobs, random_state=0, progress=False)
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # learner convergence and timing-contention notes are not measured here
        for run in range(args.runs):
            order = list(lists) if run % 2 == 0 else list(reversed(lists))
            for name in order:
                cache = os.path.join(shared, f"run{run}")  # a fresh expansion cache per run
                clf = polydom.CostSensitiveClassifier(learners=lists[name], cache_dir=cache, **base)
                t = time.perf_counter()
                clf.fit(train_images, labels[train], groups=groups[train])
                clf.planner_ = clf.server().planner  # served as a service serves: learning its guards
                seconds[name].append(clf.fit_stats_["build_seconds"])
                print(f"run {run}: {name}: build {seconds[name][-1]:.1f} s "
                      f"({clf.fit_stats_['trained']} sets trained; fit {time.perf_counter() - t:.1f} s)",
                      file=sys.stderr, flush=True)
                if name not in results:
                    grid = serve_grid(clf, held.X, held.seconds, test_sizes, labels[test], DEFAULT_BUDGETS,
                                     cpu_seconds=held.cpu_seconds)
                    results[name] = (grid, clf.fit_stats_)

    reference = "paper's SGD alone"
    ref_median = statistics.median(seconds[reference])
    default_grid = results["default (lda + logreg, raced)"][0]
    rows = []
    for name in lists:
        grid, fit_stats = results[name]
        med = statistics.median(seconds[name])
        acc = stats.overall(grid.correct, pictures)
        gap = "–" if grid is default_grid else stats.overall_difference(
            grid.correct, default_grid.correct, pictures).text(signed=True)
        rows.append(f"| {name} | {med:.1f} | {med / ref_median:.2f}× | {fit_stats['trained']} | {acc.text()} | {gap} |")
    command = "python benchmarks/learners.py " + " ".join(argv if argv is not None else sys.argv[1:])
    report = "\n".join([
        f"# Learner lists: precompute time and held-out accuracy ({args.dataset})\n",
        f"`{command.strip()}` ({time.perf_counter() - started:.0f} s in all; {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, load average "
        f"{os.getloadavg()[0]:.1f} at the end).\n",
        f"PolyDom alpha 1 on {len(train)} training images ({args.train_per_class} pictures per class at sides "
        f"{', '.join(map(str, sides))}), 8 features, 3-fold grouped CV, finalists rescored; no expansion cache. "
        f"Build seconds are training + indexing (extraction and timing shared), median of {args.runs} runs in "
        "alternating order. Accuracy: held-out mean over every size and budget of the demo's grid, ± standard "
        "error over pictures; the gap is paired, minus the default.\n",
        "| learners | build (s) | vs paper's SGD | sets trained | held-out accuracy | minus default |",
        "|---|---:|---:|---:|---|---|",
        *rows,
        "",
        "Per run (s): " + "; ".join(f"{n}: {', '.join(f'{s:.1f}' for s in v)}" for n, v in seconds.items()),
        "",
    ])
    out = Path(args.out) if args.out else HERE / "results" / f"learners-{args.dataset}.md"
    out.write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
