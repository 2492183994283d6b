"""The demo: the main job, end to end, on images that need no download.

``polydom demo`` fits the default classifier and the Greedy backend, saves PolyDom's index and
loads it back, serves held-out images at every budget (on a replayed clock, and some for real)
and writes ``OUT/report.md``: a recommendation first, then the evidence. See
:mod:`polydom.demo.job` for the steps.

Modules: :mod:`~polydom.demo.data` (images and split), :mod:`~polydom.demo.job`
(:func:`run_demo`), :mod:`~polydom.demo.evaluation` (serving grids on a replayed clock, lookup
latency), :mod:`~polydom.demo.stats` (standard errors over pictures),
:mod:`~polydom.demo.report` and :mod:`~polydom.demo.markdown`.
"""

from .data import DATASETS
from .job import DemoResult, DemoSettings, demo_settings, run_demo

__all__ = ["run_demo", "demo_settings", "DemoSettings", "DemoResult", "DATASETS"]
