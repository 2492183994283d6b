"""Builds meeting production: several processes on one expansion cache, a kill during a parallel
build, and hostile or odd input to the classifier and the budgets.

Concurrency tests run real processes with time limits; a hang is a failure.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from polydom.cache import ExpansionStore

pytestmark = pytest.mark.skipif(not hasattr(os, "killpg"), reason="needs POSIX process groups")


def _run_children(scripts, env, cwd, timeout=180):
    """Start every ``(script, args)`` at once; their exit statuses and stderr, or fail after ``timeout``."""
    procs = [subprocess.Popen([sys.executable, "-P", "-c", script, *args], stderr=subprocess.PIPE, text=True, env=env,
                              cwd=cwd, start_new_session=True) for script, args in scripts]
    deadline = time.monotonic() + timeout
    out = []
    try:
        for proc in procs:
            _, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            out.append((proc.returncode, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return out


WRITER = textwrap.dedent("""
    import sys
    from polydom.cache import ExpansionStore

    path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with ExpansionStore(path, "k") as store:
        for i in range(n):
            store.put([tag, f"f{i}"], (i % 100) / 100, None, 0.01)
            if store.get([tag, f"f{i}"]) is None:
                sys.exit(f"{tag}: entry {i} vanished right after it was written")
""")


def test_processes_writing_one_expansion_cache_at_once_keep_every_entry(tmp_path, subprocess_env):
    cache, n, tags = tmp_path / "cache", 400, ("a", "b", "c")
    results = _run_children([(WRITER, [str(cache), tag, str(n)]) for tag in tags], subprocess_env, tmp_path)
    assert [code for code, _ in results] == [0] * len(tags), results  # no SIGABRT, no MDB_CORRUPTED
    with ExpansionStore(cache, "k") as store:
        assert len(store) == n * len(tags)
        for tag in tags:
            for i in range(n):
                hit = store.get([tag, f"f{i}"])
                assert hit is not None and hit.accuracy == (i % 100) / 100 and hit.std_error == 0.01


PARALLEL_BUILD = textwrap.dedent("""
    import os, sys, time
    import polydom

    here = sys.argv[1]
    inst = polydom.make_synthetic(8, k=None, seed=1)
    n = len(inst.costs)

    def expand(features):
        # The first set of the first parallel batch to start never finishes: it is in flight
        # when the build is killed. Every other set leaves a mark once trained.
        if 0 < len(features) < n:
            try:
                os.close(os.open(os.path.join(here, "slow"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass
            else:
                time.sleep(300)
        result = inst.expand(features)
        open(os.path.join(here, "done", "+".join(sorted(features)) or "{}"), "w").close()
        return result

    polydom.build(inst.costs, expand, alpha=1.0, n_jobs=2, cache=os.path.join(here, "cache"), cache_key="k")
""")


def _cached(cache, names_of_sets):
    """How many of ``names_of_sets`` the cache at ``cache`` holds."""
    if not (cache / "data.mdb").exists():
        return 0
    with ExpansionStore(cache, "k") as store:
        return sum(store.get(names) is not None for names in names_of_sets)


def test_a_killed_parallel_build_keeps_every_set_that_finished(tmp_path, subprocess_env):
    (tmp_path / "done").mkdir()
    proc = subprocess.Popen([sys.executable, "-P", "-c", PARALLEL_BUILD, str(tmp_path)], stderr=subprocess.PIPE, text=True,
                            env=subprocess_env, cwd=tmp_path, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        # Wait until one set hangs and the other worker has finished all it could of that batch
        # (more than the first two sets, then no new mark for 2 s; a loaded machine can pause the
        # other worker for longer than that before it goes on).
        marks, stable_since = -1, time.monotonic()
        while True:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, (
                f"the build never went on behind the hanging set ({marks} sets finished, hanging: "
                f"{(tmp_path / 'slow').exists()})")
            now = len(os.listdir(tmp_path / "done"))
            if now != marks:
                marks, stable_since = now, time.monotonic()
            elif (tmp_path / "slow").exists() and marks > 3 and time.monotonic() - stable_since > 2.0:
                break
            time.sleep(0.1)
        finished = [name.split("+") if name != "{}" else [] for name in os.listdir(tmp_path / "done")]
        # Each finished set is committed as it comes back; give the build time to do so.
        commit_deadline = time.monotonic() + 20
        while _cached(tmp_path / "cache", finished) < len(finished) and time.monotonic() < commit_deadline:
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGKILL)  # the build and its workers
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    kept = _cached(tmp_path / "cache", finished)
    assert len(finished) > 3  # the batch went on behind the hanging set
    assert kept == len(finished), f"{len(finished) - kept} of {len(finished)} finished sets lost"


# -- hostile and odd input to the classifier ---------------------------------------------------------


@pytest.fixture(scope="module")
def saved_classifier(tmp_path_factory):
    """A small classifier saved to a path, and three of its images."""
    import polydom
    from polydom.featurizers.datasets import load_digits_images

    images, labels, _ = load_digits_images(sides=(16,), n_per_class=4, random_state=0)
    clf = polydom.CostSensitiveClassifier(features=["thumbnail", "intensity_hist"], cv=2,
                                          timing=polydom.Timing(sides=(8, 12, 16, 24), images=2, repeats=1),
                                          random_state=0, progress=False)
    path = tmp_path_factory.mktemp("clf") / "saved"
    clf.fit(images, labels).save(path)
    return path, images[:3]


def _crafted(saved, tmp_path, edit):
    """A copy of the saved classifier whose stored classifier state ``edit(state)`` changed."""
    import copy

    import polydom

    index = polydom.load(saved)
    state = copy.deepcopy(index.params["classifier"])
    edit(state)
    crafted = copy.copy(index)
    crafted.params = dict(index.params, classifier=state)
    crafted.save(tmp_path / "crafted")
    return tmp_path / "crafted"


def test_a_crafted_classes_dtype_is_refused_at_load_before_it_allocates(saved_classifier, tmp_path):
    import tracemalloc

    import polydom
    from polydom.classifier.classifier_state import ClassifierStateError

    path = _crafted(saved_classifier[0], tmp_path, lambda state: state.update(classes_dtype="S30000000"))
    tracemalloc.start()
    try:
        with pytest.raises(ClassifierStateError, match="classes_dtype"):
            polydom.CostSensitiveClassifier.load(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 50 << 20, f"{peak >> 20} MiB allocated for ten labels"


def _set(key, value):
    def edit(state):
        state[key] = value
    return edit


def _set_fit(feature, key, value):
    def edit(state):
        state["cost_fits"][feature][key] = value
    return edit


CRAFTS = {
    "estimator not base64": (_set("estimator", "zz"), "estimator"),
    "classes not a list": (_set("classes", {"a": 1}), "classes"),
    "classes out of order": (lambda s: s["classes"].reverse(), "ascending"),
    "a class beyond int64": (lambda s: s["classes"].__setitem__(0, 2**70), "classes"),
    "classes the models lack": (_set("classes", [1, 2]), "classes"),
    "columns of another index": (_set("columns", [[0, 64]]), "columns"),
    "cost fit without coefficients": (lambda s: s["cost_fits"]["thumbnail"].pop("coefficients"), "coefficients"),
    "cost fits not an object": (_set("cost_fits", []), "cost_fits"),
    "a guard below 1": (_set_fit("thumbnail", "guard", 0.5), "guard"),
    "guards by size unordered": (_set_fit("thumbnail", "guard_by_size", [[9.0, 1.5], [4.0, 1.5]]), "guard_by_size"),
    "n0 not a number": (_set("n0", "x"), "n0"),
    "learners crafted": (lambda s: s["params"].__setitem__("learners", [1, 2]), "learner"),
    "an unknown parameter": (lambda s: s["params"].__setitem__("no_such_parameter", 1), "no_such_parameter"),
}


@pytest.mark.parametrize("craft", list(CRAFTS))
def test_crafted_classifier_state_is_one_error_at_load(saved_classifier, tmp_path, craft):
    import polydom
    from polydom.classifier.classifier_state import ClassifierStateError

    edit, named = CRAFTS[craft]
    path = _crafted(saved_classifier[0], tmp_path, edit)
    with pytest.raises(ClassifierStateError, match=named):
        polydom.CostSensitiveClassifier.load(path)
    assert issubclass(ClassifierStateError, polydom.PolydomError) and issubclass(ClassifierStateError, ValueError)


def test_a_budget_beyond_float_range_means_no_limit(saved_classifier):
    import numpy as np

    import polydom

    path, images = saved_classifier
    clf = polydom.CostSensitiveClassifier.load(path)
    unlimited = clf.predict(images, budget=float("inf"))
    assert (clf.predict(images, budget=10**400) == unlimited).all()
    assert (clf.predict(images, budget=[10**400] * len(images)) == unlimited).all()
    assert np.allclose(clf.predict_proba(images, budget=10**400), clf.predict_proba(images, budget=None))
    with pytest.raises(ValueError, match="negative"):
        clf.predict(images, budget=[-10**400] * len(images))
