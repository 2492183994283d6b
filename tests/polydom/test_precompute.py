"""Precompute at scale: parallel expansion, the resumable cache, max_expansions, progressive alpha."""

import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import polydom
from polydom.testing import BruteForce


def _same_index(a, b):
    assert a.candidates == b.candidates
    assert a.candidate_accuracy == b.candidate_accuracy
    assert a.bounds == b.bounds and a.skylines == b.skylines
    assert a.explored == b.explored


def test_parallel_loky_matches_serial():
    # The black box must be importable by worker processes: use the installed generator's.
    inst = polydom.make_synthetic(9, k=None, seed=1)
    serial = polydom.build(inst.costs, inst.expand, alpha=1.1)
    parallel = polydom.build(inst.costs, inst.expand, alpha=1.1, n_jobs=2)
    _same_index(serial, parallel)
    assert serial.stats["trained"] == parallel.stats["trained"]


def test_parallel_dask_local_cluster_matches_serial():
    distributed = pytest.importorskip("distributed")
    import joblib

    inst = polydom.make_synthetic(8, k=None, seed=2)
    serial = polydom.build(inst.costs, inst.expand, alpha=1.0)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        with distributed.Client(cluster):
            with joblib.parallel_config(backend="dask"):
                on_dask = polydom.build(inst.costs, inst.expand, alpha=1.0, n_jobs=-1)
    _same_index(serial, on_dask)


def test_cache_reuses_everything_under_the_same_key(tmp_path):
    inst = polydom.make_synthetic(8, k=None, seed=3)
    calls = []

    def expand(features):
        calls.append(features)
        return inst.expand(features)

    first = polydom.build(inst.costs, expand, alpha=1.2, cache=tmp_path / "c", cache_key="k1")
    n_first = len(calls)
    assert first.stats["trained"] == n_first
    # Another alpha: only the sets alpha = 1 adds are trained.
    exact = polydom.build(inst.costs, expand, alpha=1.0, cache=tmp_path / "c", cache_key="k1")
    assert len(calls) == 256 and len(set(calls)) == 256
    assert exact.stats["trained"] == 256 - n_first and exact.stats["reused"] == n_first
    again = polydom.build(inst.costs, expand, alpha=1.0, cache=tmp_path / "c", cache_key="k1")
    assert again.stats["trained"] == 0 and len(calls) == 256
    _same_index(exact, again)
    # Another key sees nothing.
    other = polydom.build(inst.costs, expand, alpha=1.2, cache=tmp_path / "c", cache_key="k2")
    assert other.stats["trained"] == n_first


def test_cache_survives_adding_a_feature(tmp_path):
    inst = polydom.make_synthetic(7, k=None, seed=4)
    names = list(inst.costs)
    calls = []

    def expand(features):
        calls.append(features)
        return inst.expand(features)

    small = {n: inst.costs[n] for n in names[:-1]}
    polydom.build(small, expand, cache=tmp_path / "c", cache_key="data-v1")
    assert len(calls) == 64
    # The new feature renumbers nothing that matters: names are the key.
    bigger = {names[-1]: inst.costs[names[-1]], **small}
    index = polydom.build(bigger, expand, cache=tmp_path / "c", cache_key="data-v1")
    assert index.stats["trained"] == 64 and index.stats["reused"] == 64 and len(set(calls)) == 128


def test_cached_models_round_trip_through_skops(tmp_path):
    from sklearn.dummy import DummyClassifier

    X, y = np.zeros((6, 1)), np.array([0, 1, 1, 0, 1, 1])

    def expand(features):
        model = DummyClassifier(strategy="constant", constant=len(features) % 2).fit(X, y)
        return polydom.Expansion(accuracy=0.5 + 0.1 * len(features), model=model)

    costs = {"a": [1.0], "b": [2.0]}
    polydom.build(costs, expand, cache=tmp_path / "c", cache_key="m")
    index = polydom.build(costs, lambda f: pytest.fail("trained again"), cache=tmp_path / "c", cache_key="m")
    model = index.lookup(1.0, 10.0).model
    assert model.predict(X[:1]).tolist() == [0] and index.lookup(1.0, 1.0).model.predict(X[:1]).tolist() == [1]


def test_cache_requires_a_key_and_a_directory(tmp_path):
    costs = {"a": [1.0]}
    with pytest.raises(ValueError, match="cache_key"):
        polydom.build(costs, lambda f: 0.5, cache=tmp_path / "c")
    with pytest.raises(ValueError, match="without cache"):
        polydom.build(costs, lambda f: 0.5, cache_key="x")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(polydom.CacheError, match="not a directory"):
        polydom.build(costs, lambda f: 0.5, cache=blocker, cache_key="x")
    with pytest.raises(polydom.CacheError):
        polydom.build(costs, lambda f: 0.5, cache=blocker / "sub", cache_key="x")


WRITER = textwrap.dedent("""
    import sys, time
    import polydom
    inst = polydom.make_synthetic(7, k=None, seed=5)
    log = open(sys.argv[2], "a")
    def expand(features):
        time.sleep(0.02)
        log.write(",".join(sorted(features)) + "\\n"); log.flush()
        return inst.expand(features)
    polydom.build(inst.costs, expand, cache=sys.argv[1], cache_key="resume")
""")


def test_killed_build_resumes_without_retraining(tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    log = tmp_path / "calls.log"
    cache = tmp_path / "cache"
    proc = subprocess.Popen([sys.executable, str(script), str(cache), str(log)])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if log.exists() and len(log.read_text().splitlines()) >= 40:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    started = log.read_text().splitlines()
    assert 40 <= len(started) < 128

    inst = polydom.make_synthetic(7, k=None, seed=5)
    again = []

    def expand(features):
        again.append(",".join(sorted(features)))
        return inst.expand(features)

    index = polydom.build(inst.costs, expand, cache=cache, cache_key="resume")
    # Every set is trained once overall, but for the one in flight when the writer died.
    assert len(started) + len(again) <= 128 + 1
    assert set(started) | set(again) == {",".join(sorted(s)) for s in BruteForce(inst.costs, inst.expand).sets}
    assert len(set(started) & set(again)) <= 1
    assert index.stats["trained"] == len(again)
    _same_index(index, polydom.build(inst.costs, inst.expand))


def test_max_expansions_stops_the_build():
    inst = polydom.make_synthetic(8, k=None, seed=6)
    with pytest.raises(polydom.ExpansionLimitError, match="max_expansions=50"):
        polydom.build(inst.costs, inst.expand, max_expansions=50)
    index = polydom.build(inst.costs, inst.expand, max_expansions=256)
    assert index.stats["trained"] == 256
    with pytest.raises(ValueError, match="max_expansions"):
        polydom.build(inst.costs, inst.expand, max_expansions=0)


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_progressive_alpha_stops_when_the_budget_is_spent():
    inst = polydom.make_synthetic(10, k=None, seed=0)
    clock = FakeClock()
    calls = []

    def expand(features):
        calls.append(features)
        clock.now += 0.01
        return inst.expand(features)

    index = polydom.build_progressive(inst.costs, expand, time_budget=2.0, clock=clock)
    reached = index.stats["alpha_reached"]
    assert index.stats["alphas_completed"][-1] == reached and reached > 1.0
    assert len(calls) == len(set(calls)) == index.stats["trained"]
    # The answer is the index of the last completed alpha, built from the shared cache.
    assert index.params["alpha"] == reached
    direct = polydom.build(inst.costs, inst.expand, alpha=reached)
    _same_index(index, direct)
    # A generous budget reaches alpha = 1 and trains each set once.
    clock2 = FakeClock()
    calls.clear()

    def expand2(features):
        calls.append(features)
        clock2.now += 0.001
        return inst.expand(features)

    full = polydom.build_progressive(inst.costs, expand2, time_budget=1e6, clock=clock2)
    assert full.stats["alpha_reached"] == 1.0 and len(calls) == len(set(calls)) == 1024


def test_progressive_alpha_validates():
    with pytest.raises(ValueError, match="decreasing"):
        polydom.build_progressive({"a": [1]}, lambda f: 0.5, time_budget=1, alphas=[1.0, 1.2])
    with pytest.raises(ValueError, match="time_budget"):
        polydom.build_progressive({"a": [1]}, lambda f: 0.5, time_budget=float("nan"))


def test_progressive_alpha_stops_between_sets_not_after_a_whole_layer():
    inst = polydom.make_synthetic(10, k=None, seed=0)
    clock = FakeClock()

    def expand(features):
        clock.now += 1.0
        return inst.expand(features)

    polydom.build_progressive(inst.costs, expand, time_budget=60, clock=clock)
    assert clock.now <= 60.0 + 1.0
