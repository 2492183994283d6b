"""Deploys at the storage layer: a new build's directory swapped in where an index was served.

Every fresh build publishes ``v00000001``, so a version must be known by what it is -- its
directory and data file -- and not by its name alone.
"""

import os
import shutil

import pytest

import polydom


def _pair():
    """Two indexes over the same features whose answers differ."""
    costs = {"a": [1.0], "b": [0.0, 2.0]}
    old = polydom.build(costs, lambda fs: 0.5 + 0.2 * len(fs))
    new = polydom.build(costs, lambda fs: 0.9 - 0.2 * len(fs))
    assert old.lookup(1, 2.0) != new.lookup(1, 2.0)
    return old, new


@pytest.mark.parametrize("old_directory", ["deleted", "moved aside"])
def test_a_build_swapped_in_under_the_same_version_name_is_served(tmp_path, old_directory):
    old, new = _pair()
    p, q = tmp_path / "index", tmp_path / "next"
    assert old.save(p) == new.save(q) == "v00000001"  # the same name in both builds
    live = polydom.load(p)
    assert live.lookup(1, 2.0) == old.lookup(1, 2.0)
    if old_directory == "deleted":
        shutil.rmtree(p)
    else:
        os.rename(p, tmp_path / "previous")
    os.rename(q, p)  # the deploy

    assert live.refresh() is True
    assert live.lookup(1, 2.0) == new.lookup(1, 2.0)
    assert polydom.load(p).lookup(1, 2.0) == new.lookup(1, 2.0)  # not the process's open old version
    assert live.refresh() is False  # nothing changed since
    # The old index is still readable where it was kept, and still answers as the old build.
    if old_directory == "moved aside":
        assert polydom.load(tmp_path / "previous").lookup(1, 2.0) == old.lookup(1, 2.0)


def _saved_with_params(tmp_path, name, **params):
    """An index saved at ``tmp_path/name`` whose stored params carry ``params`` (as a crafted file would)."""
    index = polydom.build({"a": [1.0], "b": [0.0, 2.0]}, lambda fs: 0.5 + 0.2 * len(fs))
    index.params.update(params)
    index.save(tmp_path / name)
    return tmp_path / name


@pytest.mark.parametrize("tolerance", [-1, -0.5, float("nan")])
def test_a_negative_or_nan_tolerance_is_refused_at_load(tmp_path, tolerance):
    path = _saved_with_params(tmp_path, "idx", tolerance=tolerance)
    with pytest.raises(polydom.IndexFormatError, match="tolerance"):  # not a bare StopIteration
        polydom.load(path)


@pytest.mark.parametrize("guards", [
    dict(cost_guard=[1.0, 0.5]),
    dict(cost_guard=["x", 1.0]),
    dict(cost_guard=[2.0, 2.0], cost_guard_sizes=[10.0, 20.0], cost_guard_by_size=[[1.0, 1.0]]),
    dict(cost_guard=[2.0, 2.0], cost_guard_sizes=[10.0], cost_guard_by_size=[[1.0, 0.1]]),
    dict(cost_guard=[2.0, 2.0], cost_guard_quantile=3.0),
])
def test_crafted_guards_fail_at_load_not_at_every_request(tmp_path, guards):
    path = _saved_with_params(tmp_path, "idx", **guards)
    with pytest.raises(polydom.IndexFormatError, match="cost_guard"):
        polydom.load(path)


def test_budgets_beyond_float_range_mean_no_limit():
    index = polydom.build({"a": [1.0], "b": [0.0, 2.0]}, lambda fs: 0.5 + 0.2 * len(fs))
    unlimited = index.lookup(1.0, float("inf"))
    assert index.lookup(1.0, 10**400) == unlimited
    assert index.lookup(1, 10**400) == unlimited
    assert index.lookup_many([1.0, 2.0], [10**400, 10**400])[0] == unlimited
    assert index.select(1.0, 10**400, lambda name: None).features == unlimited.features
    with pytest.raises(ValueError, match="finite"):
        index.lookup(10**400, 1.0)  # a size that large is no size
    with pytest.raises(ValueError, match="finite"):
        index.lookup(1.0, -10**400)


def test_lookup_json_is_strict_json(tmp_path, capsys):
    import json

    from polydom.cli import main

    polydom.build({"a": [1.0], "b": [0.0, 2.0]}, lambda fs: 0.5 + 0.2 * len(fs)).save(tmp_path / "idx")
    assert main(["lookup", str(tmp_path / "idx"), "--size", "1", "--budget", "inf", "--json"]) == 0

    def refuse(constant):
        raise ValueError(f"not strict JSON: {constant}")

    answer = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert answer["budget"] == "inf" and answer["features"] == ["a", "b"]


def test_a_batch_budget_beyond_float_range_means_no_limit():
    # plan_batch(sizes, 10**400) raised a raw OverflowError at float(total_budget).
    index = polydom.build({"a": [1.0], "b": [2.0]}, lambda s: 0.5 + 0.1 * len(s), e=1.0)
    plan = index.plan_batch([1.0, 2.0], 10**400)
    assert plan.total_budget == float("inf")
    assert [sorted(plan.choices[i].features) for i in range(2)] == [["a", "b"], ["a", "b"]]
