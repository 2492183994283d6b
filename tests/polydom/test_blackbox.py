"""The cross-validated black box: learners raced per set, scores with standard errors, repeated folds."""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.datasets import load_digits
from sklearn.dummy import DummyClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB

from polydom.classifier.blackbox import FeatureSetLearner, as_learners, make_splits, standard_error


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    X, y = X[:600] / 16.0, y[:600]
    columns = {"top": slice(0, 32), "bottom": slice(32, 64)}
    return X, y, columns


def test_a_clearly_worse_learner_is_dropped_after_the_first_fold(digits):
    X, y, columns = digits
    splits = make_splits(3, y, random_state=0)
    learner = FeatureSetLearner(X, y, columns, [("chance", DummyClassifier(strategy="uniform", random_state=0)),
                                                ("logreg", LogisticRegression(max_iter=500))], splits)
    result = learner(frozenset({"top", "bottom"}))
    assert learner.chosen[frozenset({"top", "bottom"})] == "logreg"
    assert (learner.race["started"], learner.race["dropped"], learner.race["wins"]) == (2, 1, {"logreg": 1})
    assert len(learner.fold_scores[frozenset({"top", "bottom"})]) == 3
    assert isinstance(result.model, LogisticRegression) and result.accuracy > 0.8


def test_the_better_learner_wins_and_the_result_is_deterministic(digits):
    X, y, columns = digits
    splits = make_splits(3, y, random_state=0)
    learners = [("nb", GaussianNB()), ("logreg", LogisticRegression(max_iter=500))]
    a = FeatureSetLearner(X, y, columns, learners, splits).many([{"top"}, {"bottom"}, {"top", "bottom"}])
    b = FeatureSetLearner(X, y, columns, learners, splits).many([{"top"}, {"bottom"}, {"top", "bottom"}])
    assert [(r.accuracy, r.std_error) for r in a] == [(r.accuracy, r.std_error) for r in b]
    nb = FeatureSetLearner(X, y, columns, GaussianNB(), splits)
    lr = FeatureSetLearner(X, y, columns, LogisticRegression(max_iter=500), splits)
    for s, r in zip([{"top"}, {"bottom"}, {"top", "bottom"}], a):
        # Each set gets the better of the two learners' cross-validated scores.
        assert r.accuracy == max(nb(s).accuracy, lr(s).accuracy)


def test_standard_error_is_the_corrected_resampled_variance(digits):
    X, y, columns = digits
    splits = make_splits(3, y, random_state=0, repeats=2)
    assert len(splits) == 6
    learner = FeatureSetLearner(X, y, columns, LogisticRegression(max_iter=500), splits)
    result = learner(frozenset({"top"}))
    folds = learner.fold_scores[frozenset({"top"})]
    assert result.accuracy == pytest.approx(folds.mean())
    ratio = (1 / 3) / (2 / 3)
    corrected = np.sqrt((1 / 6 + ratio) * folds.var(ddof=1))
    p = (folds.mean() * len(y) + 1) / (len(y) + 2)
    assert result.std_error == pytest.approx(max(corrected, np.sqrt(p * (1 - p) / len(y))))
    assert result.std_error > folds.std(ddof=1) / np.sqrt(6)  # larger than the naive estimate
    assert standard_error([0.5], 0.3) == 0.0


def test_standard_errors_have_a_floor_from_the_items_scored():
    # Folds that agree exactly (two sets whose models make the same mistakes) measured on 240
    # items are not known to 1e-17: the binomial error of 240 items is the floor.
    same = [0.9, 0.9, 0.9, 0.9 + 1e-16, 0.9]
    assert standard_error(same, 1 / 5) < 1e-15
    p = (0.9 * 240 + 1) / 242
    assert standard_error(same, 1 / 5, n_items=240) == pytest.approx(np.sqrt(p * (1 - p) / 240))
    assert standard_error([1.0, 1.0, 1.0], 1 / 3, n_items=240) > 0.0  # even a perfect score
    noisy = [0.5, 0.9, 0.7]
    assert standard_error(noisy, 1 / 3, n_items=240) == standard_error(noisy, 1 / 3)  # above the floor


def test_repeats_draw_different_folds_and_need_an_integer_cv(digits):
    _, y, _ = digits
    once, twice = make_splits(3, y, random_state=1), make_splits(3, y, random_state=1, repeats=2)
    assert len(twice) == 6 and not all(np.array_equal(a[1], b[1]) for a, b in zip(twice[:3], twice[3:]))
    assert make_splits(3, y, random_state=1, repeats=2)[0][1].tolist() == twice[0][1].tolist()
    assert len(once) == 3
    with pytest.raises(ValueError, match="repeats"):
        make_splits(3, y, repeats=0)


def test_learner_lists_are_named_and_checked():
    named = as_learners([LogisticRegression(), LogisticRegression(), ("nb", GaussianNB())])
    assert [n for n, _ in named] == ["LogisticRegression", "LogisticRegression-1", "nb"]
    assert [n for n, _ in as_learners(None)] == ["lda", "logreg"]
    with pytest.raises(TypeError, match="not a scikit-learn classifier"):
        as_learners(["not a model"])
    with pytest.raises(ValueError, match="empty"):
        as_learners([])


def test_finalists_are_rescored_on_more_folds_before_the_sweep(digits):
    import polydom

    X, y, _ = digits
    columns = {f"q{i}": slice(16 * i, 16 * (i + 1)) for i in range(4)}
    splits = make_splits(3, y, random_state=0, repeats=3)
    learner = FeatureSetLearner(X, y, columns, GaussianNB(), splits[:3], rescore_splits=splits[3:])
    costs = {name: [1.0 + i] for i, name in enumerate(columns)}
    index = polydom.build(costs, learner, e=0.0)
    servable = [index.space.frozenset(m) for m in index.candidates if m]
    assert servable and index.stats["rescored"] >= len(servable)
    for s in servable:
        folds = learner.fold_scores[s]
        assert len(folds) == 9  # 3 folds, then 6 more for the finalist
        assert index.trained[index.space.mask(s)] == pytest.approx(folds.mean())
        assert index.std_error[index.space.mask(s)] == pytest.approx(standard_error(folds, 1 / 3, len(y)))
    # Sets that never reached the skyline keep their first score.
    others = [s for s in learner.cache if s and s not in learner.rescored]
    assert others and all(len(learner.fold_scores[s]) == 3 for s in others)


def test_finalists_are_rescored_on_the_finishing_workers_with_the_same_scores(digits):
    import polydom

    X, y, _ = digits
    columns = {f"q{i}": slice(16 * i, 16 * (i + 1)) for i in range(4)}
    splits = make_splits(3, y, random_state=0, repeats=3)
    learners = [FeatureSetLearner(X, y, columns, GaussianNB(), splits[:3], rescore_splits=splits[3:], finish_jobs=jobs)
                for jobs in (None, 2)]
    costs = {name: [1.0 + i] for i, name in enumerate(columns)}
    serial, parallel = (polydom.build(costs, learner, e=0.0) for learner in learners)
    assert serial.stats["rescored"] == parallel.stats["rescored"] > 0
    assert serial.trained == parallel.trained and serial.std_error == parallel.std_error
    assert {s: f.tolist() for s, f in learners[0].fold_scores.items()} == {
        s: f.tolist() for s, f in learners[1].fold_scores.items()}


def test_sets_finished_on_workers_match_a_serial_finish_and_their_warnings_are_counted(digits):
    """A worker gets one job per set (its columns and folds, not the learner): the scores, the
    models and the warnings counted are a serial finish's."""
    X, y, _ = digits
    columns = {f"q{i}": slice(16 * i, 16 * (i + 1)) for i in range(4)}
    splits = make_splits(3, y, random_state=0)
    sets = [frozenset({"q0"}), frozenset({"q1", "q2"}), frozenset(columns)]
    learners = [FeatureSetLearner(X, y, columns, LogisticRegression(max_iter=2), splits,
                                  screen_splits=make_splits(2, y, random_state=1), finish_jobs=jobs)
                for jobs in (None, 2)]
    results = [learner.finish(sets) for learner in learners]
    for s, a, b in zip(sets, *results):
        assert (a.accuracy, a.std_error) == (b.accuracy, b.std_error)
        Xs = X[:, learners[0].columns_of(s)]
        np.testing.assert_array_equal(a.model.predict_proba(Xs), b.model.predict_proba(Xs))
    assert learners[0].fold_scores.keys() == learners[1].fold_scores.keys()
    counted = [learner.warnings.items() for learner in learners]
    assert counted[0] == counted[1]
    assert any("ConvergenceWarning" in category for category, _, _ in counted[0])


def test_a_learner_that_keeps_losing_retires(digits):
    X, y, _ = digits
    columns = {f"c{i}": slice(8 * i, 8 * (i + 1)) for i in range(8)}
    learner = FeatureSetLearner(X, y, columns, [("lda", LogisticRegression(max_iter=300)),
                                                ("chance", DummyClassifier(strategy="uniform", random_state=0))],
                                make_splits(2, y, random_state=0))
    sets = [frozenset({f"c{i}", f"c{(i + 1) % 8}"}) for i in range(8)] + [frozenset({f"c{i}"}) for i in range(8)]
    learner.many(sets[:12])
    assert learner.race["retired"] == ["chance"] and learner.race["contested"] == 12
    started = learner.race["started"]
    learner.many(sets[12:])
    assert learner.race["started"] == started  # the rest were not contested: one learner left
    assert all(learner.chosen[s] == "lda" for s in sets)
    assert learner.oof_proba(sets[0])[0].shape == (len(y), 10)


def test_sets_trained_in_workers_are_remembered_here(digits):
    import polydom

    X, y, _ = digits
    columns = {f"q{i}": slice(16 * i, 16 * (i + 1)) for i in range(4)}
    splits = make_splits(3, y, random_state=0, repeats=2)
    learner = FeatureSetLearner(X, y, columns, [("nb", GaussianNB()), ("chance", DummyClassifier(strategy="uniform",
                                random_state=0))], splits[:3], rescore_splits=splits[3:])
    index = polydom.build({n: [1.0 + i] for i, n in enumerate(columns)}, learner, e=0.0, n_jobs=2)
    # Every set was trained in a worker (even one asked for alone: the engine streams, so the
    # building process never trains) and remembered here, none trained again for rescoring.
    assert learner.fits == 0
    for mask in index.trained:
        s = index.space.frozenset(mask)
        assert learner.chosen[s] in ("nb", "prior") and s in learner.cache
    servable = [index.space.frozenset(m) for m in index.candidates if m]
    assert all(len(learner.fold_scores[s]) == 6 for s in servable)  # rescored without retraining
    assert learner.race["wins"].get("nb", 0) == learner.race["contested"] > 0


def test_a_pickled_learner_carries_the_race_but_not_the_results(digits):
    import pickle

    X, y, columns = digits
    learner = FeatureSetLearner(X, y, columns, GaussianNB(), make_splits(2, y, random_state=0))
    empty = len(pickle.dumps(learner))
    learner.many([{"top"}, {"bottom"}, {"top", "bottom"}])
    learner.race["retired"].append("x")
    copy = pickle.loads(pickle.dumps(learner))
    assert copy.cache == {} and copy.fold_scores == {} and copy.race["retired"] == ["x"]
    assert len(pickle.dumps(learner)) < empty + 100  # the trained models stay here
    assert copy(frozenset({"top"})).accuracy == learner(frozenset({"top"})).accuracy


class _PoolWatcher(ClassifierMixin, BaseEstimator):
    """Predicts the first class; records the threads of every BLAS and OpenMP pool while it fits,
    in ``seen`` (this process's fits) and in ``pools_`` (a fit that ran on a worker)."""

    seen: list = []

    def fit(self, X, y):
        self.pools_ = _pool_threads()
        type(self).seen.append(self.pools_)
        self.classes_ = np.unique(y)
        return self

    def predict(self, X):
        return np.full(len(X), self.classes_[0])


def _pool_threads() -> dict:
    from threadpoolctl import threadpool_info

    return {pool["filepath"]: pool["num_threads"] for pool in threadpool_info()}


@pytest.fixture()
def pools_as_found():
    """The process's pools as a user's process has them (the libraries' own: one thread per
    core); skipped where none takes more than one thread (a 1-core machine)."""
    pools = _pool_threads()
    if not any(n > 1 for n in pools.values()):
        pytest.skip("no BLAS or OpenMP pool here takes more than one thread")
    return pools


@pytest.mark.parametrize("library_threads", [1, None])
def test_fits_run_with_one_thread_per_pool_and_the_pools_are_restored(digits, monkeypatch, pools_as_found,
                                                                      library_threads):
    monkeypatch.setattr(FeatureSetLearner, "LIBRARY_THREADS", library_threads)
    monkeypatch.setattr(_PoolWatcher, "seen", [])
    X, y, columns = digits
    learner = FeatureSetLearner(X, y, columns, _PoolWatcher(), make_splits(3, y, random_state=0))
    learner.many([{"top"}, {"top", "bottom"}])
    learner.oof_proba({"bottom"})  # the cascades' fold models
    assert len(_PoolWatcher.seen) >= 2 * 4
    expected = {path: 1 for path in pools_as_found} if library_threads == 1 else pools_as_found
    assert all(seen == expected for seen in _PoolWatcher.seen)
    assert _pool_threads() == pools_as_found


def test_fits_on_an_engines_threads_leave_the_pools_as_they_are(digits, monkeypatch, pools_as_found):
    """Only a process's main thread limits the pools: batches running at once on a threading
    engine's threads would otherwise save and restore each other's limits."""
    import threading

    X, y, columns = digits
    learner = FeatureSetLearner(X, y, columns, _PoolWatcher(), make_splits(3, y, random_state=0))
    monkeypatch.setattr(_PoolWatcher, "seen", [])
    errors = []

    def batch(features):
        try:
            learner.many([features])
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=batch, args=({name},)) for name in columns]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and not any(t.is_alive() for t in threads)
    assert len(_PoolWatcher.seen) == 2 * 4 and all(seen == pools_as_found for seen in _PoolWatcher.seen)
    assert _pool_threads() == pools_as_found


@pytest.fixture()
def shipped_by_value():
    """This module's classes travel to loky's workers by value: a worker cannot import the tests."""
    import sys

    cloudpickle = pytest.importorskip("cloudpickle")  # what loky pickles tasks with (a joblib requirement)
    module = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(module)
    yield
    cloudpickle.unregister_pickle_by_value(module)


@pytest.mark.parametrize("library_threads", [1, None])
def test_workers_fit_with_their_pools_held_as_this_process_holds_its_own(digits, monkeypatch, shipped_by_value,
                                                                         library_threads):
    from joblib import parallel_config

    monkeypatch.setattr(FeatureSetLearner, "LIBRARY_THREADS", library_threads)
    X, y, _ = digits
    columns = {f"q{i}": slice(16 * i, 16 * (i + 1)) for i in range(4)}
    learner = FeatureSetLearner(X, y, columns, _PoolWatcher(), make_splits(3, y, random_state=0),
                                screen_splits=make_splits(2, y, random_state=1), finish_jobs=2)
    with parallel_config(backend="loky", inner_max_num_threads=2):  # the workers' pools at two threads
        models = [result.model for result in learner.finish([{"q0"}, {"q1", "q2"}])]
    threads = {n for model in models for n in model.pools_.values()}
    assert threads == ({1} if library_threads == 1 else {2})
