"""The expansion cache: unambiguous keys, standard errors kept, damaged entries refused by name."""

import struct

import pytest

import polydom
from polydom.cache import ExpansionStore


def test_a_feature_named_empty_does_not_collide_with_the_empty_set(tmp_path):
    with ExpansionStore(tmp_path / "c", "k") as store:
        store.put([], 0.5)
        store.put([""], 0.9)
        store.put(["a", "b"], 0.7)
        store.put(["ab"], 0.6)
        assert store.get([]).accuracy == 0.5 and store.get([""]).accuracy == 0.9
        assert store.get(["b", "a"]).accuracy == 0.7 and store.get(["ab"]).accuracy == 0.6
        assert len(store) == 4


def test_standard_errors_round_trip_and_a_resumed_build_keeps_them(tmp_path):
    with ExpansionStore(tmp_path / "c", "k") as store:
        store.put(["a"], 0.8, std_error=0.02)
        store.put(["b"], 0.7)
        assert store.get(["a"]).std_error == 0.02 and store.get(["b"]).std_error is None
    costs = {"a": [1.0], "b": [2.0]}
    acc = {frozenset(): .5, frozenset("a"): .7, frozenset("b"): .8, frozenset("ab"): .9}
    expand = lambda s: polydom.Expansion(acc[s], None, std_error=0.01 * len(s))  # noqa: E731
    first = polydom.build(costs, expand, cache=tmp_path / "d", cache_key="x")
    again = polydom.build(costs, lambda s: 1 / 0, cache=tmp_path / "d", cache_key="x")  # nothing retrained
    assert again.std_error == first.std_error and again.stats["trained"] == 0


@pytest.mark.parametrize("raw, words", [
    (struct.pack(">dd?", float("nan"), 0.0, False), "accuracy nan"),
    (struct.pack(">dd?", 7.5, 0.0, False), "accuracy 7.5"),
    (struct.pack(">dd?", 0.5, -1.0, False), "standard error -1.0"),
    (b"\x00\x01", "truncated"),
    (struct.pack(">dd?", 0.5, 0.0, True) + b"\x00" * 5, "truncated inside its model checksum"),
])
def test_a_damaged_entry_raises_the_cache_error_naming_the_set(tmp_path, raw, words):
    with ExpansionStore(tmp_path / "c", "k") as store:
        with store._env.begin(write=True, db=store._db) as txn:
            txn.put(store._key(["a"]), raw)
        with pytest.raises(polydom.CacheError, match=rf"\['a'\].*{words}|{words}"):
            store.get(["a"])
