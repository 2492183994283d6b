"""A loaded classifier refreshed to a refit serves the refit whole, or refuses clearly.

A refit published to the same path may order its features otherwise, add one or predict other
classes. After ``index_.refresh()`` (or ``clf.refresh()``) the classifier must answer exactly as a
fresh ``CostSensitiveClassifier.load`` of the new version does, or raise
``ClassifierStateError`` where it cannot serve it. Concurrency tests run real threads with time
limits: a hang is a failure.
"""

import random
import threading
import time

import numpy as np
import pytest
from sklearn.base import clone

import polydom
from polydom.classifier.classifier_state import ClassifierStateError
from polydom.featurizers import validate_image
from polydom.featurizers.datasets import load_digits_images

#: Each refit's features, and whether its classes are strings.
VARIANTS = {
    "base": (["thumbnail", "intensity_hist"], False),
    "reordered": (["intensity_hist", "thumbnail"], False),
    "added": (["thumbnail", "intensity_hist", "edge_density"], False),
    "strings": (["thumbnail", "intensity_hist"], True),
}


@pytest.fixture(scope="module")
def digits():
    images, labels, _ = load_digits_images(sides=(16,), n_per_class=5, random_state=0)
    return images, np.asarray(labels)


@pytest.fixture(scope="module")
def variants(digits, fast_params, tmp_path_factory):
    """Every refit, fitted once on the same small digits and saved to a directory of its own."""
    images, labels = digits
    out = {}
    for name, (features, strings) in VARIANTS.items():
        y = np.array([f"d{v}" for v in labels]) if strings else labels
        clf = polydom.CostSensitiveClassifier(features=features, **fast_params).fit(images, y)
        clf.save(tmp_path_factory.mktemp(name) / "clf")
        out[name] = clf
    return out


def publish(clf, path):
    """Publish ``clf`` at ``path`` as a new version (a copy: the fixture's classifier keeps its own path)."""
    import copy

    copy.copy(clf).save(path)


def same_answers(live, fresh, images):
    """``live`` answers as ``fresh`` does: labels, probabilities and the sets served, and its
    fitted attributes are the new version's."""
    for budget in (None, 0.0):  # both are decided without the clock: no timing noise
        np.testing.assert_array_equal(live.predict(images, budget=budget), fresh.predict(images, budget=budget))
        np.testing.assert_allclose(live.predict_proba(images, budget=budget),
                                   fresh.predict_proba(images, budget=budget))
        assert ([(e.features, e.label) for e in live.explain(images, budget=budget)]
                == [(e.features, e.label) for e in fresh.explain(images, budget=budget)])
    assert live.feature_names_ == fresh.feature_names_
    assert dict(live.feature_columns_) == dict(fresh.feature_columns_)
    np.testing.assert_array_equal(live.classes_, fresh.classes_)
    assert live.classes_.dtype == fresh.classes_.dtype


@pytest.mark.parametrize("refit", ["reordered", "added", "strings"])
@pytest.mark.parametrize("how", ["index", "classifier"])
def test_a_refreshed_classifier_answers_as_a_fresh_load_of_the_refit(variants, digits, tmp_path, refit, how):
    images, _ = digits
    path = tmp_path / "live"
    publish(variants["base"], path)
    live = polydom.CostSensitiveClassifier.load(path)
    params = live.get_params()
    live.predict(images[:3], budget=None)  # serving state built and used on the first version
    publish(variants[refit], path)
    if how == "index":
        assert live.index_.refresh()  # the next request rebuilds the serving state
    else:
        assert live.refresh()
    fresh = polydom.CostSensitiveClassifier.load(path)
    same_answers(live, fresh, images)
    assert live.version_ == fresh.version_
    assert live.get_params() == params and clone(live).get_params() == params  # refreshing sets no parameter
    assert live.refresh() is False  # nothing new since


def test_a_version_the_classifier_cannot_serve_is_refused_until_a_servable_one_comes(variants, digits, tmp_path):
    images, _ = digits
    path = tmp_path / "live"
    publish(variants["base"], path)
    live = polydom.CostSensitiveClassifier.load(path)
    plain = polydom.build({"a": [1.0], "b": [2.0]}, lambda fs: 0.5 + 0.1 * len(fs))  # not a classifier
    plain.save(path)
    assert live.index_.refresh()
    for method in (live.predict, live.predict_proba, live.explain):
        with pytest.raises(ClassifierStateError, match="not saved by CostSensitiveClassifier"):
            method(images[:2], budget=None)
    with pytest.raises(ClassifierStateError):
        live.classes_  # noqa: B018 -- the fitted attributes are that version's, so refused too
    publish(variants["strings"], path)
    assert live.refresh()
    same_answers(live, polydom.CostSensitiveClassifier.load(path), images)


def version_answers(clf, images):
    """Per image, every answer ``clf``'s version can give: (features served, score) -> label."""
    planner = clf.planner_
    out = []
    for i, image in enumerate(images):
        array = validate_image(image, index=i)
        vectors = {n: f.evaluate(array, index=i) for n, f in planner.features.items()}
        table = {}
        for mask, score in planner.index.trained.items():
            plan = planner.plan(mask)
            x = np.concatenate([vectors[n] for n in plan.names]) if plan.names else np.zeros(0)
            table[(plan.names, float(score))] = plan.predictor.predict_one(x)
        out.append(table)
    return out


def test_threads_serving_while_refits_are_published_answer_from_one_version(variants, digits, tmp_path):
    images, _ = digits
    served_images = images[::7]  # a few, each a different digit
    names = list(VARIANTS)
    fresh = {name: polydom.CostSensitiveClassifier.load(variants[name].path_) for name in names}
    answers = {name: version_answers(fresh[name], served_images) for name in names}
    labels = {name: [set(t.values()) for t in answers[name]] for name in names}
    path = tmp_path / "live"
    publish(variants["base"], path)
    live = polydom.CostSensitiveClassifier.load(path)
    errors, mixed, served = [], [], [0]
    stop = threading.Event()

    def one_version(check) -> bool:
        return any(check(name) for name in names)

    def serve(seed):
        rng = random.Random(seed)
        while not stop.is_set():
            picked = rng.sample(range(len(served_images)), 3)
            batch = [served_images[i] for i in picked]
            budget = rng.choice([None, 0.0, 2e-4, 1e-3, 5e-3])
            try:
                if rng.random() < 0.5:
                    got = live.explain(batch, budget=budget)
                    ok = one_version(lambda v: all(answers[v][i].get((e.features, e.estimated_accuracy), object())
                                                   == e.label for i, e in zip(picked, got)))
                else:
                    got = live.predict(batch, budget=budget)
                    ok = one_version(lambda v: all(label in labels[v][i] for i, label in zip(picked, got.tolist())))
                if not ok:
                    mixed.append((picked, budget, got))
                served[0] += 1
            except Exception as exc:  # noqa: BLE001 -- every exception is a failure here
                errors.append(repr(exc))

    workers = [threading.Thread(target=serve, args=(seed,), daemon=True) for seed in range(3)]
    for w in workers:
        w.start()
    try:
        for k in range(20):
            publish(variants[names[(k + 1) % len(names)]], path)
            if k % 2:
                assert live.refresh()
            else:
                assert live.index_.refresh()
            time.sleep(0.05)  # let the threads serve this version
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=60)
    assert not any(w.is_alive() for w in workers), "a serving thread hung"
    assert errors == [], errors[:5]
    assert mixed == [], mixed[:5]
    assert served[0] >= 20
    same_answers(live, fresh[names[20 % len(names)]], served_images)


def test_a_refresh_while_a_deploy_swaps_the_directory_keeps_serving_the_version_held(variants, digits, tmp_path):
    import os
    import shutil

    images, _ = digits
    path = tmp_path / "live"
    publish(variants["base"], path)
    live = polydom.CostSensitiveClassifier.load(path)
    expected = polydom.CostSensitiveClassifier.load(variants["base"].path_).predict(images, budget=None)
    publish(variants["strings"], tmp_path / "next")  # built elsewhere,
    shutil.rmtree(path)  # the live directory removed: the moment before the rename
    with pytest.raises(polydom.StoreError):
        live.index_.refresh()
    # Models not read yet still load: the version's files are held open.
    np.testing.assert_array_equal(live.predict(images, budget=None), expected)
    os.rename(tmp_path / "next", path)
    assert live.index_.refresh()
    same_answers(live, polydom.CostSensitiveClassifier.load(path), images)
