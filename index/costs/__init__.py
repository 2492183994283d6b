"""Cost curves: a feature's cost as a polynomial in the item size, evaluated and fitted.

* :mod:`.curve` -- :class:`~polydom.index.costs.curve.CostCurve` and set costs;
* :mod:`.poly` -- polynomial arithmetic on coefficient rows;
* :mod:`.fitting` -- fitting a curve to measured times (a quantile per size, shape constraints).
"""
