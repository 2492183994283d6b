"""A batch of answers prints as what it holds, not as ``<... object at 0x...>``."""

import polydom


def _index():
    return polydom.build({"a": [1.0], "b": [2.0]}, lambda fs: 0.5 + 0.1 * len(fs))


def test_batch_repr_shows_count_and_first_answers():
    batch = _index().lookup_many([1.0] * 5, [0.0, 1.0, 3.0, 3.0, 3.0])
    text = repr(batch)
    assert " object at 0x" not in text
    assert text.startswith("<Batch of 5 answers: {} accuracy 0.5 cost 0; {a} accuracy 0.6 cost 1; ")
    assert "{a, b} accuracy 0.7 cost 3" in text and text.endswith("; ... 2 more>")


def test_batch_repr_of_one_and_of_none():
    index = _index()
    assert repr(index.lookup_many([1.0], [0.0])) == "<Batch of 1 answer: {} accuracy 0.5 cost 0>"
    assert repr(index.lookup_many([], [])) == "<Batch of 0 answers>"
