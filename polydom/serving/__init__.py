"""Serving a classifier: images in, a budget per answer, features computed within it.

* :mod:`.planner` -- :class:`~polydom.serving.planner.ServingPlanner`, one image's answer;
* :mod:`.answers` -- one label or one 0/1 row per label, per answer;
* :mod:`.state` -- the server a classifier hands out, and the version it serves;
* :mod:`.batch`, :mod:`.batchaccount` -- a total budget shared by a batch;
* :mod:`.stream` -- a mean budget per item over a stream.
"""
