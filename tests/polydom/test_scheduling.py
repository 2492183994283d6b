"""Parallel builds stream: same index as a serial build on every engine, layers overlap, the black
box's data travels once, chunks follow the measured time per set, failures stop the build.

Every parallel test runs under a time limit: a hang fails the test instead of blocking the suite.
"""

import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import polydom
from polydom.expansion import OUT_OF_BAND_BYTES, ModelRecorder
from polydom.lattice import FeatureSpace

LIMIT = 120  # seconds; every build here takes a few


def within(seconds, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` on a daemon thread; fails the test if it does not finish in time.

    joblib's configuration is per thread: ``fn`` enters any ``parallel_config`` it needs itself.
    """
    box = {}

    def target():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the test's thread
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"did not finish within {seconds} s: a hang")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _same_index(a, b):
    assert a.candidates == b.candidates
    assert a.candidate_accuracy == b.candidate_accuracy
    assert a.bounds == b.bounds and a.skylines == b.skylines
    assert a.explored == b.explored
    assert list(a.exploration.accuracy.items()) == list(b.exploration.accuracy.items())
    assert a.exploration.pruned == b.exploration.pruned
    # Sets started on idle workers and never asked for depend on timing; the rest do not.
    assert a.stats["trained"] - a.stats["speculative"] == b.stats["trained"] - b.stats["speculative"]


def _build_on(engine, costs, expand, **options):
    import joblib

    if engine == "loky":
        return polydom.build(costs, expand, n_jobs=2, **options)
    if engine == "threading":
        with joblib.parallel_config(backend="threading"):
            return polydom.build(costs, expand, n_jobs=4, **options)
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        with distributed.Client(cluster), joblib.parallel_config(backend="dask"):
            return polydom.build(costs, expand, n_jobs=-1, **options)


@pytest.mark.parametrize("engine", ["loky", "threading", "dask"])
@pytest.mark.parametrize("options", [dict(alpha=1.0), dict(alpha=1.1, e=0.0), dict(alpha=1.0, e=1.0)])
def test_a_parallel_build_is_the_serial_build(engine, options):
    inst = polydom.make_synthetic(8, k=None, seed=3)  # importable: workers unpickle it
    serial = polydom.build(inst.costs, inst.expand, **options)
    parallel = within(LIMIT, _build_on, engine, inst.costs, inst.expand, **options)
    _same_index(serial, parallel)


class _Timed:
    """A black box that sleeps 5 ms -- 300 ms for the set of all features but f0 -- and notes
    when each set ran (threads share this list)."""

    def __init__(self, n):
        self.n, self.runs = n, []

    def __call__(self, features):
        began = time.perf_counter()
        time.sleep(0.3 if len(features) == self.n - 1 and "f0" not in features else 0.005)
        self.runs.append((len(features), began, time.perf_counter()))
        return 0.3 + 0.6 * len(features) / self.n


def test_the_next_layer_starts_before_the_last_one_ends():
    # e=1 trains every set; layer by layer, no set of size n-2 could start before every set of
    # size n-1 had ended. Streaming starts a set once its own test is decided: those with f0 do
    # not wait for the slow set without f0, which is not their superset.
    import joblib

    n = 7
    box = _Timed(n)
    costs = {f"f{i}": [1.0 + i] for i in range(n)}

    def run():
        with joblib.parallel_config(backend="threading"):
            return polydom.build(costs, box, alpha=1.0, e=1.0, n_jobs=8)

    index = within(LIMIT, run)
    assert index.stats["trained"] == 2**n
    last_end = max(end for size, _, end in box.runs if size == n - 1)
    first_start = min(start for size, start, _ in box.runs if size == n - 2)
    assert first_start < last_end - 0.1
    _same_index(polydom.build(costs, lambda s: 0.3 + 0.6 * len(s) / n, alpha=1.0, e=1.0), index)


@pytest.fixture(scope="module")
def digits_learner():
    from sklearn.datasets import load_digits
    from sklearn.naive_bayes import GaussianNB

    from polydom.classifier.blackbox import FeatureSetLearner, make_splits

    X, y = load_digits(return_X_y=True)
    columns = {f"q{i}": slice(16 * i, 16 * (i + 1)) for i in range(4)}

    def learner():
        return FeatureSetLearner(X, y, columns, [("nb", GaussianNB())], make_splits(3, y, random_state=0))

    return X, columns, learner


@pytest.mark.parametrize("engine", ["loky", "dask"])
def test_the_black_boxs_data_travels_once_and_tasks_carry_only_its_state(engine, digits_learner):
    import joblib

    X, columns, learner = digits_learner
    assert X.nbytes >= OUT_OF_BAND_BYTES
    space = FeatureSpace(list(columns))
    masks = list(space.all_masks())
    expected = ModelRecorder(space, learner()).many(masks)

    def run():
        recorder = ModelRecorder(space, learner(), n_jobs=2)
        try:
            got = []
            for layer in range(len(columns) + 1):  # several submissions: the data still goes once
                got += recorder.many([m for m in masks if m.bit_count() == layer])
            return got, recorder.shipping
        finally:
            recorder.close()

    if engine == "loky":
        got, shipping = within(LIMIT, run)
    else:
        distributed = pytest.importorskip("distributed")

        def on_dask():
            with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                          dashboard_address=None) as cluster:
                with distributed.Client(cluster), joblib.parallel_config(backend="dask"):
                    return run()

        got, shipping = within(LIMIT, on_dask)
    in_layers = [m for layer in range(len(columns) + 1) for m in masks if m.bit_count() == layer]
    assert dict(zip(in_layers, got)) == dict(zip(masks, expected))  # the workers saw the same data
    assert shipping["tasks"] >= 8
    # X (and nothing else that large) was shipped once; every task carried the learner without it.
    assert X.nbytes <= shipping["data_bytes"] < 2 * X.nbytes
    assert shipping["task_bytes"] / shipping["tasks"] < X.nbytes / 4


def test_an_array_changed_between_submissions_is_shipped_again(digits_learner):
    from sklearn.naive_bayes import GaussianNB

    from polydom.classifier.blackbox import FeatureSetLearner, make_splits

    X, columns, _ = digits_learner
    X = np.array(X)  # our own, to change
    y = np.arange(len(X)) % 3
    space = FeatureSpace(list(columns))
    singles = [m for m in space.all_masks() if m.bit_count() == 1]
    pairs = [m for m in space.all_masks() if m.bit_count() == 2]

    def learner(data):
        return FeatureSetLearner(data, y, columns, [("nb", GaussianNB())], make_splits(3, y, random_state=0))

    changed = X[::-1].copy()
    expected = ModelRecorder(space, learner(changed)).many(pairs)

    def run():
        box = learner(X)
        recorder = ModelRecorder(space, box, n_jobs=2)
        try:
            recorder.many(singles)
            X[:] = changed  # in place: same address, new content
            box.cache.clear()
            return recorder.many(pairs), recorder.shipping
        finally:
            recorder.close()

    got, shipping = within(LIMIT, run)
    assert got == expected
    assert shipping["data_bytes"] == 2 * X.nbytes


def test_chunks_follow_the_measured_time_per_set():
    import joblib

    space = FeatureSpace([f"f{i}" for i in range(8)])
    masks = list(space.all_masks())

    def run(sleep):
        def expand(features):
            if sleep:
                time.sleep(sleep)
            return 0.5

        with joblib.parallel_config(backend="threading"):
            recorder = ModelRecorder(space, expand, n_jobs=4)
            try:
                for layer in range(9):
                    recorder.many([m for m in masks if m.bit_count() == layer])
                return recorder.shipping["tasks"]
            finally:
                recorder.close()

    assert within(LIMIT, run, 0.0) < len(masks) / 2  # quick sets: many per task
    assert within(LIMIT, run, 0.03) == len(masks)  # slow sets: one per task


def test_a_failing_set_stops_the_build_naming_itself():
    import joblib

    def expand(features):
        if features == {"f1", "f2"}:
            raise ValueError("boom")
        time.sleep(0.002)
        return 0.5 + 0.1 * len(features)

    def run():
        with joblib.parallel_config(backend="threading"):
            polydom.build({f"f{i}": [1.0] for i in range(4)}, expand, alpha=1.0, e=1.0, n_jobs=3)

    with pytest.raises(polydom.ExpansionError, match=r"expand\(\['f1', 'f2'\]\) raised ValueError: boom") as caught:
        within(LIMIT, run)
    assert isinstance(caught.value.__cause__, ValueError)


WORKER = textwrap.dedent("""
    import sys
    import polydom

    def expand(features):
        # Runs in a loky worker: polydom is not imported there unless the engine needs it.
        if features == {"f0", "f3"} and sys.argv[1] == "fail":
            raise KeyError("no such column")
        return 0.25 if "polydom" in sys.modules else 0.5

    costs = {f"f{i}": [1.0 + i] for i in range(5)}
    try:
        index = polydom.build(costs, expand, alpha=1.0, e=1.0, n_jobs=2)
    except polydom.ExpansionError as exc:
        print("failed:", exc, "|", type(exc.__cause__).__name__, "|", "in the worker" in "".join(getattr(exc, "__notes__", [])))
    else:
        print("accuracies:", sorted(set(index.exploration.accuracy.values())))
""")


def test_loky_workers_need_not_import_polydom_and_failures_come_back(subprocess_env):
    done = subprocess.run([sys.executable, "-P", "-c", WORKER, "ok"], capture_output=True, text=True,
                          env=subprocess_env, timeout=LIMIT)
    assert done.returncode == 0, done.stderr
    assert "accuracies: [0.5]" in done.stdout  # no worker imported polydom
    failed = subprocess.run([sys.executable, "-P", "-c", WORKER, "fail"], capture_output=True, text=True,
                            env=subprocess_env, timeout=LIMIT)
    assert failed.returncode == 0, failed.stderr
    assert "failed: expand(['f0', 'f3']) raised KeyError: 'no such column' | KeyError | True" in failed.stdout


CTRL_C = textwrap.dedent("""
    import os, signal, sys, time
    import polydom

    signal.signal(signal.SIGINT, signal.default_int_handler)  # as on a terminal
    here = sys.argv[1]

    def expand(features):
        if len(features) == 3:  # a long set: training is under way and cannot finish
            open(os.path.join(here, "slow-" + "".join(sorted(features))), "w").close()
            time.sleep(300)
        return 0.5 + 0.01 * len(features)

    polydom.build({f"f{i}": [1.0] for i in range(5)}, expand, alpha=1.0, e=1.0, n_jobs=2)
""")


@pytest.mark.parametrize("to", ["group", "parent"])
def test_ctrl_c_stops_a_parallel_build_and_its_workers(to, tmp_path, subprocess_env):
    # "group" is Ctrl-C on a terminal; "parent" an interrupt sent to the building process alone
    # (a notebook's "interrupt kernel"), which the workers never see.
    import os
    import signal

    proc = subprocess.Popen([sys.executable, "-P", "-c", CTRL_C, str(tmp_path)], stderr=subprocess.PIPE, text=True,
                            env=subprocess_env, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + LIMIT
        while not any(p.name.startswith("slow-") for p in tmp_path.iterdir()):
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "no long set started"
            time.sleep(0.05)
        began = time.monotonic()
        (os.killpg if to == "group" else os.kill)(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        stopped = time.monotonic() - began
        # The workers go too: nothing of the group is left sleeping.
        while True:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            assert time.monotonic() - began < 60, "a worker outlived the build"
            time.sleep(0.1)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if proc.poll() is None:
            proc.wait()
    assert "KeyboardInterrupt" in err and proc.returncode != 0
    assert stopped < 30, f"{stopped:.1f} s from Ctrl-C to exit"


class _FailsOn:
    """Raises for one set (after ``sleep`` seconds) and scores the others by their size."""

    def __init__(self, bad, sleep=0.0):
        self.bad, self.sleep = frozenset(bad), sleep

    def __call__(self, features):
        time.sleep(self.sleep)
        if frozenset(features) == self.bad:
            raise ValueError("the bad set")
        return 0.5 + 0.01 * len(features)


@pytest.mark.parametrize("asked_while_training", [False, True])
def test_a_failed_guess_stops_nothing_until_it_is_asked_for(asked_while_training):
    # A set started on an idle worker may be one a serial build never trains (pruned): its
    # failure must not stop the build. Asked for, it fails as any set does.
    import joblib

    from polydom.expansion import ExpansionError
    from polydom.lattice import ExpansionCache

    space = FeatureSpace(["a", "b", "c"])
    bad = space.mask(["a", "b"])

    def run():
        with joblib.parallel_config(backend="threading"):
            cache = ExpansionCache(ModelRecorder(space, _FailsOn({"a", "b"}, sleep=0.2), n_jobs=2))
            cache.submit([space.mask(["a"])])  # opens the engine: two workers, one busy
            assert cache.speculate([bad]) == [bad]
            if asked_while_training:
                cache.submit([bad])
                with pytest.raises(ExpansionError, match="the bad set"):
                    while cache.pending:
                        cache.collect()
                return
            while cache.pending:
                cache.collect()
            assert bad not in cache.accuracy and not cache.speculative and cache.accuracy
            with pytest.raises(ExpansionError, match="the bad set"):
                cache.many([bad])

    within(LIMIT, run)


class _Remembering:
    """Scores sets by size; notes what it was told to remember (sets trained elsewhere)."""

    def __init__(self, sleep=0.0):
        self.sleep, self.remembered = sleep, []

    def __call__(self, features):
        time.sleep(self.sleep)
        return 0.5 + 0.01 * len(features)

    def remember(self, features, result):
        self.remembered.append(frozenset(features))


def test_a_guess_changes_nothing_until_it_is_claimed():
    # Its model, and what the black box remembers (the learner race), wait for a claim: a guess
    # nobody asks for leaves the build as a serial build leaves it.
    import joblib

    from polydom.lattice import ExpansionCache

    space = FeatureSpace(["a", "b", "c"])
    a, ab = space.mask(["a"]), space.mask(["a", "b"])

    def run():
        with joblib.parallel_config(backend="threading"):
            box = _Remembering()
            recorder = ModelRecorder(space, box, n_jobs=2)
            cache = ExpansionCache(recorder)
            cache.submit([a])
            assert cache.speculate([ab]) == [ab]
            while cache.pending:
                cache.collect()
            assert ab in cache.accuracy and ab in cache.speculative
            assert frozenset({"a", "b"}) not in box.remembered and frozenset({"a"}) in box.remembered
            assert cache(ab) == cache.accuracy[ab]  # claimed: now it counts
            assert box.remembered.count(frozenset({"a", "b"})) == 1 and not cache.speculative
            recorder.close()

    within(LIMIT, run)


def test_guesses_in_flight_do_not_turn_a_finished_wait_into_a_deadline():
    import joblib

    from polydom.lattice import ExpansionCache

    space = FeatureSpace(["a", "b"])
    a, ab = space.mask(["a"]), space.mask(["a", "b"])

    class Slow(_Remembering):
        def __call__(self, features):
            time.sleep(1.0 if len(features) == 2 else 0.1)
            return 0.5 + 0.1 * len(features)

    def run():
        with joblib.parallel_config(backend="threading"):
            recorder = ModelRecorder(space, Slow(), n_jobs=2, clock=time.monotonic)
            cache = ExpansionCache(recorder)
            cache.submit([a])
            assert cache.speculate([ab]) == [ab]
            recorder.deadline = time.monotonic() + 0.05  # passes while both train
            while a in cache.pending:  # the asked-for set comes back: no DeadlineReached
                cache.collect()
            cache.drop_speculative()
            assert cache.accuracy[a] == 0.6 and not cache.pending
            recorder.close()

    within(LIMIT, run)
