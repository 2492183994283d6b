"""Backlog triage: the top K within a total budget -- exact at an unlimited budget, never over the
budget by more than one step (an injected clock), a Ctrl-C answered with the ranking so far, files
ranked as their decoded arrays are, and the command line."""

import csv
import math
import os

import numpy as np
import pytest

import polydom
from polydom.featurizers import REGISTRY, Feature
from polydom.featurizers.datasets import load_digits_images
from polydom.serving.triage import ladder, triage

NAMES = ["intensity_hist", "thumbnail", "edge_density"]


class Clocked:
    """A feature function that advances an injected clock by ``cost`` per call (and may raise
    ``KeyboardInterrupt`` at a chosen call)."""

    def __init__(self, function, clock, cost=1.0):
        self.function, self.clock, self.cost = function, clock, cost
        self.calls, self.interrupt_at = 0, None

    def __call__(self, image):
        self.calls += 1
        if self.interrupt_at is not None and self.calls >= self.interrupt_at:
            raise KeyboardInterrupt
        self.clock.now += self.cost
        return self.function(image)

    def __getstate__(self):
        return {**self.__dict__, "clock": None}


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


@pytest.fixture(scope="module")
def data():
    images, digits, _ = load_digits_images(sides=(16, 24), n_per_class=8, random_state=0)
    return images, (np.asarray(digits) == 0).astype(int)  # zeros are the rare positives (10%)


@pytest.fixture(scope="module")
def clocked(data, fast_params):
    images, y = data
    clock = FakeClock()
    functions = {n: Clocked(REGISTRY[n].function, clock) for n in NAMES}
    features = [Feature(f"clocked_{n}", functions[n], dimension=REGISTRY[n].dimension) for n in NAMES]
    clf = polydom.CostSensitiveClassifier(features=features, **fast_params).fit(images, y)
    return clf, clock, functions


@pytest.fixture(scope="module")
def fitted(data, fast_params):
    images, y = data
    return polydom.CostSensitiveClassifier(features=NAMES, **fast_params).fit(images, y)


def brute_force_scores(clf, images, positive=1):
    """Each image's score at the last rung of its ladder, computed directly."""
    state = clf._state()
    out = []
    for i, image in enumerate(images):
        size = image.shape[0] * image.shape[1]
        rungs = ladder(state.index, size)
        plan = state.planner.plan(rungs[-1], state.index)
        x = np.concatenate([f.evaluate(image, index=i, prepared={}) for f in plan.features])
        column = int(np.flatnonzero(plan.model.classes_ == positive)[0])
        out.append(plan.model.predict_proba(x.reshape(1, -1))[0, column])
    return np.array(out)


def test_the_ladder_climbs_from_the_first_budgets_best_to_the_unlimited_best(fitted):
    index = fitted.index_
    for size in (256, 576, 1024):
        top = index.lookup(size, math.inf)
        full = index.cost_of(top.features, size)
        for first_budget in (0.0, 0.3 * full, full):
            rungs = ladder(index, size, first_budget)
            assert rungs and rungs[-1] == top.key and len(rungs) <= 3
            costs = [index.cost_of(index.space.frozenset(k), size) for k in rungs]
            assert costs == sorted(costs) and len(set(rungs)) == len(rungs)
            assert all(index.trained[k] > index.lookup(size, 0.0).accuracy for k in rungs)
            best = index.lookup(size, first_budget)
            if best.features and best.accuracy > index.lookup(size, 0.0).accuracy:
                assert rungs[0] == best.key  # the most accurate set the first budget buys
        assert ladder(index, size, full) == [top.key]


def test_an_unlimited_budget_ranks_by_the_last_rung_exactly(fitted, data):
    images, y = data
    result = fitted.triage(images, 10, total_budget=math.inf)
    expected = brute_force_scores(fitted, images)
    np.testing.assert_allclose(result.all_scores, expected, rtol=0, atol=1e-12)
    order = np.lexsort((np.arange(len(images)), -expected))[:10]
    np.testing.assert_array_equal(result.items, order)
    np.testing.assert_allclose(result.scores, expected[order])
    assert result.stopped == "top" and not result.interrupted
    assert y[result.items].sum() >= 5  # the zeros are found


@pytest.mark.parametrize("budget", [0.5, 3.5, 12.5, 40.0])
def test_the_budget_is_exceeded_by_at_most_the_last_step(clocked, data, budget):
    """Each feature call costs one unit of the injected clock; the index predicts microseconds,
    so only the time spent so far can stop a step: the total ends within one step of the budget."""
    clf, clock, functions = clocked
    images, _ = data
    clock.now = 0.0
    for f in functions.values():
        f.calls = 0
    result = triage(clf._state(), images, 5, budget, clock=clock)
    calls = sum(f.calls for f in functions.values())
    assert result.spent == pytest.approx(calls)  # every feature call was counted
    assert result.spent <= budget + 1.0 and result.longest_step == pytest.approx(1.0)
    assert result.stopped == "budget"
    scored = ~np.isnan(result.all_scores)
    assert scored.sum() >= (1 if budget > 3 else 0)  # an image is scored once its whole first rung is computed
    assert (result.rungs[scored] >= 0).all() and (result.rungs[~scored] == -1).all()
    # The top K come from the scored images, best first; unscored ones rank last.
    known = result.scores[~np.isnan(result.scores)]
    assert list(known) == sorted(known, reverse=True)
    assert not np.isnan(result.scores[: len(known)]).any()


def test_a_ctrl_c_returns_the_ranking_so_far(clocked, data):
    clf, clock, functions = clocked
    images, _ = data
    clock.now = 0.0
    first = functions[NAMES[0]]
    first.calls, first.interrupt_at = 0, 30
    try:
        result = triage(clf._state(), images, 5, math.inf, clock=clock)
    finally:
        first.interrupt_at = None
    assert result.interrupted and result.stopped == "interrupted"
    scored = ~np.isnan(result.all_scores)
    assert 0 < scored.sum() < len(images)
    assert scored[result.items[: min(5, scored.sum())]].all()  # scored images rank first


def test_files_are_ranked_as_their_decoded_arrays(fitted, data, tmp_path):
    from PIL import Image

    from polydom.featurizers.sources import decode_image

    images, _ = data
    paths = []
    for i, image in enumerate(images[:30]):
        path = tmp_path / f"img-{i:03d}.png"
        Image.fromarray(image).save(path)
        paths.append(str(path))
    from_files = fitted.triage(paths, 5, total_budget=math.inf)
    from_arrays = fitted.triage([decode_image(p) for p in paths], 5, total_budget=math.inf)
    np.testing.assert_array_equal(from_files.items, from_arrays.items)
    np.testing.assert_allclose(from_files.all_scores, from_arrays.all_scores)
    assert from_files.spent > 0


@pytest.mark.parametrize("k, budget, label, message", [
    (0, 1.0, None, "k must be an integer from 1"),
    (10_000, 1.0, None, "k must be an integer from 1"),
    (3, None, None, "total_budget is required"),
    (3, -1.0, None, "negative"),
    (3, 1.0, 7, "not one of classes_"),
])
def test_bad_requests_get_one_clear_error(fitted, data, k, budget, label, message):
    images, _ = data
    with pytest.raises(polydom.PolydomError, match=message):
        fitted.triage(images[:20], k, total_budget=budget, label=label)


def test_a_multilabel_classifier_ranks_by_the_label_asked_for(data, fast_params):
    images, digits = data
    digits = np.asarray(load_digits_images(sides=(16, 24), n_per_class=8, random_state=0)[1])
    Y = np.stack([digits == 0, digits % 2 == 1], axis=1).astype(int)
    clf = polydom.CostSensitiveClassifier(features=NAMES[:2], **fast_params).fit(images, Y)
    with pytest.raises(polydom.PolydomError, match="label is required"):
        clf.triage(images, 5, total_budget=math.inf)
    result = clf.triage(images, 5, total_budget=math.inf, label=1)
    state = clf._state()
    expected = []
    for i, image in enumerate(images):
        plan = state.planner.plan(ladder(state.index, image.shape[0] * image.shape[1])[-1], state.index)
        x = np.concatenate([f.evaluate(image, index=i, prepared={}) for f in plan.features])
        expected.append(state.answers.proba(plan.model, x)[1])
    np.testing.assert_allclose(result.all_scores, expected, atol=1e-12)
    assert result.label == 1


def test_the_command_line_writes_the_top_k_as_csv(fitted, data, tmp_path, capsys):
    from PIL import Image

    from polydom.cli import main

    images, _ = data
    folder = tmp_path / "backlog"
    folder.mkdir()
    for i, image in enumerate(images[:12]):
        Image.fromarray(image).save(folder / f"img-{i:02d}.png")
    fitted.save(tmp_path / "clf")
    listing = tmp_path / "list.txt"
    listing.write_text("# the first six\n" + "\n".join(f"backlog/img-{i:02d}.png" for i in range(6)) + "\n")
    for source in (folder, listing):
        out = tmp_path / "top.csv"
        assert main(["triage", str(tmp_path / "clf"), str(source), "--k", "3", "--total-budget", "inf",
                     "--out", str(out), "--quiet"]) == 0
        rows = list(csv.DictReader(out.open()))
        assert [r["rank"] for r in rows] == ["1", "2", "3"]
        assert all(os.path.exists(r["path"]) for r in rows)
        if source == listing:  # only listed files are ranked
            assert {os.path.basename(r["path"]) for r in rows} <= {f"img-{i:02d}.png" for i in range(6)}
    assert main(["triage", str(tmp_path / "clf"), str(folder), "--k", "2", "--total-budget", "inf", "--quiet"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "rank,path,score"  # stdout without --out
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert main(["triage", str(tmp_path / "clf"), str(fifo), "--k", "3", "--total-budget", "1"]) == 2
    assert "neither a folder nor a regular file" in capsys.readouterr().err
