"""The demo: the main job, end to end, on real images that ship with the dependencies.

1. **Data.** scikit-learn's bundled handwritten digits, each rendered at four square sizes
   (16, 32, 48 and 64 pixels a side by default), split into training and held-out *pictures*
   (all renderings of a picture fall on one side).
2. **Precompute.** A :class:`~polydom.CostSensitiveClassifier` times every feature on this
   machine across six sizes, fits one cost polynomial per feature, trains and cross-validates
   one model per explored feature set (the paper's learner) and builds the index -- for PolyDom
   at alpha 1 and 1.2 and for Greedy, GreedyAcc and GreedyCost, sharing trained sets through an
   expansion cache. The PolyDom (alpha 1) classifier is saved as an LMDB index and loaded back.
3. **Serving.** Every held-out image is served at every budget by every backend; accuracy,
   budget violations (measured extraction time above the budget) per size, expansions, index
   sizes, lookup and per-item latencies go to ``OUT/report.md`` with PNG plots.

Features and trained sets are cached under ``OUT/cache`` (keyed by fingerprints of the data,
the feature definitions, the learner and the machine), so a second run skips the extraction
and the training.

Modules: :mod:`~polydom.demo.job` (:func:`run_demo`), :mod:`~polydom.demo.evaluation` (serving
grids and latencies), :mod:`~polydom.demo.report` (``report.md``) and :mod:`~polydom.demo.plots`
(PNG figures; matplotlib, from the ``images`` extra, is imported only when a figure is drawn).
The command line is :mod:`polydom.cli.demo`.
"""

from .job import DEFAULT_BUDGETS, DEFAULT_FEATURES, run_demo

__all__ = ["run_demo", "DEFAULT_FEATURES", "DEFAULT_BUDGETS"]
