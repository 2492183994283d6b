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
