"""The demo's headline numbers, kept in ``OUT/headline.json`` so that the next run can say how far they moved.

The headline is each backend's held-out accuracy averaged over the budget grid (every budget
weighs the same), with its standard error over pictures (:mod:`polydom.demo.stats`), and its
accuracy at each budget. Two runs with the same settings train on the same images with the same
folds and seeds, so what moves between them is this machine's timing: the cost curves, and the
measured times that the anytime walk reacts to.
"""

from __future__ import annotations

import datetime
import json
import math
import os

from polydom.demo import stats

__all__ = ["FORMAT", "FILE", "make", "read", "write", "compare"]

FORMAT = "polydom-demo-headline-v1"
FILE = "headline.json"
#: Settings that must agree for two headlines to be compared.
_SETTINGS = ("dataset", "features", "sides", "train_per_class", "held_out_per_class", "cv", "cv_repeats", "budgets",
             "random_state")
#: What a headline written before a setting was recorded had: the setting's value then.
_SETTING_DEFAULTS = {"cv_repeats": 1}


def make(results: dict) -> dict:
    """The headline of a run's results (see :func:`lab.job.run_demo`)."""
    pictures = results["test_pictures"]
    backends = {}
    for name, grid in results["grids"].items():
        mean = stats.overall(grid.correct, pictures)
        by_budget = stats.accuracy(grid.correct, pictures)
        backends[name] = {"mean": mean.value, "se": mean.se, "by_budget": [[e.value, e.se] for e in by_budget]}
    settings = {k: results[k] for k in _SETTINGS}
    settings = {k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()}
    return {"format": FORMAT, "generated": datetime.datetime.now().isoformat(timespec="seconds"),
            "settings": settings, "backends": backends, "wall_seconds": results.get("wall_seconds")}


def read(path) -> dict | None:
    """The headline at ``path`` (a ``headline.json`` or a directory holding one); None if absent
    or not a demo headline."""
    if path is None:
        return None
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, FILE)
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    data["path"] = path
    return data


def write(out, headline: dict) -> str:
    """Write ``headline`` to ``out/headline.json``; returns the path."""
    path = os.path.join(os.fspath(out), FILE)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump({k: v for k, v in headline.items() if k != "path"}, fh, indent=1)
    return path


def compare(previous: dict | None, current: dict) -> dict:
    """How far the headline moved since ``previous``.

    Returns
    -------
    dict
        ``status``: ``"none"`` (no previous run), ``"different"`` (other settings: the keys that
        differ in ``differs``) or ``"compared"``, with ``rows`` -- per backend ``(name, before,
        after, change)``, each an :class:`~polydom.demo.stats.Estimate` (the change's standard
        error combines the two runs' as if independent, which overstates it: the runs share
        their pictures) -- ``within`` (every change within its standard error), ``largest``
        (the largest change at any single budget: backend, budget index, change) and the
        previous run's ``generated`` and ``wall_seconds``.
    """
    if previous is None:
        return {"status": "none"}
    before = {**_SETTING_DEFAULTS, **previous.get("settings", {})}
    differs = [k for k in _SETTINGS if before.get(k) != current["settings"][k]]
    if differs:
        return {"status": "different", "differs": differs, "path": previous.get("path")}
    rows, largest = [], None
    for name, now in current["backends"].items():
        before = previous["backends"].get(name)
        if before is None:
            continue
        a, b = stats.Estimate(before["mean"], before["se"]), stats.Estimate(now["mean"], now["se"])
        change = stats.Estimate(b.value - a.value, math.hypot(a.se, b.se))
        rows.append((name, a, b, change))
        for k, ((va, sa), (vb, sb)) in enumerate(zip(before["by_budget"], now["by_budget"])):
            step = stats.Estimate(vb - va, math.hypot(sa, sb))
            if largest is None or abs(step.value) > abs(largest[2].value):
                largest = (name, k, step)
    return {"status": "compared", "rows": rows, "within": all(abs(c.value) <= c.se for *_, c in rows),
            "largest": largest, "generated": previous.get("generated"), "wall_seconds": previous.get("wall_seconds"),
            "path": previous.get("path")}
