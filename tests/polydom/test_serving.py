"""The serving planner: one plan per trained set, only the chosen features computed, and plans
dropped when a loaded index is refreshed to a new version."""

import itertools

import numpy as np
import pytest
from sklearn.dummy import DummyClassifier

import polydom
from polydom.featurizers import REGISTRY, Feature
from polydom.featurizers.datasets import load_digits_images
from polydom.index.serving.anytime import chain_prefixes
from polydom.serving.planner import ServingPlanner


def _constant(label):
    return DummyClassifier(strategy="constant", constant=label).fit(np.zeros((2, 1)), [label, label + 1])


@pytest.fixture()
def index():
    costs = {"fast": [1e-4], "slow": [0.0, 0.0, 1e-8]}
    scores = {frozenset(): 0.5, frozenset({"fast"}): 0.6, frozenset({"slow"}): 0.7, frozenset({"fast", "slow"}): 0.8}
    return polydom.build(costs, lambda fs: polydom.Expansion(scores[frozenset(fs)], _constant(len(fs))), e=0.0)


@pytest.fixture()
def features():
    thumbnail = REGISTRY["thumbnail"]
    return {"fast": Feature("fast", REGISTRY["intensity_hist"].function, dimension=16),
            "slow": Feature("slow", thumbnail.function, dimension=thumbnail.dimension)}


def test_a_plan_per_set_with_the_lookup_cost(index, features):
    planner = ServingPlanner(index, features)
    for size, budget in [(64.0, 0.0), (256.0, 2e-4), (1024.0, 1.0)]:
        choice = index.lookup(size, budget)
        plan = planner.plan(choice.key)
        assert plan is planner.plan(choice.key)  # prepared once
        assert set(plan.names) == set(choice.features) and index.cost_of(plan.names, size) == choice.cost
        assert plan.predictor.predict_one(np.zeros(0)) == len(choice.features)


def test_serve_computes_only_the_chosen_features(index, features):
    image = load_digits_images(sides=(16,), n_per_class=1)[0][0]
    served = ServingPlanner(index, features).serve(image, 0, budget=0.0)
    assert served.plan.names == () and served.x.shape == (0,) and served.measured == 0.0
    served = ServingPlanner(index, features).serve(image, 0, budget=10.0)
    assert served.plan.names == ("fast", "slow") and served.x.shape == (16 + 64,) and served.measured > 0


def test_features_must_cover_the_index(index, features):
    with pytest.raises(ValueError, match=r"no Feature objects for the index's features \['slow'\]"):
        ServingPlanner(index, {"fast": features["fast"]})


def test_a_refreshed_index_gets_fresh_plans(index, features, tmp_path):
    index.save(tmp_path / "idx")
    loaded = polydom.load(tmp_path / "idx")
    planner = ServingPlanner(loaded, features)
    old = planner.plan(loaded.lookup(256.0, 1.0).key)
    index.save(tmp_path / "idx")  # a new version of the same sets
    assert loaded.refresh()
    new = planner.plan(loaded.lookup(256.0, 1.0).key)
    assert new is not old and new.model is not old.model


def test_serving_learns_guards_only_where_the_index_has_them(index, features):
    assert ServingPlanner(index, features).serving_guards is None  # built without guards
    index.params = {**index.params, "cost_guard": [1.2, 1.1], "cost_guard_quantile": 0.9}
    planner = ServingPlanner(index, features)
    assert planner.serving_guards.quantile == 0.9 and planner.serving_guards.guards(64.0) == (1.2, 1.1)
    image = load_digits_images(sides=(16,), n_per_class=1, random_state=0)[0][0]
    for i in range(60):  # every served feature's time joins the record
        planner.serve(image, i, 1.0)
    planner.serving_guards.check()
    assert sum(planner.serving_guards.seen(256.0)) >= 60 and planner.serving_guards.seen(1e6) == (0, 0)
    index.params = {**index.params, "cost_guard_quantile": None}  # fitted with cost_guard=None
    assert ServingPlanner(index, features).serving_guards is None


def test_a_feature_tried_past_its_guard_is_abandoned_at_the_deadline_and_errors_still_surface():
    import threading
    import time

    from polydom.featurizers import Feature, FeatureError
    from polydom.index.serving.anytime import FeatureTimeout
    from polydom.serving.planner import _by_deadline

    release = threading.Event()
    image = np.zeros((8, 8))
    stuck = Feature("stuck", lambda im: (release.wait(5.0), np.ones(2))[1])
    quick = Feature("quick", lambda im: np.full(3, 7.0))
    broken = Feature("broken", lambda im: 1 / 0)
    start = time.perf_counter()
    with pytest.raises(FeatureTimeout, match="stuck"):
        _by_deadline(stuck, image, 0, start + 0.05)
    assert time.perf_counter() - start < 2.0  # answered near the deadline, not when the feature ended
    # While the abandoned computation still runs, the next try is given up at once, not started
    # beside it (it would slow every request behind it).
    tried = time.perf_counter()
    with pytest.raises(FeatureTimeout, match="quick"):
        _by_deadline(quick, image, 0, tried + 5.0)
    assert time.perf_counter() - tried < 1.0
    release.set()
    workers, waited = polydom.serving.planner._WORKERS, time.perf_counter()
    while workers.running_abandoned and time.perf_counter() - waited < 5.0:
        time.sleep(0.01)
    assert workers.running_abandoned == 0  # the abandoned computation ended and was counted out
    np.testing.assert_array_equal(_by_deadline(quick, image, 0, time.perf_counter() + 5.0), np.full(3, 7.0))
    with pytest.raises(FeatureError, match="broken"):
        _by_deadline(broken, image, 0, time.perf_counter() + 5.0)


def test_a_server_with_a_late_share_budget_prices_lateness_and_saves_it(tmp_path, fast_params):
    """Serving(late_share=s) gives a server a price of lateness that its answers move; the
    classifier's own predict has none; the setting is checked, saved and loaded."""
    from polydom.featurizers.datasets import load_digits_images

    with pytest.raises(ValueError, match="late_share"):
        polydom.CostSensitiveClassifier(serving=polydom.Serving(late_share=0.9))._check_params()
    images, labels, _ = load_digits_images(sides=(16, 24), n_per_class=4, random_state=0)
    clf = polydom.CostSensitiveClassifier(features=["thumbnail", "intensity_hist"],
                                          serving=polydom.Serving(late_share=0.02), **fast_params)
    clf.fit(images, labels)
    assert clf.index_.params["start_cap"] is False and clf.index_.params["cost_law"]
    assert clf.planner_.late_price is None  # predicting changes nothing
    server = clf.server()
    price = server.planner.late_price
    assert price is not None and price.share == 0.02
    server.predict(images[:6], budget=0.0)  # nothing is computed, so nothing is late: the price stays 0
    assert all(late == 0.0 for _, late in price.late_shares().values())
    assert price.price(256.0, 0.0) == 0.0
    server.predict(images[:6], budget=1.0)
    answered = sum(n for n, _ in price.late_shares().values())
    assert answered == 12
    price.check()
    clf.save(tmp_path / "index")
    loaded = polydom.CostSensitiveClassifier.load(tmp_path / "index")
    assert loaded.get_params()["serving__late_share"] == 0.02
    assert loaded.server().planner.late_price.share == 0.02


def test_an_index_saved_with_a_cap_keeps_it_and_the_default_has_none(fast_params):
    from polydom.featurizers.datasets import load_digits_images

    images, labels, _ = load_digits_images(sides=(16,), n_per_class=4, random_state=0)
    plain = polydom.CostSensitiveClassifier(features=["thumbnail"], **fast_params).fit(images, labels)
    capped = polydom.CostSensitiveClassifier(features=["thumbnail"], serving=polydom.Serving(guard=0.9),
                                             **fast_params).fit(images, labels)
    assert plain.index_.start_cap is False and capped.index_.start_cap is True
    # The laws come from the same serving-like calls in both; the cap only changes the walk.
    assert len(plain.index_.cost_laws(256.0)[0]) == 41


def test_a_server_prepares_every_set_it_can_answer_with_before_its_first_request(tmp_path, fast_params):
    """A loaded classifier's server reads and rebuilds the models of every candidate and chain
    prefix when it is made; requests at any size and budget then prepare nothing more."""
    images, labels, _ = load_digits_images(sides=(16, 24, 32), n_per_class=6, random_state=0)
    clf = polydom.CostSensitiveClassifier(features=["thumbnail", "intensity_hist", "edge_density"], **fast_params)
    clf.fit(images, labels)
    clf.save(tmp_path / "index")
    loaded = polydom.CostSensitiveClassifier.load(tmp_path / "index")
    lazy = loaded.index_.models
    assert set(lazy._cache) <= {0}  # loading reads no model but the empty set's
    server = loaded.server()
    index = server.planner.index
    _, plans = server.planner._cache
    expected = set(index.candidates) | {p for order in index.chains.values() for p in chain_prefixes(order)}
    assert index.chains and set(plans) == expected & set(index.models)
    prepared = dict(plans)
    for budget in (0.0, 1e-4, 1e-3, 1e-2, 1.0):
        for i, image in enumerate(images[::5]):
            served = server.planner.serve(image, i, budget)
            assert served.plan is prepared[served.choice.key]
    assert server.planner._cache[1] == prepared  # no request prepared a plan


def test_servable_sets_cover_the_walk_of_candidates_that_new_costs_left_without_a_chain():
    """New cost curves keep the chains but move the skyline: a candidate without a chain is walked
    in feature order (a cascade may answer with those prefixes), so they are prepared too."""
    from polydom.lattice import bits_of

    names = ["a", "b", "c", "d"]
    rng = np.random.default_rng(0)
    scores = {frozenset(s): 0.3 + 0.1 * len(s) + 0.05 * rng.random()
              for k in range(5) for s in itertools.combinations(names, k)}
    index = polydom.build({n: [1e-3 * (i + 1)] for i, n in enumerate(names)},
                          lambda fs: polydom.Expansion(scores[frozenset(fs)], _constant(len(fs))), e="auto")
    assert index.chains
    checked = 0
    for perm in itertools.permutations(range(4)):
        other = index.with_costs({n: [1e-3 * (perm[i] + 1) ** 3] for i, n in enumerate(names)})
        servable = {m for m in other.answer_sets() if m in other.models}
        for m in other.candidates:
            assert m in servable
            order = other.chains.get(m) or bits_of(m)
            assert {p for p in chain_prefixes(order) if p in other.models} <= servable
            checked += m not in other.chains
    assert checked  # some permutation left a candidate without a chain


def test_a_model_that_cannot_serve_fails_when_the_server_is_made_with_a_polydom_error(features):
    """A model that passed its stored checks but cannot serve (here: never fitted) is refused by
    name when the plans are prepared, not at a request, and as a PolydomError."""
    from polydom.index.storage.errors import ModelLoadError

    unfitted = DummyClassifier(strategy="most_frequent")
    models = {frozenset(): _constant(0), frozenset({"fast"}): _constant(1), frozenset({"slow"}): _constant(1),
              frozenset({"fast", "slow"}): unfitted}
    index = polydom.build({"fast": [1e-4], "slow": [0.0, 0.0, 1e-8]},
                          lambda fs: polydom.Expansion(0.5 + 0.1 * len(fs), models[frozenset(fs)]), e=0.0)
    planner = ServingPlanner(index, features)
    with pytest.raises(ModelLoadError, match=r"\['fast', 'slow'\] cannot serve") as caught:
        planner.prepare_plans()
    assert isinstance(caught.value, polydom.PolydomError)
