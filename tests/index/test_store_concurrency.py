"""index.store with many readers: processes and threads looking up during rebuilds, and fork."""

import multiprocessing
import os
import random
import threading
import time

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

import polydom

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
FORK = multiprocessing.get_context("fork") if hasattr(os, "fork") else None


def small_index(seed, n_features=5, width=40, rows=30):
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


@pytest.fixture(scope="module")
def pair():
    a, b = small_index(1), small_index(2)
    rng = random.Random(3)
    qs = [(rng.uniform(0, 40), rng.uniform(0, 60)) for _ in range(100)]
    answers = {name: [tuple(ix.lookup(n, c)[:4]) for n, c in qs] for name, ix in (("a", a), ("b", b))}
    assert answers["a"] != answers["b"]
    models = {name: {k: fingerprint(ix.models[k]) for k in ix.candidates} for name, ix in (("a", a), ("b", b))}
    return a, b, qs, answers, models


def which_version(index, qs, answers, models, rng):
    """Name of the index whose every answer ``index`` gives, checking one model too; raises if none."""
    got = [tuple(index.lookup(n, c)[:4]) for n, c in qs]
    names = [name for name, want in answers.items() if got == want]
    if len(names) != 1:
        raise AssertionError("torn read: the answers match neither index")
    key = rng.choice(index.candidates)
    if fingerprint(index.models.get(key)) != models[names[0]][key]:
        raise AssertionError("torn read: a model from the other index")
    batch = index.lookup_many(*zip(*qs))
    if [tuple(batch[i][:4]) for i in range(len(qs))] != got:
        raise AssertionError("lookup_many disagrees with lookup")
    return names[0]


def _reader(path, qs, answers, models, seed, started, stop, results):
    rng = random.Random(seed)
    seen, rounds, errors = set(), 0, []
    try:
        index = polydom.load(path)
        seen.add(which_version(index, qs, answers, models, rng))
        started.wait(60)  # the rebuilds begin once every reader is serving
        while not stop.is_set() or rounds < 3:
            if rng.random() < 0.5:
                index.refresh()
            else:
                index = polydom.load(path)
            seen.add(which_version(index, qs, answers, models, rng))
            rounds += 1
    except Exception as exc:  # reported to the parent, which fails the test
        errors.append(f"{type(exc).__name__}: {exc}")
    results.put((sorted(seen), rounds, errors))


def _writer(a, b, path, saves):
    for i in range(saves):
        (b if i % 2 == 0 else a).save(path)


def test_reader_processes_during_rebuilds_see_whole_versions_only(pair, tmp_path):
    a, b, qs, answers, models = pair
    path = tmp_path / "idx"
    a.save(path)
    started, stop, results = FORK.Barrier(4), FORK.Event(), FORK.Queue()
    readers = [FORK.Process(target=_reader, args=(path, qs, answers, models, s, started, stop, results)) for s in range(3)]
    for p in readers:
        p.start()
    started.wait(60)
    writer = FORK.Process(target=_writer, args=(a, b, path, 12))
    writer.start()
    writer.join(60)
    stop.set()
    outcomes = [results.get(timeout=60) for _ in readers]
    for p in readers:
        p.join(10)
    assert writer.exitcode == 0
    assert all(not errors for _, _, errors in outcomes), outcomes
    assert all(rounds >= 3 for _, rounds, _ in outcomes)
    assert any(seen == ["a", "b"] for seen, _, _ in outcomes), outcomes


def test_threads_share_a_loaded_index_while_another_process_rebuilds(pair, tmp_path):
    a, b, qs, answers, models = pair
    path = tmp_path / "idx"
    a.save(path)
    shared = polydom.load(path)
    errors, seen = [], set()
    stop = threading.Event()

    def serve(seed):
        rng, index = random.Random(seed), shared
        try:
            while not stop.is_set():
                seen.add(which_version(index, qs, answers, models, rng))
                if seed % 2:
                    index = polydom.load(path)  # swap in the newest snapshot: one reference assignment
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=serve, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    # An odd number of saves ends on "b", so the reloading threads see it even if the writer ran
    # through every save while they were busy (a loaded machine); no timing assumption remains.
    writer = FORK.Process(target=_writer, args=(a, b, path, 7))
    writer.start()
    writer.join(120)
    deadline = time.monotonic() + 60
    while "b" not in seen and not errors and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join(30)
    assert writer.exitcode == 0 and not errors, errors
    assert seen == {"a", "b"}
    assert which_version(shared, qs, answers, models, random.Random(0)) == "a"  # still its snapshot


def _in_child(index, key, conn):
    try:
        conn.send((fingerprint(index.lookup(1.0, 1e9).model), fingerprint(index.models.get(key)), key in index.models))
    except Exception as exc:
        conn.send(f"{type(exc).__name__}: {exc}")
    conn.close()


def test_a_loaded_index_works_after_fork(pair, tmp_path):
    a, b, qs, answers, models = pair
    path = tmp_path / "idx"
    a.save(path)
    index = polydom.load(path)
    first = index.lookup(1.0, 1e9).model  # loaded in the parent before the fork
    later = next(k for k in a.candidates if k != index.lookup(1.0, 1e9).key)
    b.save(path, keep=1)  # the parent's version stays: it is pinned, and the pin is inherited
    b.save(path, keep=1)
    for _ in range(2):
        parent_end, child_end = FORK.Pipe()
        child = FORK.Process(target=_in_child, args=(index, later, child_end))
        child.start()
        got = parent_end.recv()
        child.join(10)
        assert got == (fingerprint(first), models["a"][later], True), got
    # the children read through the inherited descriptors; the parent's are untouched
    assert fingerprint(index.models.get(later)) == models["a"][later]
    assert which_version(index, qs, answers, models, random.Random(1)) == "a"
