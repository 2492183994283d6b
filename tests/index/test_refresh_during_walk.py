"""A refresh during a walk: every query reads one version from start to end.

The anytime walks read many index attributes; a refresh replaces them one by one. Injected
refreshes land inside walks (the feature callback publishes a new version and refreshes), and
real threads refresh while others serve: no exception, and every answer is one version's.
"""

import threading
import time

import pytest

import polydom

COSTS = {"cheap": [1.0], "mid": [2.0], "slow": [4.0]}


def scores(shift: float):
    base = {"": .5, "cheap": .6, "mid": .65, "slow": .7, "cheap mid": .75, "cheap slow": .85, "mid slow": .8,
            "cheap mid slow": .9}
    return lambda s: base[" ".join(n for n in COSTS if n in s)] + (shift if s else 0.0)


def versions(backend):
    """Two builds whose answers differ: the same features in another order, other scores."""
    options = {"n0": 1.0} if backend != "polydom" else {}
    one = polydom.build(COSTS, scores(0.0), e=0.0, tolerance=0.0, backend=backend, **options)
    reordered = {n: COSTS[n] for n in ("slow", "cheap", "mid")}
    two = polydom.build(reordered, scores(0.04), e=0.0, tolerance=0.0, backend=backend, **options)
    return one, two


def answers(index):
    """(features, accuracy) of every answer ``index`` can give: its trained sets and their scores."""
    table = index.trained if hasattr(index, "trained") else index.accuracy
    return {(frozenset(index.space.frozenset(m)), a) for m, a in table.items()}


@pytest.mark.parametrize("backend", ["polydom", "greedy-cost"])
def test_refreshes_injected_inside_walks_never_mix_versions(tmp_path, backend):
    one, two = versions(backend)
    path = tmp_path / "ix"
    one.save(path)
    live = polydom.load(path)
    allowed = {0: answers(one), 1: answers(two)}
    mixed = 0
    for k in range(60):
        state = {"now": 0.0, "fired": False}
        nxt = two if k % 2 == 0 else one
        before = one if k % 2 == 0 else two  # live now; the walk must answer from it

        def compute(name):
            if not state["fired"]:  # publish the other build and switch to it, mid-walk
                state["fired"] = True
                nxt.save(path)
                assert live.refresh()
            state["now"] += COSTS[name][0]

        choice = live.select(1.0, 7.0, compute, lambda: state["now"])
        answered = (frozenset(choice.features), choice.accuracy)
        mixed += not (answered in allowed[0] or answered in allowed[1])
        assert state["fired"]
        assert answered in answers(before), (k, answered)  # the version the walk started on
    assert mixed == 0


@pytest.mark.parametrize("backend", ["polydom", "greedy-cost"])
def test_threads_serving_while_another_refreshes_see_no_error_and_no_mixed_answer(tmp_path, backend):
    one, two = versions(backend)
    path = tmp_path / "ix"
    one.save(path)
    live = polydom.load(path)
    allowed = answers(one) | answers(two)
    errors, bad, served = [], [], [0]
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            now = [0.0]

            def compute(name):
                time.sleep(1e-4)  # let the refreshing thread in between features
                now[0] += 1e-3

            try:
                choice = live.select(1.0, 7.0, compute, lambda: now[0])
                if (frozenset(choice.features), choice.accuracy) not in allowed:
                    bad.append(choice)
                served[0] += 1
            except Exception as exc:  # noqa: BLE001 -- any exception is the failure counted
                errors.append(repr(exc))

    workers = [threading.Thread(target=serve, daemon=True) for _ in range(3)]
    for w in workers:
        w.start()
    for k in range(40):
        (two if k % 2 == 0 else one).save(path)
        live.refresh()
    stop.set()
    for w in workers:
        w.join(timeout=30)
        assert not w.is_alive(), "a serving thread hung"
    assert errors == [] and bad == [] and served[0] > 0
