import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polydom.index import CostCurve


def test_evaluation_and_sum():
    c = CostCurve([5, 2])
    assert c(3) == 11.0
    assert (c + CostCurve([0, 0, 3]))(2) == 21.0
    assert (c - c)(7) == 0.0
    assert CostCurve([1, 0, 0]) == CostCurve([1]) and CostCurve([1, 0]).degree == 0
    assert CostCurve(np.array([1.0, 2.0])) == CostCurve([1, 2])
    assert hash(CostCurve([1, 2])) == hash(CostCurve([1.0, 2.0]))


def test_immutable():
    c = CostCurve([1])
    with pytest.raises(AttributeError):
        c.coefficients = (2,)


@pytest.mark.parametrize("bad, exc", [([], ValueError), ([float("nan")], ValueError), ([math.inf], ValueError),
                                      (["a"], TypeError), ("12", TypeError), (3, TypeError), ([True], TypeError)])
def test_bad_coefficients(bad, exc):
    with pytest.raises(exc):
        CostCurve(bad)


def test_le_everywhere_is_exact_for_touching_curves():
    # 2n <= 1 + n^2 everywhere ((n-1)^2 >= 0) though not coefficient-wise.
    assert CostCurve([0, 2]).le_everywhere(CostCurve([1, 0, 1]))
    assert not CostCurve([0, 2.001]).le_everywhere(CostCurve([1, 0, 1]))
    # 3n^2 vs 5 + 2n: crosses at 5/3.
    assert not CostCurve([0, 0, 3]).le_everywhere(CostCurve([5, 2]))
    assert CostCurve([0, 0, 3]).le_everywhere(CostCurve([5, 2]), domain=(0, 5 / 3))
    assert not CostCurve([0, 0, 3]).le_everywhere(CostCurve([5, 2]), domain=(0, 1.7))
    # Cubic with an interior minimum: n^3 - 3n + 2.1 >= 0 on [0, inf) (min 0.1 at n=1).
    assert CostCurve([0, 3]).le_everywhere(CostCurve([2.1, 0, 0, 1]))
    assert not CostCurve([0, 3]).le_everywhere(CostCurve([1.9, 0, 0, 1]))


def test_le_everywhere_sees_a_cheaper_stretch_the_curves_dwarf_at_their_critical_point():
    # The difference 1e-7 n^2 - 3n is negative up to n = 3e7; at its minimum (n = 1.5e7) it is
    # -2.25e7, a relative 1e-14 of the cubes both curves share, and must still count.
    cheaper_early = CostCurve([0.0, -3.0, 1e-7, 0.5])
    assert not CostCurve([0.0, 0.0, 0.0, 0.5]).le_everywhere(cheaper_early)
    assert CostCurve([0.0, 0.0, 0.0, 0.5]).le_everywhere(cheaper_early, domain=(3e7 * (1 + 1e-9), math.inf))


def test_nonnegative_on_domain():
    assert CostCurve([1, -1, 1]).is_nonnegative()           # n^2 - n + 1 > 0
    assert not CostCurve([-0.1, 1]).is_nonnegative()
    assert CostCurve([-0.1, 1]).is_nonnegative(domain=(0.2, 10))
    assert not CostCurve([0, 1, -1]).is_nonnegative()       # negative beyond n = 1


@settings(deadline=None, max_examples=60)
@given(st.lists(st.sampled_from([0.0, 1e-7, 0.5, 1.0, 2.0, 3.0, 1e2]), min_size=1, max_size=4),
       st.lists(st.sampled_from([0.0, 1e-7, 0.5, 1.0, 2.0, 3.0, 1e2]), min_size=1, max_size=4),
       st.lists(st.sampled_from([-3.0, -1.0, 0.0, 1.0]), min_size=1, max_size=4))
def test_le_everywhere_agrees_with_sympy(p, q, shift):
    """Independent oracle: sympy decides whether q - p < 0 anywhere on [0, oo)."""
    import sympy

    q = [a + (shift[i] if i < len(shift) else 0.0) for i, a in enumerate(q)]
    a, b = CostCurve(p), CostCurve(q)
    n = sympy.Symbol("n")
    d = sympy.Poly(sum(sympy.Rational(c) * n**k for k, c in enumerate(q)) - sum(sympy.Rational(c) * n**k for k, c in enumerate(p)), n)
    if d.is_zero:
        negative_somewhere = False
    else:
        # d changes sign only at its real roots: test 0, a point between consecutive positive
        # roots, and one beyond the last, with 60 significant digits.
        roots = sorted(r for r in (sympy.Float(x.evalf(60), 60) for x in d.real_roots()) if r > 0)
        points = [sympy.Integer(0)] + [(a + b) / 2 for a, b in zip(roots, roots[1:])] + [r + 1 for r in roots[-1:]]
        if roots:
            points.append(roots[0] / 2)
        negative_somewhere = any(d.eval(x) < 0 for x in points) or d.LC() < 0
    assert a.le_everywhere(b) == (not negative_somewhere)


def test_expression_is_readable():
    assert str(CostCurve([5, 0, 3]).expression()) == "3.0*n**2 + 5.0"
