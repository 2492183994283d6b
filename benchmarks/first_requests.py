"""A service's first requests after it loads an index: sets prepared on demand against prepared at start.

A server answers with a set's model through a plan (the model read from the index, checked,
rebuilt, and its lean predictor), prepared once. Prepared on the first request that answers with
the set, that request pays for it after its features are computed. This benchmark loads a saved
classifier afresh for each pass and serves every held-out picture once at each budget, in a
shuffled order, with

* ``on demand``: a server whose planner prepares each plan on first use (as before);
* ``prepared``: ``clf.server()``, which prepares every servable set's plan when it is made.

Each request's wall time (``server.predict`` on one picture) is compared with its budget: the
share of answers that came back later than their budget, and the median and 99th percentile of
the wall time over the budget. The two variants alternate pass by pass.

The index: a default fit with the first ``--features`` features of
``benchmarks/features_scale.py`` on its 240 training pictures (natural size, 0.03-1.9 MP);
the 120 held-out pictures are served.

With ``--busy N``, N processes spin on the cores while the passes run (the fit runs before them),
as ``benchmarks/peers.py --busy`` does.

    python -P benchmarks/first_requests.py [--features 12] [--repeats 3] [--cache DIR] [--busy N]
        [--out benchmarks/results/first-requests.md]
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
sys.path.insert(0, str(HERE))

import features_scale  # noqa: E402  (the pictures, the features and the default fit)
import peers  # noqa: E402  (busy processes)

BUDGETS = (0.002, 0.005, 0.01, 0.02)
VARIANTS = ("on demand", "prepared")


def make_server(clf, variant: str):
    """``(server, seconds to make it)``: ``clf.server()``, or the same server without preparing."""
    from polydom.serving.planner import Server, ServingPlanner

    began = time.perf_counter()
    if variant == "prepared":
        server = clf.server()
    else:  # what clf.server() made before it prepared its plans
        state, serving = clf._state(), clf._policies()[3]
        planner = ServingPlanner(state.index, state.planner.features, cascade=state.planner.cascade,
                                 speculate=serving.speculate, learn=serving.learn_guards, decode=state.decode_fit,
                                 late_share=serving.late_share)
        server = Server(planner, state.classes, budget=clf.budget, speculate=serving.speculate,
                        multilabel=state.multilabel)
    return server, time.perf_counter() - began


def one_pass(path: str, variant: str, held, order) -> dict:
    """Load the classifier afresh, make the server, serve every (picture, budget) once in ``order``."""
    import polydom

    clf = polydom.CostSensitiveClassifier.load(path, feature_modules=[features_scale.scale_features.__name__])
    server, made = make_server(clf, variant)
    over = []
    for i, b in order:
        began = time.perf_counter()
        server.predict([held[i]], budget=BUDGETS[b])
        over.append(time.perf_counter() - began - BUDGETS[b])
    over = np.asarray(over)
    return dict(made=made, over=over)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3, help="passes per variant, alternating")
    parser.add_argument("--cache", default=None, help="features_scale.py's extraction cache (else extracted here)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--busy", type=int, default=0, help="busy processes while the passes run")
    parser.add_argument("--out", default=str(HERE / "results" / "first-requests.md"))
    args = parser.parse_args(argv)
    from threadpoolctl import threadpool_limits

    images, y = features_scale.scale_images(360, args.seed, max_shape=features_scale.MAX_SHAPE)
    train, y_train, held = images[:240], y[:240], images[240:]
    names = features_scale.FEATURE_ORDER[: args.features]
    rng = np.random.default_rng(args.seed)
    results = {v: [] for v in VARIANTS}
    with threadpool_limits(1), tempfile.TemporaryDirectory(prefix="polydom-first-") as tmp:
        keep = None if args.cache is None else os.path.join(args.cache, f"extraction-{args.seed}-240-train.npz")
        matrix, _ = features_scale.extract_all(train, lambda m: print(m, file=sys.stderr), "training pictures", keep)
        features_scale.seed_feature_cache(os.path.join(tmp, "cache"), train, matrix, names)
        clf, fit_seconds = features_scale.fit_polydom(train, y_train, names, os.path.join(tmp, "cache"), args.seed)
        path = os.path.join(tmp, "index")
        clf.save(path)
        sets = len(clf.index_.candidates)
        print(f"fitted in {fit_seconds:.0f} s: {sets} candidates, {len(clf.index_.models)} models", file=sys.stderr)
        pairs = [(i, b) for i in range(len(held)) for b in range(len(BUDGETS))]
        with peers.busy_processes(args.busy, lambda m: print(m, file=sys.stderr)):
            for r in range(args.repeats):
                order = [pairs[j] for j in rng.permutation(len(pairs))]
                for variant in (VARIANTS if r % 2 == 0 else VARIANTS[::-1]):
                    results[variant].append(one_pass(path, variant, held, order))
                    last = results[variant][-1]
                    print(f"pass {r + 1} {variant}: server made in {1e3 * last['made']:.0f} ms, "
                          f"{(last['over'] > 0).mean():.1%} late", file=sys.stderr)
    write_report(pathlib.Path(args.out), args, results, sets, len(clf.index_.models), len(held))


def write_report(out: pathlib.Path, args, results: dict, sets: int, models: int, n_held: int) -> None:
    L = ["# A service's first requests after loading: plans prepared on demand or at start", "",
         f"Command: `python -P benchmarks/first_requests.py --features {args.features} --repeats {args.repeats}"
         f"{' --cache DIR' if args.cache else ''}{f' --busy {args.busy}' if args.busy else ''}`. "
         f"{f'{args.busy} busy processes spun while the passes ran. ' if args.busy else ''}Load average at the end: "
         f"{' '.join(f'{v:.1f}' for v in os.getloadavg())}.", "",
         f"A default fit with {args.features} features ({sets} candidate sets, {models} models), saved; each pass "
         f"loads it afresh, makes a server and serves each of the {n_held} held-out pictures once at each budget "
         f"({', '.join(f'{1e3 * b:g} ms' for b in BUDGETS)}), {n_held * len(BUDGETS)} requests in a shuffled order "
         "(the same order for both variants in one pass). Late: the request's wall time (`server.predict` on one "
         "picture) exceeded its budget. Medians over passes.", "",
         "| variant | server made (ms) | late share, each pass | late share | wall time over budget, median (ms) "
         "| p99 (ms) |", "|---|---:|---|---:|---:|---:|"]
    for variant in VARIANTS:
        runs = results[variant]
        late = [float((r["over"] > 0).mean()) for r in runs]
        L.append(f"| {variant} | {1e3 * np.median([r['made'] for r in runs]):.0f} "
                 f"| {', '.join(f'{v:.1%}' for v in late)} | {np.median(late):.1%} "
                 f"| {1e3 * np.median([np.median(r['over']) for r in runs]):.2f} "
                 f"| {1e3 * np.median([np.quantile(r['over'], 0.99) for r in runs]):.2f} |")
    out.write_text("\n".join(L) + "\n")
    print(f"report written to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
