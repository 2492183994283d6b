"""Backends enter the table only through a check that their index class implements the backend
contract in full; serving then calls the contract without probing."""

import pytest

import polydom
from polydom.backends import BACKENDS, Backend, register_backend
from polydom.greedy.index import GreedyIndex
from polydom.index.errors import BackendError
from polydom.index.protocol import CostSensitiveIndex, check_backend
from polydom.index.skyline import PolyDomIndex


def test_polydom_and_greedy_implement_the_contract_in_full():
    for cls in (PolyDomIndex, GreedyIndex):
        check_backend(cls)
    assert {spec.index_class for spec in BACKENDS.values()} >= {PolyDomIndex, GreedyIndex}
    for spec in BACKENDS.values():
        check_backend(spec.index_class)


def test_a_backend_missing_a_method_is_refused_at_registration():
    class Partial(CostSensitiveIndex):  # no lookup_many, no with_costs, ...
        backend = "partial"

        def lookup(self, size, budget):
            raise NotImplementedError

    with pytest.raises(BackendError, match="lookup_many"):
        register_backend(Backend("partial", Partial, None, ()))
    assert "partial" not in BACKENDS


def test_a_class_outside_the_contract_is_refused():
    class Lookalike:  # has the methods, but is not a CostSensitiveIndex
        backend = "lookalike"

        def lookup(self, size, budget):
            return None

    with pytest.raises(BackendError, match="CostSensitiveIndex"):
        register_backend(Backend("lookalike", Lookalike, None, ()))
    with pytest.raises(polydom.PolydomError):
        register_backend(Backend("lookalike", Lookalike, None, ()))


def test_a_taken_name_is_refused():
    with pytest.raises(BackendError, match="already registered"):
        register_backend(Backend("polydom", PolyDomIndex, None, ()))
    assert BACKENDS["polydom"].builder is not None


def test_every_index_answers_the_contracts_capabilities_without_probing():
    """The base class answers for a backend without chains, cascades or measured scores."""
    costs = {"a": [1.0], "b": [2.0]}
    scores = {frozenset(): .5, frozenset("a"): .6, frozenset("b"): .7, frozenset("ab"): .8}
    greedy = polydom.build(costs, scores.__getitem__, backend="greedy", n0=1.0)
    assert greedy.chains == {} and greedy.cascades is None and greedy.measured == {}
    assert greedy.option_kind == "fixed"
    computed = []
    choice, steps = greedy.select_steps(1.0, 3.0, computed.append)
    assert steps == [("compute", name) for name in computed] and set(computed) == set(choice.features)
