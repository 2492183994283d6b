"""Cascade decision benchmark: what deciding "stop here?" costs per stage, committee vs served model.

A cascade stage with a committee (``polydom.index.cascade.Committee``: the stage's fold models as
arrays) decides with the mean of their softmax-linear probabilities; a stage without one asks its
served scikit-learn model's ``predict_proba`` on one row. On a saved classifier (a demo run's
``indexes/PolyDom-alpha1-cascade``, for example), this times both on the same random rows for
every stage that has a committee, interleaved in rounds so drift hits both alike, and reports
medians per call and their ratio. (That a committee's probabilities are its fold models' mean
is checked by the tests, not here.)

Run from the project root::

    python benchmarks/cascade_decision.py --index RUN/indexes/PolyDom-alpha1-cascade [--out benchmarks/results/cascade_decision.md]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from pathlib import Path

import numpy as np

import polydom


def _per_call(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", required=True, help="a saved CostSensitiveClassifier trained with cascade=True")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    clf = polydom.CostSensitiveClassifier.load(args.index)
    index = clf.planner_.index
    committees = index.cascades.committees
    if not committees:
        raise SystemExit("this index's cascades have no committees (its learners are not softmax-linear)")
    rng = np.random.default_rng(0)
    names = index.space.names
    rows = ["| stage (prefix) | inputs | members | committee (us) | served predict_proba (us) | ratio |", "|---|---|---|---|---|---|"]
    ratios = []
    for prefix, committee in sorted(committees.items()):
        x = rng.normal(size=committee.mean.shape[1])
        model = index.models[prefix]
        one = x.reshape(1, -1)
        fast, slow = [], []
        for _ in range(args.rounds):
            fast.append(_per_call(lambda: committee.proba(x), args.calls))
            slow.append(_per_call(lambda: model.predict_proba(one), max(1, args.calls // 10)))
        f, s = statistics.median(fast) * 1e6, statistics.median(slow) * 1e6
        ratios.append(s / f)
        label = "+".join(names[i] for i in range(len(names)) if prefix >> i & 1)
        rows.append(f"| {label} | {committee.mean.shape[1]} | {committee.coef.shape[0]} | {f:.1f} | {s:.1f} | {s / f:.1f}x |")
    summary = f"median ratio over {len(ratios)} stages: the served model's predict_proba takes {statistics.median(ratios):.1f}x the committee's time"
    text = "\n".join(["# Cascade decision cost per stage", "", f"Index: `{Path(args.index).name}`; medians of {args.rounds} interleaved rounds.", "", *rows, "", summary, ""])
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
