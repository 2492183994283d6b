"""Confidence cascades end to end: trained on out-of-fold data, served through select."""

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

import polydom
from polydom.classifier.blackbox import FeatureSetLearner, make_splits
from polydom.classifier.cascades import train_cascades
from polydom.index.serving.anytime import chain_prefixes
from polydom.index.cascade import Cascades


@pytest.fixture(scope="module")
def built():
    X, y = load_digits(return_X_y=True)
    X, y = X[:500] / 16.0, y[:500]
    columns = {f"q{i}": slice(16 * i, 16 * (i + 1)) for i in range(4)}
    learner = FeatureSetLearner(X, y, columns, LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto"),
                                make_splits(3, y, random_state=0))
    costs = {name: [0.001 * (i + 1)] for i, name in enumerate(columns)}
    index = polydom.build(costs, learner, e=0.0)
    sizes = np.full(len(y), 64.0)
    return X, y, columns, learner, index, sizes


def _serve(index, X, columns, i, budget, **kw):
    computed = []

    def compute(name):
        computed.append(name)
        return X[i, columns[name]]

    ticks = iter(np.arange(0.0, 1.0, 1e-6))
    return index.select(64.0, budget, compute, lambda: next(ticks), **kw), computed


def _uniform(index, value):
    thresholds = {}
    for mask, order in index.chains.items():
        if len(order) >= 2:
            t = np.full((len(order), 10), value)
            t[-1] = 0.0
            thresholds[mask] = t
    return Cascades(thresholds, list(range(10)))


def test_thresholds_of_one_serve_like_plain_and_of_zero_stop_at_the_first_prefix(built):
    X, y, columns, learner, index, sizes = built
    full = index.lookup(64.0, 1.0)
    assert len(index.chains[full.key]) >= 2
    never = index.with_cascades(_uniform(index, 1.0))
    always = index.with_cascades(_uniform(index, 0.0))
    first = index.space.names[index.chains[full.key][0]]
    for i in range(0, 40, 7):
        plain, plain_computed = _serve(index, X, columns, i, 1.0)
        same, computed = _serve(never, X, columns, i, 1.0, stop_when_confident=True)
        assert same.features == plain.features and computed == plain_computed
        early, computed = _serve(always, X, columns, i, 1.0, stop_when_confident=True)
        assert computed == [first] and early.features == frozenset({first})


def test_trained_cascades_save_cost_without_reading_held_out_data(built, tmp_path):
    X, y, columns, learner, index, sizes = built
    cascades = train_cascades(index, learner, sizes, allowed_loss=0.05)
    assert cascades.thresholds
    again = train_cascades(index, learner, sizes, allowed_loss=0.05)  # deterministic
    assert all(np.array_equal(cascades.thresholds[m], again.thresholds[m]) for m in cascades.thresholds)
    served = index.with_cascades(cascades)
    counts = [len(_serve(served, X, columns, i, 1.0, stop_when_confident=True)[1]) for i in range(60)]
    plain = [len(_serve(index, X, columns, i, 1.0)[1]) for i in range(60)]
    assert np.mean(counts) < np.mean(plain)
    served.save(tmp_path / "ix")
    loaded = polydom.load(tmp_path / "ix")
    assert set(loaded.cascades.thresholds) == set(cascades.thresholds)
    for i in range(0, 60, 11):
        a = _serve(loaded, X, columns, i, 1.0, stop_when_confident=True)
        b = _serve(served, X, columns, i, 1.0, stop_when_confident=True)
        assert a[0].features == b[0].features and a[1] == b[1]
    with pytest.raises(ValueError, match="no cascade thresholds"):
        _serve(index, X, columns, 0, 1.0, stop_when_confident=True)


def test_the_classifier_explains_where_each_image_stopped_and_ignores_held_out_labels(fast_params, tmp_path):
    from polydom.featurizers.datasets import load_digits_images

    images, labels, _ = load_digits_images(sides=(16, 32), n_per_class=8, random_state=0)
    groups = np.arange(len(images)) // 2
    train = groups % 4 != 0
    held = ~train
    params = dict(fast_params, features=["intensity_hist", "thumbnail", "edge_density"],
                  cascade=polydom.Cascade(loss=0.1), selection=polydom.Selection(finalist_repeats=0))
    train_images = [im for im, t in zip(images, train) if t]

    # The cache keeps the first fit's cost fits, so the two fits differ in nothing but what they
    # are not given (timing noise alone may change which sets are servable).
    first = polydom.CostSensitiveClassifier(**params, cache_dir=tmp_path / "cache")

    def fit(held_labels):
        # Held-out labels are given nowhere to fit; shuffling them cannot move a threshold.
        assert len(held_labels) == held.sum()
        first.fit(train_images, labels[train], groups=groups[train])
        return dict(first.index_.cascades.thresholds)

    t1 = fit(labels[held])
    t2 = fit(np.random.default_rng(0).permutation(labels[held]))
    assert t1 and set(t1) == set(t2) and all(np.array_equal(t1[m], t2[m]) for m in t1)
    held_images = [im for im, h in zip(images, held) if h]
    explained = first.explain(held_images, budget=1.0)
    assert all(e.steps and e.stopped_because in ("complete", "confident") for e in explained)
    # Every feature of the set served was computed (in its chain's order, recorded in the steps).
    assert all(set(e.features) <= {n for k, n in e.steps if k == "compute"} for e in explained)
    broke = first.explain(held_images[:3], budget=1e-9)  # nothing fits: stopped by the budget
    assert all(e.features == () and e.stopped_because in ("budget", "complete") for e in broke)


def test_cascade_folds_are_ten_grouped_folds_or_as_many_as_the_groups_allow():
    from polydom.classifier.pipeline import _cascade_folds

    y = np.repeat(np.arange(3), 40)
    for per_class, expected in ((10, 10), (4, 4)):
        groups = np.arange(120) // (40 // per_class)
        folds = _cascade_folds(y, groups, 0)
        assert len(folds) == expected
        tested = np.concatenate([test for _, test in folds])
        assert sorted(tested) == list(range(120))  # every item out of fold exactly once
        for train, test in folds:
            assert not set(groups[train]) & set(groups[test])  # renderings of a picture stay together


def test_out_of_fold_probabilities_follow_the_folds_they_are_asked_for(built):
    X, y, columns, learner, index, sizes = built
    ten = make_splits(10, y, random_state=0)
    default, _ = learner.oof_proba(["q0", "q1"])
    tenfold, _ = learner.oof_proba(["q0", "q1"], ten)
    assert not np.allclose(default, tenfold)  # other folds, other models
    assert learner.oof_proba(["q0", "q1"], ten)[0] is tenfold and learner.oof_proba(["q0", "q1"])[0] is default
    cascades = train_cascades(index, learner, sizes, splits=ten)
    assert cascades.thresholds and set(cascades.thresholds) <= set(index.candidates)


def test_early_stages_decide_with_the_mean_probability_of_their_fold_models(built, tmp_path):
    X, y, columns, learner, index, sizes = built
    cascades = train_cascades(index, learner, sizes)
    early = {p for m, order in index.chains.items() if m in cascades.thresholds
             for p in chain_prefixes(order)[1:-1]}
    assert early and set(cascades.committees) == early  # LDA is softmax-linear: every early stage has one
    prefix = max(early, key=lambda p: bin(p).count("1"))
    names = index.space.frozenset(prefix)
    Xs = X[:, learner.columns_of(names)]
    folds = learner.fold_models(names)
    committee = cascades.committees[prefix]
    for row in Xs[:25]:
        expected = np.mean([m.predict_proba(row.reshape(1, -1))[0] for m in folds], axis=0)
        np.testing.assert_allclose(committee.proba(row), expected, rtol=0, atol=1e-9)
    # The committee, not the served model, decides: a threshold between their confidences
    # stops on one and not the other.
    served = index.models[prefix]
    mask = next(m for m, order in index.chains.items() if m in cascades.thresholds and prefix in chain_prefixes(order))
    stage = chain_prefixes(index.chains[mask]).index(prefix) - 1
    row = max(Xs[:200], key=lambda r: abs(served.predict_proba(r.reshape(1, -1)).max() - committee.proba(r).max()))
    sure, vote = served.predict_proba(row.reshape(1, -1)).max(), committee.proba(row).max()
    thresholds = {m: t.copy() for m, t in cascades.thresholds.items()}
    thresholds[mask][stage] = (sure + vote) / 2
    between = Cascades(thresholds, cascades.classes, cascades.committees)
    assert between.confident(mask, stage, served, row, prefix) == (vote > sure)
    assert between.confident(mask, stage, served, row) == (sure > vote)  # no prefix given: the model decides
    # Stored with the index and read back as they were.
    index.with_cascades(cascades).save(tmp_path / "ix")
    loaded = polydom.load(tmp_path / "ix").cascades.committees
    assert set(loaded) == set(cascades.committees)
    for p, c in cascades.committees.items():
        assert all(np.array_equal(getattr(loaded[p], a), getattr(c, a)) for a in ("mean", "scale", "coef", "intercept"))


def test_learners_without_softmax_linear_probabilities_decide_with_the_served_model():
    from sklearn.naive_bayes import GaussianNB

    X, y = load_digits(return_X_y=True)
    X, y = X[:300] / 16.0, y[:300]
    columns = {f"q{i}": slice(16 * i, 16 * (i + 1)) for i in range(3)}
    learner = FeatureSetLearner(X, y, columns, GaussianNB(), make_splits(3, y, random_state=0))
    index = polydom.build({name: [0.001 * (i + 1)] for i, name in enumerate(columns)}, learner, e=0.0)
    cascades = train_cascades(index, learner, np.full(len(y), 64.0), allowed_loss=0.05)
    assert cascades.thresholds and not cascades.committees


def test_damaged_committees_are_refused_when_read(built):
    from polydom.index.skylinestate import check_arrays, encode

    X, y, columns, learner, index, sizes = built
    state = encode(index.with_cascades(train_cascades(index, learner, sizes)))
    damaged = [("committee_values", lambda a: a[:-1], "does not match"),
               ("committee_values", lambda a: np.where(np.arange(len(a)) == 3, np.nan, a), "non-finite"),
               ("committee_shapes", lambda a: np.where(np.arange(len(a)) == 0, 0, a), "empty committee"),
               ("committee_masks", lambda a: a * 0 + (1 << 40), "outside")]
    for name, damage, message in damaged:
        arrays = dict(state.arrays, **{name: damage(state.arrays[name])})
        with pytest.raises(ValueError, match=message):
            check_arrays(state.meta, arrays)


def test_a_price_or_a_mean_cost_sets_how_early_the_cascade_stops(built):
    X, y, columns, learner, index, sizes = built
    from polydom.index.cascade import replay

    def oof_cost(cascades):
        # Mean over sets of the out-of-fold cost their thresholds reach (what the fit optimised).
        out = []
        for mask, t in cascades.thresholds.items():
            prefixes = chain_prefixes(index.chains[mask])[1:]
            proba = [learner.oof_proba(index.space.frozenset(p))[0] for p in prefixes]
            costs = np.stack([np.full(len(y), index.cost_of(index.space.frozenset(p), 64.0)) for p in prefixes], axis=1)
            out.append(replay(t, proba, costs, np.searchsorted(np.unique(y), y))[1])
        return np.array(out)

    free = oof_cost(train_cascades(index, learner, sizes, price=0.0))
    dear = oof_cost(train_cascades(index, learner, sizes, price=1e3))
    assert (dear <= free + 1e-12).all() and dear.sum() < free.sum()
    target = 0.9 * free.min()
    capped = oof_cost(train_cascades(index, learner, sizes, mean_cost=target))
    assert (capped <= target + 1e-12).all()


def test_a_relative_price_is_a_price_per_whole_set_cost(built):
    # Every item has one size here, so a relative price r is the price r / (the set's cost) for
    # each set alone: a cheap set gets a dearer price per second than a dear one.
    X, y, columns, learner, index, sizes = built
    relative = train_cascades(index, learner, sizes, relative_price=0.05)
    full_costs = {mask: index.cost_of(index.space.frozenset(mask), 64.0) for mask in relative.thresholds}
    assert len(set(full_costs.values())) > 1
    stopped_early = 0
    for mask, thresholds in relative.thresholds.items():
        alone = train_cascades(index, learner, sizes, price=0.05 / full_costs[mask]).thresholds[mask]
        assert np.array_equal(thresholds, alone)
        stopped_early += bool((thresholds[:-1] < 1.0).any())
    assert stopped_early
    with pytest.raises(ValueError, match="price, relative_price"):
        train_cascades(index, learner, sizes, price=1.0, relative_price=0.05)


def test_a_saving_is_met_out_of_fold_as_a_share_of_each_sets_cost(built):
    X, y, columns, learner, index, sizes = built
    from polydom.index.cascade import replay

    positions = np.searchsorted(np.unique(y), y)
    cascades = train_cascades(index, learner, sizes, saving=0.3)
    saved = []
    for mask, thresholds in cascades.thresholds.items():
        prefixes = chain_prefixes(index.chains[mask])[1:]
        proba = [learner.oof_proba(index.space.frozenset(p))[0] for p in prefixes]
        costs = np.stack([np.full(len(y), index.cost_of(index.space.frozenset(p), 64.0)) for p in prefixes], axis=1)
        mean_cost = replay(thresholds, proba, costs, positions)[1]
        saved.append(1.0 - mean_cost / costs[0, -1])
    # Every set either saves its 30% out of fold or, where no thresholds get that cheap, stays plain.
    assert all(s >= 0.3 - 1e-12 or s == 0.0 for s in saved), saved
    assert max(saved) >= 0.3
    # Among equally accurate thresholds the cheapest: asking to save nothing stops wherever
    # stopping loses nothing out of fold, as the default does.
    nothing, lossless = train_cascades(index, learner, sizes, saving=0.0), train_cascades(index, learner, sizes)
    assert set(nothing.thresholds) == set(lossless.thresholds)
    assert all(np.array_equal(nothing.thresholds[m], lossless.thresholds[m]) for m in lossless.thresholds)
    assert any((t[:-1] < 1.0).any() for t in lossless.thresholds.values())


def test_the_classifier_takes_one_way_to_set_its_cascades(fast_params):
    from polydom.featurizers.datasets import load_digits_images

    images, labels, _ = load_digits_images(sides=(16,), n_per_class=6, random_state=0)
    names = ("loss", "price", "relative_price", "mean_cost")
    for clash in ({"loss": 0.01, "price": 1.0}, {"price": 1.0, "mean_cost": 1e-3},
                  {"relative_price": 0.05, "mean_cost": 1e-3}):
        clf = polydom.CostSensitiveClassifier(**dict(fast_params, cascade=polydom.Cascade(**clash)))
        with pytest.raises(ValueError, match=" and ".join(n for n in names if n in clash)):
            clf.fit(images, labels)
    # A price no accuracy can pay stops every image at its set's first prefix (at cascade_loss=0,
    # on these images, a third of the answers computed two or three features).
    images, labels, _ = load_digits_images(sides=(16, 32), n_per_class=8, random_state=0)
    params = dict(fast_params, features=["intensity_hist", "thumbnail", "edge_density"],
                  cascade=polydom.Cascade(price=1e9), selection=polydom.Selection(finalist_repeats=0))
    fitted = polydom.CostSensitiveClassifier(**params).fit(images, labels, groups=np.arange(len(images)) // 2)
    assert any(len(order) > 1 for order in fitted.index_.chains.values())
    explained = fitted.explain(images, budget=1.0)
    assert all(sum(kind == "compute" for kind, _ in e.steps) == 1 for e in explained), [e.steps for e in explained]
