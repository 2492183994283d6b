"""Planning at scale: ``plan_batch`` and ``StreamBudget`` over 10^4 .. 10^6 distinct item sizes.

The indexes are the demo's digits backends, PolyDom α=1 (the demo's primary) and Greedy, fitted
as ``benchmarks/backends.py`` fits them (its features, sides, timing sides and parameters, read from
:mod:`lab.settings`; one classifier refitted with one cache directory, so both share one
timing pass) on ``--train-per-class`` pictures per class. The fitted indexes are saved in
``--cache`` (a folder under the system's temporary directory by default, kept between runs) and
loaded from there, so reruns plan on the same indexes.

Item sizes are drawn uniformly (seed 1) from the demo's served range of pixel counts (28² to
280²), so every size is distinct and the planners gather every item's options at its own size.

* ``plan_batch`` (the greedy solver) at a total budget of ``--fraction`` of what serving every
  item its most accurate set costs: median wall time over ``--runs`` runs.
* ``StreamBudget``: fitted on 2,000 of the sizes; ``choose_many`` over all N (median over runs),
  and ``choose`` item by item over the first ``min(N, --choose-items)`` sizes, per item.

*Before* is the code of ``--before`` (default: the commit before the option tables were
vectorised), loaded from git and run in this process on the same index and sizes: its
``options_at`` call per distinct size, its hull and its solver. It runs where N is at most
``--before-up-to``, once (its runs take up to minutes), and its ``choose`` over
``--before-choose-items`` items; its plans are checked equal to today's.

Run from the project root::

    python -P benchmarks/planning_scale.py [--runs 3] [--cache DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import types
import warnings
from pathlib import Path

import numpy as np

import polydom
from polydom.index.serving.planning import option_table, plan_batch

# Run as ``python -P``, a script's own folder is not on sys.path; ``lab`` is the package beside it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BACKENDS = ("PolyDom α=1", "Greedy")
ITEMS = (10_000, 100_000, 1_000_000)
#: The commit before the option tables were vectorised (the per-size path).
BEFORE = "677bec0"
#: The served range of the demo: pixel counts of its smallest and largest sides.
SIZES = (28.0**2, 280.0**2)


def log(message: str) -> None:
    print(f"planning-scale: {message}", file=sys.stderr, flush=True)


def fit_indexes(cache: Path, train_per_class: int) -> dict:
    """The demo's PolyDom α=1 and Greedy indexes on digits, fitted once and kept in ``cache``."""
    paths = {name: cache / f"{name.split()[0].lower()}-{train_per_class}" for name in BACKENDS}
    if not all(p.is_dir() for p in paths.values()):
        from threadpoolctl import threadpool_limits

        from lab.job import split_pictures
        from lab.settings import BACKENDS as DEMO_BACKENDS
        from lab.settings import DEFAULT_FEATURES, DEFAULT_SIDES, TIMING_SIDES, variant_params
        from polydom.featurizers.datasets import load_digits_images

        settings = dict(DEMO_BACKENDS)
        with threadpool_limits(1):  # one process on a shared machine: a BLAS pool would only contend
            images, labels, _ = load_digits_images(sides=DEFAULT_SIDES, n_per_class=train_per_class, random_state=0)
            train, _ = split_pictures(labels, len(DEFAULT_SIDES), train_per_class, 0)
            groups = np.arange(len(images)) // len(DEFAULT_SIDES)
            clf = polydom.CostSensitiveClassifier(
                features=list(DEFAULT_FEATURES), cv=3, cache_dir=str(cache / "expansion"), n_jobs=None,
                random_state=0, progress=False,
            )
            timing = polydom.Timing(sides=TIMING_SIDES, repeats=5, images=4)
            for name in BACKENDS:
                t = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    clf.set_params(**variant_params(settings[name], timing)).fit(
                        [images[i] for i in train], labels[train], groups=groups[train])
                clf.index_.save(str(paths[name]))
                log(f"fitted {name} in {time.perf_counter() - t:.0f} s: {clf.index_!r}")
    return {name: polydom.load(str(p)) for name, p in paths.items()}


def load_before(commit: str) -> types.SimpleNamespace:
    """``plan_batch`` and ``StreamBudget`` as they were at ``commit``, loaded from git into this
    process (their own modules; the rest of polydom is today's)."""

    def source(path: str) -> str:
        return subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout

    modules = {}
    for name, path in (("optiontable", "index/serving/optiontable.py"), ("planning", "index/serving/planning.py"),
                       ("stream", "polydom/serving/stream.py")):
        text = source(path)
        # Relative imports of the modules loaded here go to their old versions; the rest to today's.
        for old in modules:
            text = re.sub(rf"^from (\.|polydom\.index\.){old} import", f"from _before_{old} import", text, flags=re.M)
        text = re.sub(r"^from \.(\w+) import", r"from polydom.index.\1 import", text, flags=re.M)
        module = types.ModuleType(f"_before_{name}")
        module.__file__ = f"{commit}:{path}"
        sys.modules[module.__name__] = module
        exec(compile(text, module.__file__, "exec"), module.__dict__)
        modules[name] = module
    return types.SimpleNamespace(plan_batch=modules["planning"].plan_batch, StreamBudget=modules["stream"].StreamBudget)


def timed(call, runs: int):
    """``(median seconds, first call's seconds, last result)`` over ``runs`` calls."""
    seconds, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = call()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), seconds[0], result


def per_item(stream, sizes: list) -> float:
    """Seconds per ``choose`` call over ``sizes``, one call per item."""
    stream.reset()
    start = time.perf_counter()
    for size in sizes:
        stream.choose(size)
    return (time.perf_counter() - start) / len(sizes)


def same_plan(a, b) -> bool:
    return (np.array_equal(a.choices.keys, b.choices.keys) and np.array_equal(a.choices.cost, b.choices.cost)
            and a.total_cost == b.total_cost and a.accuracy_bound == b.accuracy_bound)


def measure(name: str, index, before, args) -> list[dict]:
    rows = []
    for n in args.items:
        sizes = np.random.default_rng(1).uniform(*SIZES, n)
        assert len(np.unique(sizes)) == n
        table = option_table(index, sizes)
        budget = args.fraction * float(table.costs[np.arange(n), table.counts - 1].sum())
        mean_budget = budget / n
        del table
        row = {"n": n}
        row["plan"], row["plan_first"], plan = timed(lambda: plan_batch(index, sizes, budget), args.runs)
        sample = sizes[:2000]
        stream = polydom.StreamBudget(index, mean_budget, sizes=sample)
        row["stream_many"], _, _ = timed(lambda: (stream.reset(), stream.choose_many(sizes)), args.runs)
        chosen = sizes[: min(n, args.choose_items)].tolist()
        row["choose"] = statistics.median(per_item(stream, chosen) for _ in range(args.runs))
        row["choose_items"] = len(chosen)
        log(f"{name}, N={n:>9,}: plan {row['plan']:.3f} s (first {row['plan_first']:.3f} s), "
            f"choose_many {row['stream_many']:.3f} s, "
            f"choose {row['choose'] * 1e6:.1f} µs per item")
        if before is not None and n <= args.before_up_to:
            row["plan_before"], _, old = timed(lambda: before.plan_batch(index, sizes, budget), 1)
            row["same"] = same_plan(plan, old)
            old_stream = before.StreamBudget(index, mean_budget, sizes=sample)
            row["stream_many_before"], _, _ = timed(lambda: old_stream.choose_many(sizes), 1)
            old_chosen = sizes[: min(n, args.before_choose_items)].tolist()
            row["choose_before"] = per_item(old_stream, old_chosen)
            row["choose_before_items"] = len(old_chosen)
            # The same choices, item by item, on the items both timed.
            stream.reset(), old_stream.reset()
            row["same_stream"] = all(tuple(stream.choose(s)) == tuple(old_stream.choose(s)) for s in old_chosen)
            log(f"{name}, N={n:>9,}: before: plan {row['plan_before']:.3f} s (same plan: {row['same']}), "
                f"choose_many {row['stream_many_before']:.3f} s, choose {row['choose_before'] * 1e6:.0f} µs per item "
                f"(same choices: {row['same_stream']})")
        rows.append(row)
    return rows


def seconds(value) -> str:
    if value is None:
        return "not run"
    return f"{value:.3f} s" if value >= 0.1 else f"{value * 1e3:.1f} ms"


def report(results: dict, args, info: dict) -> str:
    lines = [
        "# Planning at scale",
        "",
        f"Command (from the project root): `{info['command']}`; wall time {info['wall']:.0f} s, one process. "
        f"polydom source: commit {info['commit']}. Python {platform.python_version()}, numpy {np.__version__}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs; load average (1 / 5 / 15 min) {info['load_start']} at the "
        f"start, {info['load_after']} at the end (the machine is shared: timings move with its load).",
        "",
        "Indexes: the demo's digits backends PolyDom α=1 and Greedy (`--train-per-class "
        f"{args.train_per_class}`), fitted as `benchmarks/backends.py` fits them: " + "; ".join(
            f"{name} `{info['indexes'][name]}`" for name in BACKENDS) + ".",
        f"Sizes: N distinct pixel counts drawn uniformly from [{SIZES[0]:g}, {SIZES[1]:g}] (seed 1). `plan_batch`: "
        f"the greedy solver at {args.fraction:g} of what every item's most accurate set costs together. "
        "`StreamBudget`: fitted on the first 2,000 sizes at the same budget per item; `choose_many` over all N, "
        "`choose` one call per item over the first *items* sizes.",
        f"*After*: medians over {args.runs} runs; *first run*: the first of them, which pays for fresh memory "
        "(numpy asks the kernel for huge pages, and finding them on a busy machine can cost seconds at 10^6 "
        "items; `NUMPY_MADVISE_HUGEPAGE=0` removes that). "
        f"*Before*: the code at commit `{args.before}` (one `options_at` call per distinct size, the item-major "
        "hull, the old solver and stream), loaded from git and run once on "
        f"the same index and sizes, up to N = {args.before_up_to:,}; its `choose` over the first "
        f"{args.before_choose_items:,} sizes. *same*: its plan (sets, costs, total, bound) and its `choose` answers "
        "equal today's.",
        "",
    ]
    for name, rows in results.items():
        lines += [f"## {name}", "",
                  "| N | plan_batch before | plan_batch after | first run | speed-up | same plan | choose_many before "
                  "| choose_many after | choose before (µs/item) | choose after (µs/item) | items | same choices |",
                  "|---:|---:|---:|---:|---:|:---:|---:|---:|---:|---:|---:|:---:|"]
        for r in rows:
            before = r.get("plan_before")
            ran = before is not None
            speedup = f"{before / r['plan']:.0f}x" if ran else ""
            same = ("yes" if r["same"] else "NO") if ran else ""
            same_stream = ("yes" if r["same_stream"] else "NO") if ran else ""
            choose_before = f"{r['choose_before'] * 1e6:.0f}" if ran else ""
            lines.append(
                f"| {r['n']:,} | {seconds(before)} | {seconds(r['plan'])} | {seconds(r['plan_first'])} | {speedup} | "
                f"{same} | "
                f"{seconds(r.get('stream_many_before'))} | {seconds(r['stream_many'])} | {choose_before} | "
                f"{r['choose'] * 1e6:.1f} | {r['choose_items']:,} | {same_stream} |")
        lines.append("")
    plan_1m = {name: next((r["plan"] for r in rows if r["n"] == 1_000_000), None) for name, rows in results.items()}
    choose_1e5 = {name: next((r["choose"] for r in rows if r["n"] == 100_000), None) for name, rows in results.items()}
    lines += ["## The bar", ""]
    for name in results:
        if plan_1m[name] is not None:
            first = next(r["plan_first"] for r in results[name] if r["n"] == 1_000_000)
            met = "met" if max(plan_1m[name], first) < 10 else "missed"
            lines.append(f"* {name}: `plan_batch` over 10^6 distinct sizes in {plan_1m[name]:.2f} s, the first run "
                         f"{first:.2f} s (bar: under 10 s): **{met}**.")
        if choose_1e5[name] is not None:
            lines.append(f"* {name}: `StreamBudget.choose` {choose_1e5[name] * 1e6:.1f} µs per item over 10^5 "
                         f"distinct sizes (bar: under 20 µs): **{'met' if choose_1e5[name] < 20e-6 else 'missed'}**.")
    return "\n".join(lines) + "\n"


def source_state() -> str:
    def git(*command):
        return subprocess.run(["git", *command], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.rstrip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        changed = git("status", "--porcelain", "--", "index", "polydom", "greedy").splitlines()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    files = [line[3:] for line in changed]
    return f"`{commit}`" + (f", with uncommitted changes to {', '.join(files)}" if files else ", unmodified")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "polydom-planning-scale"),
                        help="where the fitted indexes are kept between runs")
    parser.add_argument("--train-per-class", type=int, default=20)
    parser.add_argument("--items", type=int, nargs="+", default=list(ITEMS))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--fraction", type=float, default=0.1,
                        help="total budget, as a fraction of every item's most accurate set")
    parser.add_argument("--choose-items", type=int, default=100_000)
    parser.add_argument("--before", default=BEFORE, help="the commit whose code is timed as 'before'")
    parser.add_argument("--before-up-to", type=int, default=100_000, help="largest N the 'before' code is run at")
    parser.add_argument("--before-choose-items", type=int, default=2_000)
    parser.add_argument("--out", default=str(HERE / "results" / "planning-scale.md"))
    args = parser.parse_args(argv)
    started = time.perf_counter()
    load_start = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    indexes = fit_indexes(cache, args.train_per_class)
    before = load_before(args.before) if args.before_up_to > 0 else None
    warnings.simplefilter("ignore")  # sizes outside the fit's timing range are the demo's own
    results = {name: measure(name, index, before, args) for name, index in indexes.items()}
    info = {
        "command": shlex.join(["python", "-P", "benchmarks/planning_scale.py",
                               *(sys.argv[1:] if argv is None else argv)]),
        "wall": time.perf_counter() - started, "commit": source_state(), "load_start": load_start,
        "load_after": " / ".join(f"{x:.1f}" for x in os.getloadavg()),
        "indexes": {name: repr(index) for name, index in indexes.items()},
    }
    text = report(results, args, info)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
