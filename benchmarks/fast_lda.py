"""The default LDA's fold scores through ``polydom.classifier.fastlda``: same index, less time.

For each number of features ``k``, one default fit of ``features_scale.py``'s natural-size
training pictures (its first ``k`` features, 2 cores, one BLAS thread) with
``FeatureSetLearner.FAST_LDA`` off (every fold fits scikit-learn's pipeline) and one with it on,
each on a fresh cache holding only the feature matrix. Reports the rest of the fit (after
extraction) both ways and their ratio, and whether the two indexes are the same: the same sets
trained, the same score and standard error for every set, the same answer to every lookup on a
grid of sizes and budgets.

    python -P benchmarks/fast_lda.py [--ks 8,12,16] [--cache DIR] [--out benchmarks/results/fast-lda.md]

``--cache`` is ``features_scale.py``'s: the extraction kept between runs.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # sibling benchmarks, under python -P too

import features_scale as fsb  # noqa: E402
import peers  # noqa: E402  (progress lines)


def fit(train, y, matrix, names, cache: str, fast: bool):
    """``features_scale.py``'s default fit on a fresh ``cache`` holding only ``matrix``, with the
    fast fold scores on or off; ``(classifier, seconds)``."""
    from polydom.classifier.blackbox import FeatureSetLearner

    fsb.seed_feature_cache(cache, train, matrix, names)
    before, FeatureSetLearner.FAST_LDA = FeatureSetLearner.FAST_LDA, fast
    try:
        return fsb.fit_polydom(train, y, names, cache, 0)
    finally:
        FeatureSetLearner.FAST_LDA = before


def same_index(a, b, sizes, budgets) -> dict:
    """Whether two fitted classifiers' indexes agree set by set and lookup by lookup."""
    ia, ib = a.index_, b.index_
    answers = [(ia.lookup(n, c).features, ib.lookup(n, c).features) for n in sizes for c in budgets]
    return dict(sets=set(ia.measured_scores) == set(ib.measured_scores),
                scores=ia.measured_scores == ib.measured_scores,
                errors=dict(ia.std_error) == dict(ib.std_error),
                lookups=sum(x == y for x, y in answers), queries=len(answers))



def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", default="8,12,16")
    parser.add_argument("--cache", default=None)
    parser.add_argument("--out", default=str(HERE / "results" / "fast-lda.md"))
    args = parser.parse_args(argv)
    started = time.perf_counter()
    log = peers.elapsed_log(started)

    from threadpoolctl import threadpool_limits

    images, y = fsb.scale_images(360, 0, max_shape=fsb.MAX_SHAPE)
    train, y_train = images[:240], y[:240]
    load = f"{os.getloadavg()[0]:.1f}"
    sizes = np.geomspace(4e4, 1.5e6, 12)  # inside the sizes the costs are measured on
    rows = []
    with threadpool_limits(1), tempfile.TemporaryDirectory(prefix="polydom-fastlda-") as tmp:
        keep = None if args.cache is None else os.path.join(args.cache, "extraction-0-240-train.npz")
        matrix, _ = fsb.extract_all(train, log, "training pictures", keep)
        for k in (int(v) for v in args.ks.split(",")):
            names = fsb.FEATURE_ORDER[:k]
            slow, slow_s = fit(train, y_train, matrix, names, os.path.join(tmp, f"slow{k}"), fast=False)
            log(f"{k} features, scikit-learn's folds: the rest {slow_s:.0f} s")
            fast, fast_s = fit(train, y_train, matrix, names, os.path.join(tmp, f"fast{k}"), fast=True)
            log(f"{k} features, fast folds: the rest {fast_s:.0f} s")
            same = same_index(slow, fast, sizes, fsb.BUDGETS)
            rows.append(dict(k=k, slow=slow_s, fast=fast_s, trained=fast.fit_stats_["trained"],
                             fully=fast.fit_stats_.get("fully_trained", 0), **same))
            log(f"{k} features: {same}")
            write(pathlib.Path(args.out), rows, load)
    log(f"report written to {args.out}")


def write(out: pathlib.Path, rows, load: str) -> None:
    lines = ["# Fold scores of the default LDA without scikit-learn's per-fit overhead", "",
             "`python -P benchmarks/fast_lda.py` (with `--cache`, the extraction kept by `features_scale.py`). "
             f"Load average at the start: {load}. Default fits of `features_scale.py`'s 240 training pictures, "
             "the first k features, one BLAS thread; *the rest* is the fit after extraction (timing pass, "
             "screening, training, rescoring, build). Slow: `FeatureSetLearner.FAST_LDA = False`.", "",
             "| features | the rest, scikit-learn's folds (s) | the rest, fast folds (s) | ratio | sets trained (fully) "
             "| same sets | same scores and errors | same lookups |",
             "|---:|---:|---:|---:|---:|---|---|---:|"]
    for r in rows:
        lines.append(f"| {r['k']} | {r['slow']:.0f} | {r['fast']:.0f} | {r['slow'] / r['fast']:.2f} | "
                     f"{r['trained']} ({r['fully']}) | {'yes' if r['sets'] else 'no'} | "
                     f"{'yes' if r['scores'] and r['errors'] else 'no'} | {r['lookups']} of {r['queries']} |")
    out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
