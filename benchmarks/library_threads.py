"""A default fit with one thread per BLAS and OpenMP pool against the libraries' own threads.

``FeatureSetLearner.LIBRARY_THREADS`` (1 by default) holds the pools to one thread while a
fit's models are fitted; ``None`` leaves them as the libraries set them (one thread per core).
Nothing here limits the pools around the fit, as a user's script would not.

1. **Fits**: for each number of features ``k``, default fits of ``features_scale.py``'s
   natural-size training pictures (its first ``k`` features) with the pools left alone and
   with one thread, interleaved, ``--repeats`` of each, each on a fresh cache holding only the
   feature matrix. Reports *the rest* of each fit (after extraction), the medians, their ratio,
   and whether the two indexes agree (the same sets, scores, errors and lookups).
2. **Single fits**: each default learner fitted once on Gaussian rows (``n`` items, ``p``
   columns; two classes at 240 items, ten above), median of several, both ways.

With ``--busy N``, N spinning processes (``peers.py``'s) run during both parts.

    python -P benchmarks/library_threads.py [--ks 8,11] [--repeats 3] [--busy N] [--cache DIR]
        [--out benchmarks/results/library-threads.md]

``--cache`` is ``features_scale.py``'s: the extraction kept between runs (made with one thread).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import pathlib
import shlex
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # sibling benchmarks, under python -P too

import fast_lda  # noqa: E402  (whether two indexes agree)
import features_scale as fsb  # noqa: E402
import peers  # noqa: E402  (busy processes)

WAYS = {"libraries' own": None, "one thread": 1}


@contextlib.contextmanager
def library_threads(value):
    """``FeatureSetLearner.LIBRARY_THREADS`` set to ``value`` for the block."""
    from polydom.classifier.blackbox import FeatureSetLearner

    before, FeatureSetLearner.LIBRARY_THREADS = FeatureSetLearner.LIBRARY_THREADS, value
    try:
        yield
    finally:
        FeatureSetLearner.LIBRARY_THREADS = before


def fit_both_ways(k, repeats, train, y, matrix, tmp, log) -> dict:
    names = fsb.FEATURE_ORDER[:k]
    seconds = {way: [] for way in WAYS}
    kept = {}
    for repeat in range(repeats):
        for way, value in WAYS.items():
            cache = os.path.join(tmp, f"{k}-{repeat}-{value}")
            fsb.seed_feature_cache(cache, train, matrix, names)
            with library_threads(value):
                clf, sec = fsb.fit_polydom(train, y, names, cache, 0)
            seconds[way].append(sec)
            kept.setdefault(way, clf)
            log(f"{k} features, {way}: the rest {sec:.1f} s")
    sizes = np.geomspace(4e4, 1.5e6, 12)  # inside the sizes the costs are measured on
    same = fast_lda.same_index(*kept.values(), sizes, fsb.BUDGETS)
    return dict(k=k, seconds=seconds, trained=kept["one thread"].fit_stats_["trained"], **same)


def single_fits(log, reps: int = 7) -> list[dict]:
    from polydom.classifier.learners import default_learners

    rng = np.random.default_rng(0)
    rows = []
    for n in (240, 2000, 20000):
        for p in (20, 100, 300):
            X = rng.normal(size=(n, p))
            y = rng.integers(0, 2 if n <= 240 else 10, n)
            row = dict(n=n, p=p)
            for (name, estimator), (way, value) in itertools.product(default_learners(), WAYS.items()):
                row[(name, way)] = median_fit_seconds(estimator, X, y, value, reps if n < 20000 else 3)
            rows.append(row)
            log(f"single fits, n={n} p={p}: " + ", ".join(f"{k[0]} {k[1]} {v * 1e3:.1f} ms"
                                                          for k, v in row.items() if isinstance(k, tuple)))
    return rows


def median_fit_seconds(estimator, X, y, threads, reps: int) -> float:
    """Median seconds of fitting a clone of ``estimator``, the pools held as a fit holds them
    (``polydom.classifier.blackbox._pools_held_to``), after one fit to warm up."""
    from sklearn.base import clone

    from polydom.classifier.blackbox import _pools_held_to

    times = []
    with _pools_held_to(threads):
        clone(estimator).fit(X, y)
        for _ in range(reps):
            t = time.perf_counter()
            clone(estimator).fit(X, y)
            times.append(time.perf_counter() - t)
    return float(np.median(times))


def write(out: pathlib.Path, fits, singles, command: str, load: str, busy: int) -> None:
    from threadpoolctl import threadpool_info

    pools = ", ".join(sorted({f"{p['internal_api']} {p.get('version') or ''} ({p['num_threads']} threads)"
                              for p in threadpool_info()}))
    lines = ["# One thread per BLAS and OpenMP pool while a fit's models are fitted", "",
             f"Command: `{command}`. Load average at the start: {load}. "
             + (f"{busy} busy processes spun throughout (`--busy {busy}`). " if busy else "No busy processes. ")
             + f"{os.cpu_count()} cores; pools found: {pools}.", "",
             "## Default fits", "",
             "`features_scale.py`'s 240 training pictures, the first k features, default settings; nothing "
             "limits the pools around the fit. *The rest*: the fit after extraction (timing pass, screening, "
             "training, rescoring, build), in seconds.", "",
             "| features | the rest, libraries' threads (each) | the rest, one thread (each) | median ratio "
             "| sets trained | same sets | same scores and errors | same lookups |",
             "|---:|---|---|---:|---:|---|---|---:|"]
    for r in fits:
        own, one = r["seconds"]["libraries' own"], r["seconds"]["one thread"]
        lines.append(f"| {r['k']} | {np.median(own):.1f} ({', '.join(f'{v:.1f}' for v in own)}) | "
                     f"{np.median(one):.1f} ({', '.join(f'{v:.1f}' for v in one)}) | "
                     f"{np.median(own) / np.median(one):.2f} | {r['trained']} | {'yes' if r['sets'] else 'no'} | "
                     f"{'yes' if r['scores'] and r['errors'] else 'no'} | {r['lookups']} of {r['queries']} |")
    if singles:
        lines += ["", "## One fit of each default learner", "",
                  "Gaussian rows, median of 7 fits (3 at 20,000 items), in ms.", "",
                  "| items | columns | LDA, libraries' threads | LDA, one thread | logistic regression, libraries' "
                  "threads | logistic regression, one thread |", "|---:|---:|---:|---:|---:|---:|"]
        for r in singles:
            cells = [r[(name, way)] * 1e3 for name in ("lda", "logreg") for way in WAYS]
            lines.append(f"| {r['n']} | {r['p']} | " + " | ".join(f"{v:.1f}" for v in cells) + " |")
    out.write_text("\n".join(lines) + "\n")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", default="8,11")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--busy", type=int, default=0, metavar="N")
    parser.add_argument("--no-single-fits", action="store_true", help="skip the single fits")
    parser.add_argument("--cache", default=None)
    parser.add_argument("--out", default=str(HERE / "results" / "library-threads.md"))
    args = parser.parse_args(argv)
    started = time.perf_counter()
    log = peers.elapsed_log(started)

    from threadpoolctl import threadpool_limits

    command = "python -P benchmarks/library_threads.py" + ("" if not sys.argv[1:] else " " + shlex.join(sys.argv[1:]))
    load = f"{os.getloadavg()[0]:.1f}"
    images, y = fsb.scale_images(360, 0, max_shape=fsb.MAX_SHAPE)
    train, y_train = images[:240], y[:240]
    keep = None if args.cache is None else os.path.join(args.cache, "extraction-0-240-train.npz")
    with threadpool_limits(1):  # the extraction as features_scale.py makes it
        matrix, _ = fsb.extract_all(train, log, "training pictures", keep)
    fits, singles = [], []
    with tempfile.TemporaryDirectory(prefix="polydom-threads-") as tmp, peers.busy_processes(args.busy, log):
        for k in (int(v) for v in args.ks.split(",")):
            fits.append(fit_both_ways(k, args.repeats, train, y_train, matrix, tmp, log))
            write(pathlib.Path(args.out), fits, singles, command, load, args.busy)
        if not args.no_single_fits:
            singles = single_fits(log)
    write(pathlib.Path(args.out), fits, singles, command, load, args.busy)
    log(f"report written to {args.out}")


if __name__ == "__main__":
    main()
