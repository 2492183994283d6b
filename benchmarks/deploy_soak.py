"""Deploy soak: serve lookups, walks and predictions while another process deploys new builds.

Four small classifiers are fitted once on digits (16x16 renderings, cv=2) and saved apart:
``base`` (thumbnail, intensity_hist), ``reordered`` (the same features in the other order),
``added`` (edge_density added) and ``strings`` (base's features, classes ``"d0"`` ... ``"d9"``).
One of them is published at a live path and loaded as a classifier. Then, for ``--seconds``:

* a publisher *process* deploys, in turn, the reordered build, the build with a feature added,
  the build with new classes, and a swapped directory (the base build saved elsewhere, the live
  directory removed with ``rmtree`` and the new one renamed into its place), one every
  ``--pause`` seconds;
* ``--threads`` serving threads send ``lookup`` and ``select`` to the classifier's live index
  and ``predict`` / ``explain`` (three images a request) to the classifier, with random sizes
  and budgets;
* the main thread refreshes every ``--refresh-every`` seconds, alternately through
  ``clf.refresh()`` and ``clf.index_.refresh()``.

Every answer is checked against the four builds, each loaded fresh before the soak: a lookup's
(features, accuracy, cost) must be one build's answer at that size and budget; a walk's (features,
accuracy) one of a build's trained sets; a request's labels all from one build (``explain``: the
set served, its score and the label that build's model gives on that image; ``predict``: labels
that build can give on those images). Counted: queries, refreshes, deploys of each kind,
exceptions other than the documented refusal (``ClassifierStateError``, counted apart), refreshes
that found the live path mid-swap (a ``StoreError`` from ``refresh``: the path held no complete
index for a moment; the classifier keeps serving its version; counted apart), answers matching
no build, and resident memory (``VmRSS``) at the start and the end of the soak's second half.

    python benchmarks/deploy_soak.py --seconds 60

Prints a table and writes ``benchmarks/results/deploy-soak.md``. The bar: 0 exceptions, 0 mixed
answers, resident memory growing less than 20 MB over the second half.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import platform
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np

import polydom
from polydom.classifier.classifier_state import ClassifierStateError
from polydom.featurizers import validate_image
from polydom.featurizers.datasets import load_digits_images
from polydom.index.store import StoreError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # sibling helpers, under python -P too
from revision import source_of  # noqa: E402

#: Each build's features, and whether its classes are strings.
VARIANTS = {
    "base": (["thumbnail", "intensity_hist"], False),
    "reordered": (["intensity_hist", "thumbnail"], False),
    "added": (["thumbnail", "intensity_hist", "edge_density"], False),
    "strings": (["thumbnail", "intensity_hist"], True),
}
#: Deploy kinds, in the order the publisher cycles through them, and the build each publishes.
KINDS = {"reordered": "reordered", "added": "added", "classes": "strings", "swap": "base"}
FAST = dict(cv=2, timing=polydom.Timing(sides=(8, 12, 16, 24, 32), images=2, repeats=1), random_state=0, progress=False)
SIZES = (64.0, 144.0, 256.0, 576.0, 1024.0)
BUDGETS = (0.0, 5e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, math.inf)
REQUEST_BUDGETS = (None, 0.0, 2e-4, 1e-3, 5e-3)
RESULTS = Path(__file__).resolve().parent / "results" / "deploy-soak.md"
BAR_RSS_MB = 20.0


def rss_mb() -> float:
    """This process's resident memory (``VmRSS``), in MB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


# ------------------------------------------------------------------------------ builds


def prebuild(where: Path) -> dict[str, Path]:
    """Fit every build once and save each to a directory of its own."""
    images, labels, _ = load_digits_images(sides=(16,), n_per_class=5, random_state=0)
    labels = np.asarray(labels)
    out = {}
    for name, (features, strings) in VARIANTS.items():
        y = np.array([f"d{v}" for v in labels]) if strings else labels
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a contended machine's timing warnings: noise here
            clf = polydom.CostSensitiveClassifier(features=features, **FAST).fit(images, y)
        out[name] = where / name
        clf.save(out[name])
    return out


def served_images():
    """Ten digits, one of each class, that the serving threads predict."""
    images, labels, _ = load_digits_images(sides=(16,), n_per_class=6, random_state=1)
    first = {}
    for i, label in enumerate(labels):
        first.setdefault(int(label), i)
    return [images[i] for i in sorted(first.values())]


class Build:
    """What one build answers, read from a fresh load of it."""

    def __init__(self, path: Path, images):
        index = polydom.load(path)
        self.lookups = {}
        for size in SIZES:
            for budget in BUDGETS:
                c = index.lookup(size, budget)
                self.lookups[(size, budget)] = (frozenset(c.features), c.accuracy, c.cost)
        self.trained = {(frozenset(index.space.frozenset(m)), float(a)) for m, a in index.trained.items()}
        clf = polydom.CostSensitiveClassifier.load(path)
        planner = clf.planner_
        self.answers = []  # per image: (features served, score) -> label
        for i, image in enumerate(images):
            array = validate_image(image, index=i)
            vectors = {n: f.evaluate(array, index=i) for n, f in planner.features.items()}
            table = {}
            for mask, score in planner.index.trained.items():
                plan = planner.plan(mask)
                x = np.concatenate([vectors[n] for n in plan.names]) if plan.names else np.zeros(0)
                table[(plan.names, float(score))] = plan.predictor.predict_one(x)
            self.answers.append(table)
        self.labels = [set(t.values()) for t in self.answers]


# ------------------------------------------------------------------------------ publisher


def publish(live: str, builds: str, seconds: float, pause: float) -> None:
    """The publisher process: deploy builds at ``live`` for ``seconds``; print the counts as JSON."""
    clfs = {name: polydom.CostSensitiveClassifier.load(os.path.join(builds, name)) for name in set(KINDS.values())}
    counts = collections.Counter()
    kinds = list(KINDS)
    deadline = time.monotonic() + seconds
    k = 0
    while time.monotonic() < deadline:
        kind = kinds[k % len(kinds)]
        clf = clfs[KINDS[kind]]
        if kind == "swap":
            # Built elsewhere on the same file system, then swapped in: rmtree + rename.
            elsewhere = live + ".next"
            shutil.rmtree(elsewhere, ignore_errors=True)
            clf.save(elsewhere)
            shutil.rmtree(live)
            os.rename(elsewhere, live)
        else:
            clf.save(live)
        counts[kind] += 1
        k += 1
        time.sleep(pause)
    print(json.dumps(counts), flush=True)


# ------------------------------------------------------------------------------ the soak


class Tally:
    """One serving thread's counts (merged at the end: no lock on the hot path)."""

    def __init__(self):
        self.queries = collections.Counter()
        self.mixed = collections.Counter()
        self.errors = collections.Counter()
        self.refusals = 0
        self.samples: list[str] = []


def serve(clf, builds: dict, images, seed: int, stop: threading.Event, tally: Tally) -> None:
    rng = random.Random(seed)
    index = clf.index_  # the live index the main thread refreshes
    names = list(builds)
    while not stop.is_set():
        kind = rng.choice(("lookup", "select", "predict"))
        try:
            if kind == "lookup":
                key = (rng.choice(SIZES), rng.choice(BUDGETS))
                c = index.lookup(*key)
                ok = any(builds[v].lookups[key] == (frozenset(c.features), c.accuracy, c.cost) for v in names)
            elif kind == "select":
                c = index.select(rng.choice(SIZES), rng.choice(BUDGETS), lambda name: None)
                ok = any((frozenset(c.features), float(c.accuracy)) in builds[v].trained for v in names)
            else:
                picked = rng.sample(range(len(images)), 3)
                batch = [images[i] for i in picked]
                budget = rng.choice(REQUEST_BUDGETS)
                if rng.random() < 0.5:
                    got = clf.explain(batch, budget=budget)
                    ok = any(all(builds[v].answers[i].get((e.features, e.estimated_accuracy), object()) == e.label
                                 for i, e in zip(picked, got)) for v in names)
                else:
                    got = clf.predict(batch, budget=budget).tolist()
                    ok = any(all(label in builds[v].labels[i] for i, label in zip(picked, got)) for v in names)
        except ClassifierStateError:
            tally.refusals += 1  # the documented refusal: counted apart
            continue
        except Exception as exc:  # noqa: BLE001 -- every other exception is what the soak counts
            tally.errors[f"{kind}: {type(exc).__name__}"] += 1
            if len(tally.samples) < 5:
                tally.samples.append(f"{kind}: {exc!r}"[:300])
            continue
        tally.queries[kind] += 1
        if not ok:
            tally.mixed[kind] += 1
            if len(tally.samples) < 5:
                tally.samples.append(f"mixed {kind}: {got if kind == 'predict' else c!r}"[:300])


def soak(args) -> dict:
    work = Path(args.workdir or tempfile.mkdtemp(prefix="deploy-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    paths = prebuild(work / "builds")
    images = served_images()
    builds = {name: Build(path, images) for name, path in paths.items()}
    prebuild_seconds = time.perf_counter() - started
    live = str(work / "live")
    polydom.CostSensitiveClassifier.load(paths["base"]).save(live)
    clf = polydom.CostSensitiveClassifier.load(live)

    env = dict(os.environ)
    root = str(Path(polydom.__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    publisher = subprocess.Popen(
        [sys.executable, __file__, "--publish", live, "--builds", str(work / "builds"), "--seconds", str(args.seconds),
         "--pause", str(args.pause)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    stop = threading.Event()
    tallies = [Tally() for _ in range(args.threads)]
    threads = [threading.Thread(target=serve, args=(clf, builds, images, seed, stop, tallies[seed]), daemon=True)
               for seed in range(args.threads)]
    refresh = collections.Counter()
    refresh_errors = collections.Counter()
    refresh_samples: list[str] = []
    rss = {}
    t0 = time.monotonic()
    for t in threads:
        t.start()
    try:
        k = 0
        while time.monotonic() - t0 < args.seconds:
            if "half" not in rss and time.monotonic() - t0 >= args.seconds / 2:
                rss["half"] = rss_mb()
            time.sleep(args.refresh_every)
            k += 1
            try:
                switched = clf.refresh() if k % 2 else clf.index_.refresh()
                refresh["calls"] += 1
                refresh["switched"] += bool(switched)
            except ClassifierStateError:
                refresh["refused"] += 1
            except StoreError as exc:  # the live path had no complete index (a swap under way)
                refresh["mid-swap"] += 1
                refresh_errors[type(exc).__name__] += 1
                if len(refresh_samples) < 3:  # the report names no machine path: <work> for the soak's
                    refresh_samples.append(repr(exc).replace(str(work), "<work>")[:300])
            except Exception as exc:  # noqa: BLE001 -- counted as an exception
                refresh_errors[f"other {type(exc).__name__}"] += 1
                refresh["other errors"] += 1
                if len(refresh_samples) < 3:
                    refresh_samples.append(repr(exc).replace(str(work), "<work>")[:300])
        rss["end"] = rss_mb()
    finally:
        stop.set()
        hung = 0
        for t in threads:
            t.join(timeout=60)
            hung += t.is_alive()
        try:
            out, err = publisher.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            publisher.kill()
            out, err = publisher.communicate()
    deploys = json.loads(out.strip().splitlines()[-1]) if publisher.returncode == 0 and out.strip() else {}
    queries, mixed, errors = collections.Counter(), collections.Counter(), collections.Counter()
    refusals, samples = 0, []
    for tally in tallies:
        queries.update(tally.queries)
        mixed.update(tally.mixed)
        errors.update(tally.errors)
        refusals += tally.refusals
        samples += tally.samples
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "seconds": args.seconds, "threads": args.threads, "prebuild_seconds": prebuild_seconds,
        "queries": dict(queries), "mixed": dict(mixed), "errors": dict(errors), "refusals": refusals,
        "samples": samples, "refresh": dict(refresh), "refresh_errors": dict(refresh_errors),
        "refresh_samples": refresh_samples, "deploys": deploys, "publisher_rc": publisher.returncode,
        "publisher_stderr": err[-2000:], "rss_half": rss.get("half"), "rss_end": rss.get("end"), "hung": hung,
    }


# ------------------------------------------------------------------------------ report




def source_commit() -> str:
    """The commit of the polydom source imported, and its library files that differ from it."""
    found = source_of(polydom)
    if found is None:
        return "unknown (not a git checkout)"
    commit, files = found
    changed = [f for f in files if f.endswith(".py")]
    return commit + (f" with uncommitted changes in {', '.join(changed)}" if changed else "")


def report(r: dict, command: str) -> str:
    total = sum(r["queries"].values())
    growth = r["rss_end"] - r["rss_half"]
    errors = sum(r["errors"].values()) + r["refresh"].get("other errors", 0) + (r["publisher_rc"] != 0) + r["hung"]
    mixed = sum(r["mixed"].values())
    passed = errors == 0 and mixed == 0 and growth < BAR_RSS_MB
    rows = [
        ("queries answered", f"{total} ({', '.join(f'{k} {v}' for k, v in sorted(r['queries'].items()))})"),
        ("refreshes", f"{r['refresh'].get('calls', 0)} completed, {r['refresh'].get('switched', 0)} switched version"),
        ("deploys", f"{sum(r['deploys'].values())} ("
                    + ", ".join(f"{k} {r['deploys'].get(k, 0)}" for k in KINDS) + ")"),
        ("exceptions (other than the refusal)", f"{errors}"
         + (f" ({', '.join(f'{k} {v}' for k, v in r['errors'].items())})" if r["errors"] else "")),
        ("refusals (ClassifierStateError)", f"{r['refusals']} in requests, {r['refresh'].get('refused', 0)} in refresh"),
        ("refreshes that found the path mid-swap", f"{r['refresh'].get('mid-swap', 0)}"
         + (f" ({', '.join(f'{k} {v}' for k, v in r['refresh_errors'].items())})" if r["refresh_errors"] else "")),
        ("answers matching no build", f"{mixed}"
         + (f" ({', '.join(f'{k} {v}' for k, v in r['mixed'].items())})" if r["mixed"] else "")),
        ("VmRSS, second half", f"{r['rss_half']:.1f} MB -> {r['rss_end']:.1f} MB ({growth:+.1f} MB)"),
        ("serving threads hung", f"{r['hung']}"),
    ]
    width = max(len(k) for k, _ in rows)
    table = "\n".join(f"| {k:<{width}} | {v} |" for k, v in rows)
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = [
        "# Deploy soak",
        "",
        f"`{command}`",
        "",
        f"polydom commit {source_commit()}; {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, numpy {np.__version__}; load average (1 / 5 / 15 min) at the end {load}. "
        f"{r['threads']} serving threads, {r['seconds']:.0f} s of soak after {r['prebuild_seconds']:.0f} s of "
        "prebuilding the four builds (fitted once, 16x16 digits, cv=2).",
        "",
        "Each deploy is published by a separate process at the live path: the base build's features "
        "reordered, a feature added (edge_density), new classes (\"d0\" ... \"d9\"), and a swapped directory "
        "(the base build saved elsewhere, the live directory removed with rmtree and the new one renamed in). "
        "The main thread refreshes alternately through `clf.refresh()` and `clf.index_.refresh()`. Every "
        "answer is checked against the four builds, each loaded fresh: lookups by (features, accuracy, "
        "cost), walks by (features, accuracy), predictions by the labels one build gives (every image of "
        "a request from the same build).",
        "",
        "| count | value |",
        "|---|---|",
        table,
        "",
        f"The bar -- 0 exceptions, 0 answers matching no build, VmRSS growth under {BAR_RSS_MB:.0f} MB over the "
        f"second half: **{'met' if passed else 'NOT met'}**.",
        "",
        "A refresh that finds the live path mid-swap (removed, or partly removed, by the deployer's rmtree "
        "before the rename) raises a `StoreError` and changes nothing: the classifier and its index keep "
        "serving the version they hold, and the next refresh adopts the swapped-in build. No query fails "
        "or changes meanwhile; these are counted apart from exceptions.",
    ]
    if r["samples"] or r["refresh_samples"]:
        lines += ["", "Samples:", ""] + [f"- `{s}`" for s in r["samples"] + r["refresh_samples"]]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the soak (default 60)")
    parser.add_argument("--threads", type=int, default=3, help="serving threads (default 3)")
    parser.add_argument("--pause", type=float, default=0.3, help="seconds between deploys (default 0.3)")
    parser.add_argument("--refresh-every", type=float, default=0.02, help="seconds between refreshes (default 0.02)")
    parser.add_argument("--workdir", help="keep the builds and the live index here (default: a temporary folder)")
    parser.add_argument("--out", default=str(RESULTS), help="the report (default benchmarks/results/deploy-soak.md)")
    parser.add_argument("--publish", help=argparse.SUPPRESS)  # the publisher process's live path
    parser.add_argument("--builds", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.publish:
        publish(args.publish, args.builds, args.seconds, args.pause)
        return 0
    command = "python benchmarks/deploy_soak.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    r = soak(args)
    text = report(r, command.strip())
    print(text)
    if r["publisher_rc"] != 0:
        print(r["publisher_stderr"], file=sys.stderr)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    bar = (sum(r["errors"].values()) == 0 and sum(r["mixed"].values()) == 0 and r["hung"] == 0
           and r["publisher_rc"] == 0 and r["refresh"].get("other errors", 0) == 0)
    return 0 if bar else 1


if __name__ == "__main__":
    sys.exit(main())
