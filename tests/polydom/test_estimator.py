"""CostSensitiveClassifier on real (small) images: the scikit-learn contract, computing only the
chosen features, save/load round trips, recost without training, and the Greedy anytime path."""

import inspect

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression

import polydom
from polydom.index.costs.fitting import evaluate_cost_curve
from polydom.lattice import audit_monotonicity, monotone_scores
from polydom.featurizers import REGISTRY, Feature
from polydom.featurizers.datasets import load_digits_images

SIDES = (16, 24)
NAMES = ["intensity_hist", "thumbnail", "edge_density"]


@pytest.fixture(scope="module")
def digits():
    images, labels, _ = load_digits_images(sides=SIDES, n_per_class=5, random_state=0)
    groups = np.arange(len(images)) // len(SIDES)
    return images, labels, groups


@pytest.fixture(scope="module")
def fitted(digits, fast_params):
    images, labels, groups = digits
    # Tests here compare real-clock predictions of different objects (a fitted and a loaded
    # classifier): a classifier's predictions learn nothing, so they answer alike.
    return polydom.CostSensitiveClassifier(features=NAMES, **fast_params).fit(images, labels, groups=groups)


class Counter:
    """Wraps a feature function and counts its calls (picklable, module-level)."""

    def __init__(self, function):
        self.function = function
        self.calls = 0
        self.on_call = None  # a hook an injected-clock test advances its clock with

    def __call__(self, image):
        self.calls += 1
        if self.on_call is not None:
            self.on_call()
        return self.function(image)

    def __getstate__(self):
        return {**self.__dict__, "on_call": None}


def counting_features(names):
    return [Feature(f"counted_{n}", Counter(REGISTRY[n].function), dimension=REGISTRY[n].dimension) for n in names]


class CountingLogisticRegression(LogisticRegression):
    """A learner that counts how often it is trained."""

    fits = 0

    def fit(self, X, y, sample_weight=None):
        type(self).fits += 1
        return super().fit(X, y, sample_weight=sample_weight)


# ------------------------------------------------------------------------------ the contract


def test_init_stores_parameters_verbatim_and_clone_round_trips():
    features = ["thumbnail", "hog"]
    est = LogisticRegression(C=0.5)
    clf = polydom.CostSensitiveClassifier(features, est, budget=0.01, cv=3, selection=polydom.Selection(alpha=1.2),
                                          timing=polydom.Timing(quantile="max"))
    assert clf.features is features and clf.learners is est
    params = clf.get_params(deep=False)
    assert set(params) == set(inspect.signature(polydom.CostSensitiveClassifier).parameters)
    assert len(params) <= 12
    twin = clone(clf)
    assert twin.get_params(deep=False).keys() == params.keys()
    assert twin.features == features and twin.budget == 0.01 and twin.timing.quantile == "max"
    assert twin.learners is not est and twin.learners.get_params() == est.get_params()
    assert twin.selection is not clf.selection and twin.selection.alpha == 1.2
    assert clf.set_params(selection__alpha=1.5, learners__C=2.0) is clf
    assert clf.selection.alpha == 1.5 and clf.learners.C == 2.0
    assert not any(k.endswith("_") for k in vars(polydom.CostSensitiveClassifier()))


@pytest.mark.parametrize("method", ["predict", "explain", "score", "save", "recost"])
def test_not_fitted_error_before_fit(method, digits, tmp_path):
    images, labels, _ = digits
    clf = polydom.CostSensitiveClassifier()
    args = {"predict": (images[:2],), "explain": (images[:2],), "score": (images[:2], labels[:2]),
            "save": (str(tmp_path / "idx"),), "recost": (images[:2],)}[method]
    with pytest.raises(NotFittedError):
        getattr(clf, method)(*args)


def test_fitted_attributes_end_in_underscore(fitted):
    params = set(fitted.get_params(deep=False))
    public = {k for k in vars(fitted) if not k.startswith("_")}
    assert public - params == {k for k in public - params if k.endswith("_")}
    for attr in ("index_", "classes_", "feature_names_", "feature_columns_", "cost_fits_", "cost_curves_",
                 "n0_", "fit_stats_"):
        assert hasattr(fitted, attr)
    assert fitted.feature_names_ == tuple(NAMES)
    assert list(fitted.classes_) == list(range(10))


def test_deterministic_with_random_state(digits, fitted, fast_params):
    images, labels, groups = digits
    again = polydom.CostSensitiveClassifier(features=NAMES, **fast_params).fit(images, labels, groups=groups)
    # Scores depend on the seed only. Costs are measured times, and they decide which sets get
    # prefix chains and a second opinion, so compare what does not depend on them: the lattice
    # exploration, and the measured score of every set both fits trained on the same folds.
    assert again.index_.exploration.accuracy == fitted.index_.exploration.accuracy
    first_only = {m: a for m, a in fitted.index_.measured.items() if m in again.index_.measured}
    same = [m for m in first_only if again.index_.std_error.get(m) == fitted.index_.std_error.get(m)]
    assert same and all(again.index_.measured[m] == fitted.index_.measured[m] for m in same)


def test_the_index_ranks_sets_by_the_bounded_monotone_fit_of_their_measured_scores(fitted):
    index = fitted.index_
    assert index.params["scores"] == "bounded" and set(index.measured) == set(index.explored)
    # The measured scores were not monotone (real learners are not), so the fit moved some ...
    assert audit_monotonicity(index.measured_scores).max_violation > 0 and index.stats["scores_moved"] > 0
    # ... each within one standard error of its measurement.
    fit = monotone_scores(index.measured, index.std_error)
    for m, score in index.explored.items():
        se = index.std_error[m]
        assert score == pytest.approx(min(max(fit[m], index.measured[m] - se), index.measured[m] + se), abs=1e-12)
    # Re-ranked without training: the monotone fit itself.
    monotone = index.with_scores("monotone")
    assert audit_monotonicity(monotone.explored).max_violation == 0.0
    assert monotone.explored == pytest.approx(fit, abs=1e-9) and monotone.measured == index.measured
    # The served set carries the fitted score; its measured one stays beside it.
    choice = index.lookup(float(28 * 28), 1.0)
    mask = index.space.mask(choice.features)
    assert choice.accuracy == index.explored[mask] and index.measured_scores[mask] == index.measured[mask]


def test_cost_curves_are_nonnegative_monotone_and_track_the_median(fitted):
    for name, fit in fitted.cost_fits_.items():
        assert all(c >= 0 for c in fit.curve.coefficients), name
        sizes, targets = fit.targets()
        assert fit.quantile == 0.5
        # The timing pass's median is followed, not covered: near it everywhere, above and below
        # it in places; the calibration then only adds a non-negative, non-decreasing overhead.
        timing = evaluate_cost_curve(fit.timing_curve.coefficients, sizes)
        assert np.all(np.abs(timing / targets - 1) < 1.0), name
        assert fit.guard_ratio >= 1.0 and all(c >= 0 for c in fit.overhead), name
        assert np.all(fit.curve_values(sizes) >= timing), name
        grid = np.linspace(0, 2 * sizes.max(), 50)
        assert np.all(np.diff(fit.curve_values(grid)) >= 0), name
        assert isinstance(fit.expression(), str) and fit.sympy() is not None


# ------------------------------------------------------------------- serving computes only what it chose


@pytest.mark.parametrize("backend", ["polydom", "greedy-cost"])
def test_predict_computes_only_the_chosen_features(digits, backend, fast_params):
    images, labels, groups = digits
    features = counting_features(["intensity_hist", "thumbnail", "hog"])
    clf = polydom.CostSensitiveClassifier(features=features, selection=polydom.Selection(backend=backend), **fast_params)
    clf.fit(images, labels, groups=groups)
    counters = {f.name: f.function for f in features}
    for budget in (0.0, 0.0004, 0.002, None):
        for image in images[:12]:
            for c in counters.values():
                c.calls = 0
            (e,) = clf.explain([image], budget=budget)
            # Every feature computed is listed; the set served is among them (a feature that ran
            # slow on a loaded machine may be computed and not served).
            assert {n for n, c in counters.items() if c.calls} == set(e.computed) >= set(e.features)
            assert all(c.calls <= 1 for c in counters.values())
            if budget == 0.0:
                assert e.features == () and e.measured_cost == 0.0
    if backend == "polydom":
        # predict chooses as explain does, so the counts must agree. The walk reads the real
        # clock, so the budget is one no feature's timing can bring into question.
        chosen = [set(e.features) for e in clf.explain(images[:20], budget=1.0)]
        for c in counters.values():
            c.calls = 0
        clf.predict(images[:20], budget=1.0)
        for name, c in counters.items():
            assert c.calls == sum(name in s for s in chosen)


def test_explain_reports_costs_and_labels(fitted, digits):
    images, labels, _ = digits
    records = fitted.explain(images[:6], budget=0.01)
    assert [r.item for r in records] == list(range(6))
    predictions = fitted.predict(images[:6], budget=0.01)
    for r, p in zip(records, predictions):
        assert r.label == p and r.budget == 0.01 and r.size in (16 * 16, 24 * 24)
        assert r.predicted_cost <= r.budget and r.measured_cost >= 0
        assert set(r.features) <= set(NAMES) and 0 <= r.estimated_accuracy <= 1
        assert r.within_budget == (r.measured_cost <= r.budget)
        # The score's standard error over the folds comes with it (every trained set has one).
        assert r.std_error == fitted.index_.std_error[fitted.index_.space.mask(r.features)] and r.std_error >= 0


def test_budget_trades_accuracy_for_time(fitted, digits):
    images, labels, _ = digits
    prior = fitted.predict(images, budget=0.0)
    assert len(set(prior.tolist())) == 1  # {} is the majority-class model
    assert fitted.score(images, labels, budget=0.0) == pytest.approx(np.mean(labels == prior[0]))
    assert fitted.score(images, labels) > fitted.score(images, labels, budget=0.0)
    per_item = fitted.predict(images[:4], budget=[0.0, 1.0, 0.0, 1.0])
    assert per_item[0] == per_item[2] == prior[0]


def test_predict_proba_follows_the_learner(digits, fast_params):
    images, labels, groups = digits
    from sklearn.linear_model import SGDClassifier

    assert hasattr(polydom.CostSensitiveClassifier(), "predict_proba")  # the default learners have it
    assert not hasattr(polydom.CostSensitiveClassifier(learners=SGDClassifier()), "predict_proba")  # hinge loss
    assert not hasattr(polydom.CostSensitiveClassifier(learners=[LogisticRegression(), SGDClassifier()]),
                       "predict_proba")
    clf = polydom.CostSensitiveClassifier(features=["thumbnail"], learners=LogisticRegression(max_iter=500),
                                          **fast_params)
    clf.fit(images, labels, groups=groups)
    proba = clf.predict_proba(images[:5], budget=1.0)
    assert proba.shape == (5, 10)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(clf.classes_[proba.argmax(axis=1)], clf.predict(images[:5], budget=1.0))


# --------------------------------------------------------------------------- storage and recost


def test_save_load_round_trip_gives_identical_predictions(fitted, digits, tmp_path):
    images, labels, _ = digits
    path = tmp_path / "clf"
    fitted.save(path)
    loaded = polydom.CostSensitiveClassifier.load(path)
    assert loaded.get_params() == {**fitted.get_params()}
    assert loaded.feature_names_ == fitted.feature_names_
    np.testing.assert_array_equal(loaded.classes_, fitted.classes_)
    for budget in (0.0, 0.0003, 0.001, 0.005, None):
        np.testing.assert_array_equal(loaded.predict(images, budget=budget), fitted.predict(images, budget=budget))
    for name, fit in fitted.cost_fits_.items():
        assert loaded.cost_curves_[name] == fit.curve
    bare = polydom.load(path)  # the same directory is a plain index too
    assert bare.lookup(256, 0.001) == fitted.index_.lookup(256, 0.001)
    # A classifier's own planner learns nothing, fitted or loaded; a server learns at the fit's
    # quantile, from a loaded classifier too.
    assert fitted.planner_.serving_guards is None and loaded.planner_.serving_guards is None
    assert fitted.index_.params["cost_guard"]  # the fit's guards stand
    server = loaded.server()
    assert server.planner.serving_guards.quantile == 0.9  # the default guard quantile (no cap by default)
    np.testing.assert_array_equal(server.predict(images, budget=None), fitted.predict(images, budget=None))
    quiet = clone(fitted).set_params(serving=polydom.Serving(learn_guards=False)).fit(images, labels, groups=digits[2])
    assert quiet.server().planner.serving_guards is None


def test_predict_leaves_the_parameters_and_every_fitted_attribute_unchanged(fitted, digits):
    images, _, _ = digits
    import copy

    params = copy.deepcopy(fitted.get_params(deep=True))
    names = [k for k in dir(fitted) if k.endswith("_") and not k.startswith("_") and k not in ("path_", "version_")]
    def snapshot(value):
        if isinstance(value, np.ndarray):
            return value.copy()
        if hasattr(value, "items"):  # read-only mappings of cost fits, curves, columns
            return {k: v.to_json() if hasattr(v, "to_json") else copy.deepcopy(v) for k, v in value.items()}
        return copy.deepcopy(value)

    before = {k: snapshot(getattr(fitted, k)) for k in names if k not in ("index_", "planner_")}
    planner, index, guards = fitted.planner_, fitted.index_, fitted.planner_.serving_guards
    for budget in (0.0, 0.0003, 0.002, None):
        fitted.predict(images, budget=budget)
        fitted.predict_proba(images[:5], budget=budget)
        fitted.explain(images[:5], budget=budget)
    assert fitted.get_params(deep=True) == params
    for k, value in before.items():
        after = snapshot(getattr(fitted, k))
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(after, value)
        else:
            assert after == value, k
    assert fitted.planner_ is planner and fitted.index_ is index and fitted.planner_.serving_guards is guards is None


def test_save_and_load_remember_the_path_and_version(fitted, tmp_path):
    first = fitted.save(tmp_path / "clf")
    assert (fitted.path_, fitted.version_) == (str(tmp_path / "clf"), first)
    loaded = polydom.CostSensitiveClassifier.load(tmp_path / "clf")
    assert (loaded.path_, loaded.version_) == (str(tmp_path / "clf"), first)
    second = loaded.save(loaded.path_)
    assert second != first and polydom.CostSensitiveClassifier.load(loaded.path_).version_ == second


def test_load_refuses_an_index_the_classifier_did_not_save(tmp_path):
    index = polydom.build({"a": [1.0]}, lambda fs: 0.5 + 0.1 * len(fs))
    index.save(tmp_path / "plain")
    with pytest.raises(ValueError, match="not saved by CostSensitiveClassifier"):
        polydom.CostSensitiveClassifier.load(tmp_path / "plain")


@pytest.mark.parametrize("backend", ["polydom", "greedy"])
def test_recost_trains_nothing(digits, backend, tmp_path, fast_params):
    images, labels, groups = digits
    clf = polydom.CostSensitiveClassifier(features=NAMES, learners=CountingLogisticRegression(max_iter=300),
                                          selection=polydom.Selection(backend=backend),
                                          **fast_params).fit(images, labels, groups=groups)
    trained = CountingLogisticRegression.fits
    assert trained > 0
    explored = dict(getattr(clf.index_, "explored", None) or clf.index_.accuracy)
    before = clf.predict(images, budget=None)
    clf.recost(images[:3], sides=(8, 16, 24, 32), repeats=1)
    assert CountingLogisticRegression.fits == trained
    assert clf.timing_sides_ == (8, 16, 24, 32)
    after_explored = dict(getattr(clf.index_, "explored", None) or clf.index_.accuracy)
    assert after_explored == explored
    np.testing.assert_array_equal(clf.predict(images, budget=None), before)
    # ... and after a save/load round trip, recost reads the models lazily from LMDB.
    clf.save(tmp_path / "c", trusted=[CountingLogisticRegression])
    loaded = polydom.CostSensitiveClassifier.load(tmp_path / "c", trusted=[CountingLogisticRegression])
    loaded.recost(images[:2], repeats=1)
    assert CountingLogisticRegression.fits == trained
    np.testing.assert_array_equal(loaded.predict(images, budget=None), before)


def test_greedy_backends_use_the_median_size_and_the_anytime_walk(digits, fast_params):
    images, labels, groups = digits
    clf = polydom.CostSensitiveClassifier(features=NAMES, selection=polydom.Selection(backend="greedy"), **fast_params)
    clf.fit(images, labels, groups=groups)
    assert clf.n0_ == np.median([im.size for im in images]) and clf.index_.n0 == clf.n0_
    names = clf.index_.space.names
    sequences = [[names[f] for f in seq] for seq in clf.index_.sequences]
    for e in clf.explain(images[:6], budget=0.003):
        assert any(set(seq[: len(e.features)]) == set(e.features) for seq in sequences), e
        assert e.measured_cost >= 0 and e.std_error == clf.index_.std_error[clf.index_.space.mask(e.features)]


def test_a_refit_with_a_cache_reuses_features_and_trained_sets(digits, tmp_path, fast_params):
    images, labels, groups = digits
    clf = polydom.CostSensitiveClassifier(features=NAMES, cache_dir=tmp_path / "cache", **fast_params)
    clf.fit(images, labels, groups=groups)
    first = clf.fit_stats_
    assert first["trained"] == first["expanded"] > 0
    clf.set_params(selection=polydom.Selection(alpha=1.3)).fit(images, labels, groups=groups)
    assert clf.fit_stats_["features_cached"]
    assert clf.fit_stats_["trained"] == 0 and clf.fit_stats_["reused"] == clf.fit_stats_["expanded"]
    cold = polydom.CostSensitiveClassifier(features=NAMES, cache_dir=tmp_path / "cache", **fast_params)
    cold.fit(images, labels, groups=groups)
    assert cold.fit_stats_["features_cached"] and cold.fit_stats_["trained"] == 0


@pytest.mark.parametrize("backend", ["polydom", "greedy-cost"])
def test_explain_lists_every_feature_the_walk_computed_on_an_injected_clock(digits, backend, fast_params):
    """Whatever the timing -- features that run five times slower or faster than predicted, at
    every budget -- ``explain`` lists exactly the features the walk called, and the set served is
    among them."""
    from polydom.serving.planner import ServingPlanner

    images, labels, groups = digits
    features = counting_features(["intensity_hist", "thumbnail", "hog", "edge_density"])
    clf = polydom.CostSensitiveClassifier(features=features, selection=polydom.Selection(backend=backend),
                                          **fast_params)
    clf.fit(images, labels, groups=groups)
    counters = {f.name: f.function for f in features}
    planner = ServingPlanner(clf.index_, {f.name: f for f in features}, learn=False)
    rng = np.random.default_rng(0)
    now = [0.0]
    planner.clock = lambda: now[0]
    size = images[0].shape[0] * images[0].shape[1]
    full = clf.index_.cost_of([f.name for f in features], size)
    for trial in range(40):
        slowdown = {name: float(rng.choice([0.2, 1.0, 5.0])) for name in counters}
        for name, counter in counters.items():
            counter.calls = 0
            curve = clf.cost_curves_[name]
            # Each call moves the injected clock by the feature's predicted cost times its slowdown.
            counter.on_call = (lambda c=curve, k=slowdown[name]: now.__setitem__(0, now[0] + k * c(size)))
        now[0] = 0.0
        budget = float(rng.uniform(0.05, 1.5)) * full
        (e,) = planner.explain([images[0]], [budget])
        assert {n for n, c in counters.items() if c.calls} == set(e.computed) >= set(e.features)
        assert all(c.calls <= 1 for c in counters.values())
    for counter in counters.values():
        counter.on_call = None
