"""The demo: the main job, end to end, on real images that ship with the dependencies.

1. **Data.** scikit-learn's bundled handwritten digits, each rendered at five square sizes from
   28 to 280 pixels a side (a decade, so feature costs grow apart and cross), split into training
   and held-out *pictures* (all renderings of a picture fall on one side): 1,000 training and
   2,500 held-out images by default.
2. **Precompute.** A :class:`~polydom.CostSensitiveClassifier` times every feature on this
   machine across eight sizes, fits one cost polynomial per feature, trains and cross-validates
   the best of its learners per explored feature set and builds the index -- for PolyDom at alpha
   1 and 1.2 and for Greedy, GreedyAcc and GreedyCost, sharing trained sets through an expansion
   cache; PolyDom α=1 is also swept again with the opt-in tie rule. The PolyDom (alpha 1)
   classifier is saved as an LMDB index and loaded back.
3. **Serving.** Every held-out image is served at every budget by every backend, through its
   index's ``select`` on a clock replaying the image's measured feature times.
4. **Report.** ``OUT/report.md`` opens with Conclusions written from the numbers (which backend
   for which budget, where differences are significant, how the answers change with size, the
   causes of anything surprising, how far the headline moved since the previous run); then every
   accuracy with its standard error over pictures, paired differences between backends,
   violations, expansions, index sizes, latencies and PNG plots. ``OUT/headline.json`` keeps the
   headline for the next run.

Features and trained sets are cached under ``OUT/cache`` (keyed by fingerprints of the data,
the feature definitions, the learner and the machine), so a second run skips the extraction
and the training.

Modules: :mod:`~polydom.demo.settings` (features, sizes, budgets, backends),
:mod:`~polydom.demo.job` (:func:`run_demo`), :mod:`~polydom.demo.evaluation` (serving grids and
latencies), :mod:`~polydom.demo.stats` (standard errors and paired differences),
:mod:`~polydom.demo.conclusions`, :mod:`~polydom.demo.headline`, :mod:`~polydom.demo.report`
(``report.md``) and :mod:`~polydom.demo.plots` (PNG figures; matplotlib, from the ``images``
extra, is imported only when a figure is drawn). The command line is :mod:`polydom.cli.demo`.
"""

from .job import run_demo
from .settings import DEFAULT_BUDGETS, DEFAULT_FEATURES

__all__ = ["run_demo", "DEFAULT_FEATURES", "DEFAULT_BUDGETS"]
