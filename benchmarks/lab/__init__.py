"""The backend comparison: every backend and serving variant of the classifier, side by side.

This was the demo's job before the demo became the short main job of :mod:`polydom.demo`; the
benchmarks that judge backends, rankings, guards and speculation run on it.

1. **Data.** scikit-learn's bundled digits (or Fashion-MNIST), each picture rendered at five
   square sizes from 28 to 280 pixels a side, split into training and held-out *pictures*.
2. **Precompute.** One :class:`~polydom.CostSensitiveClassifier` per variant of
   :data:`lab.settings.BACKENDS` (PolyDom at alpha 1 and 1.2, Greedy, GreedyAcc and GreedyCost, a
   cascade, worst-case costs), sharing trained sets through an expansion cache; PolyDom α=1 is
   also swept again with the opt-in tie rule. The PolyDom (alpha 1) classifier is saved as an
   LMDB index and loaded back.
3. **Serving.** Every held-out image at every budget through every backend's ``select``, on a
   clock replaying the image's measured feature times; a few images for real.
4. **Report.** ``OUT/report.md``: Conclusions written from the numbers, then every accuracy with
   its standard error over pictures, paired differences, violations, expansions, index sizes,
   latencies and PNG plots. ``OUT/headline.json`` keeps the headline for the next run.

Modules: :mod:`lab.settings` (features, sizes, budgets, backends), :mod:`lab.job`
(:func:`run_demo`), :mod:`lab.cells`, :mod:`lab.conclusions`, :mod:`lab.bars`,
:mod:`lab.headline`, :mod:`lab.report` and :mod:`lab.plots`; :mod:`lab.cli` is the command line
of ``benchmarks/backends.py``. Serving grids and standard errors come from the library
(:mod:`polydom.demo.evaluation`, :mod:`polydom.demo.stats`).
"""
