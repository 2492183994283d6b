"""index.store under SIGKILL: a writer killed at random moments mid-save never leaves a mixed or broken index."""

import os
import random
import signal
import time

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

import polydom

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")

ROUNDS = 30


def wide_index(seed, n_features=5, width=1500, rows=30):
    """An index whose models are wide logistic regressions (a save takes ~0.1 s)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, n_features * width))
    y = (X[:, ::width].sum(axis=1) > 0).astype(int)
    names = [f"f{i}" for i in range(n_features)]
    costs = {n: [float(rng.uniform(0, 5)), float(rng.uniform(0, 1))] for n in names}

    def expand(features):
        cols = [names.index(f) * width + j for f in sorted(features) for j in range(width)] or [0]
        model = LogisticRegression(solver="liblinear").fit(X[:, cols], y)
        return polydom.Expansion(0.5 * model.score(X[:, cols], y) + 0.25 * len(features) / n_features, model)

    return polydom.build(costs, expand)


def fingerprint(model) -> bytes:
    return model.coef_.tobytes() + model.intercept_.tobytes()


def snapshot(index, qs):
    """Everything a reader can observe: every answer and every candidate's model."""
    answers = [tuple(index.lookup(n, c)[:4]) for n, c in qs]
    models = {key: fingerprint(index.models.get(key)) for key in index.candidates}
    return answers, models


def timed_save_in_child(index, path) -> float:
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            index.save(path)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    return time.perf_counter() - started


def test_a_writer_killed_at_random_moments_leaves_the_old_or_the_new_index(tmp_path):
    a, b = wide_index(1), wide_index(2)
    rng = random.Random(7)
    qs = [(rng.uniform(0, 40), rng.uniform(0, 60)) for _ in range(200)]
    expected = {"a": snapshot(a, qs), "b": snapshot(b, qs)}
    assert expected["a"][0] != expected["b"][0]
    path = tmp_path / "idx"
    a.save(path)
    save_seconds = timed_save_in_child(b, path)  # what the writer below takes: fork, then one save

    seen, interrupted = set(), 0
    for round_ in range(ROUNDS):
        first, second = (b, a) if round_ % 2 == 0 else (a, b)
        pid = os.fork()
        if pid == 0:  # the writer: saves over the index until killed
            try:
                while True:
                    first.save(path)
                    second.save(path)
            finally:
                os._exit(1)
        time.sleep(rng.uniform(0.0, 2.0 * save_seconds))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        interrupted += any(e.startswith((".tmp-", ".trash-", ".current-")) for e in os.listdir(path))

        loaded = polydom.load(path)
        observed = snapshot(loaded, qs)
        matches = [name for name, snap in expected.items() if snap == observed]
        assert matches, f"round {round_}: the loaded index is neither the old nor the new one"
        seen.update(matches)
        del loaded, observed  # unpins its version, so later saves may remove it

    assert seen == {"a", "b"}
    assert interrupted >= 3, f"only {interrupted} kills landed mid-save; the test proves little"
    a.save(path)  # a clean save removes every leftover
    entries = sorted(os.listdir(path))
    assert entries[:2] == [".writer.lock", "current"] and len(entries) <= 4
    assert all(e.startswith("v") for e in entries[2:])
    assert snapshot(polydom.load(path), qs) == expected["a"]
