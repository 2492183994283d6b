"""The demo's settings: features, sizes, budgets and the backends it compares."""


__all__ = ["DEFAULT_FEATURES", "QUICK_FEATURES", "DEFAULT_SIDES", "QUICK_SIDES", "TIMING_SIDES", "QUICK_TIMING_SIDES",
           "DEFAULT_BUDGETS", "REAL_PASS_BUDGETS", "BACKENDS", "variant_params", "SERVING", "PRIMARY", "TIES", "PLAIN",
           "CASCADE", "CASCADE_PAIR", "WORST_CASE", "SPECULATIVE", "ABLATIONS", "RIVALS"]

#: The demo's feature lattice: the built-in features minus ``size_meta`` (every class comes at
#: the same sizes, so it is chance-level) and ``gabor``, which costs 15-170 ms an image here --
#: ten times all the others together -- and adds under a point of accuracy on these digits:
#: keeping it would spend most of the demo's five minutes extracting one feature.
DEFAULT_FEATURES = ("intensity_hist", "thumbnail", "fft_bands", "edge_density", "lbp", "glcm", "harris", "hog")
QUICK_FEATURES = ("intensity_hist", "thumbnail", "edge_density", "hog")
#: A decade of side length, spaced evenly on a log scale: wide enough that feature costs grow
#: apart and cross (a fixed-overhead feature against one quadratic in the side).
DEFAULT_SIDES = (28, 50, 89, 158, 280)
QUICK_SIDES = (28, 89, 280)
#: (training, held-out) pictures per class; each picture is rendered at every side.
DEFAULT_PICTURES = (20, 50)
QUICK_PICTURES = (4, 3)
#: Sides the features are timed at: the served range with points between.
TIMING_SIDES = (28, 40, 56, 80, 112, 158, 220, 280)
QUICK_TIMING_SIDES = (28, 56, 112, 200, 280)
#: Seconds of feature extraction per image: from below the cheapest feature at 28 px to above
#: every feature together at 280 px.
DEFAULT_BUDGETS = (0.00002, 0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05)
#: Budgets of the real serving pass (features computed for real).
REAL_PASS_BUDGETS = (0.0005, 0.002, 0.01)
#: The backends fitted, in this order (the first trains; the others reuse its trained sets), with
#: the classifier's defaults; PolyDom serves the most accurate affordable set (``tolerance=0``).
PRIMARY = "PolyDom α=1"
#: :data:`PRIMARY` with confidence cascades (``cascade=True``), served with ``stop_when_confident``.
CASCADE = "PolyDom α=1 cascade"
#: The share of each set's extraction time :data:`CASCADE`'s thresholds save out of fold
#: (``cascade_saving``). At the default (lose nothing out of fold) Fashion-MNIST's cheap sets
#: stopped early too rarely: 15-20% saved at 1-2 ms, where digits saved half.
CASCADE_SAVING = 0.4
#: :data:`CASCADE`'s own index served twice from one snapshot of its learned guards, walking
#: plainly (``/select``) and stopping when confident (``/cascade``): only the early stops differ.
CASCADE_PAIR = "PolyDom α=1 cascade, same guards"
#: :data:`PRIMARY` with the paper's provisioning: costs at the 0.95 quantile of the timing pass,
#: neither calibrated to serving nor guarded -- what median curves with a guard replace.
WORST_CASE = "PolyDom α=1 0.95-quantile costs"
BACKENDS = (
    (PRIMARY, {"selection": {"backend": "polydom", "alpha": 1.0, "tolerance": 0.0}}),
    ("PolyDom α=1.2", {"selection": {"backend": "polydom", "alpha": 1.2}}),
    ("Greedy", {"selection": {"backend": "greedy"}}),
    ("GreedyAcc", {"selection": {"backend": "greedy-acc"}}),
    ("GreedyCost", {"selection": {"backend": "greedy-cost"}}),
    (CASCADE, {"selection": {"backend": "polydom", "alpha": 1.0, "tolerance": 0.0},
               "cascade": {"saving": CASCADE_SAVING}}),
    (WORST_CASE, {"selection": {"backend": "polydom", "alpha": 1.0, "tolerance": 0.0},
                  "timing": {"quantile": 0.95, "calibrate": False}, "serving": {"guard": None}}),
)


def variant_params(changes: dict, timing=None) -> dict:
    """A variant's constructor settings: its groups with the changes :data:`BACKENDS` lists, the
    rest at their defaults (a fit must not inherit the last one's); ``timing`` (a Timing) is the
    run's timing group, which a variant's timing changes start from."""
    from polydom.classifier.policies import Cascade, Selection, Serving, Timing

    base = timing.get_params() if timing is not None else {}
    return {
        "selection": Selection(**changes.get("selection", {})),
        "timing": Timing(**{**base, **changes.get("timing", {})}),
        "cascade": Cascade(**changes["cascade"]) if "cascade" in changes else None,
        "serving": Serving(**changes.get("serving", {})),
    }


#: :data:`PRIMARY` served the plain way: look the set up, then compute all of it (no anytime walk).
PLAIN = "PolyDom α=1 plain"
#: :data:`PRIMARY`'s anytime walk trying features past their guards with a deadline
#: (``speculate=True``, opt-in): what it adds, replayed.
SPECULATIVE = "PolyDom α=1 speculative"
#: How each backend is served on the held-out grid (default: its index's anytime ``select``).
SERVING = {CASCADE: "cascade", PLAIN: "plain"}
#: Variants of the primary that isolate one of its parts; the Conclusions' ranking leaves them
#: out, the cell-by-cell section compares them.
ABLATIONS = (PLAIN, SPECULATIVE, WORST_CASE)
#: The backends the primary is judged against, per (size, budget) cell.
RIVALS = ("PolyDom α=1.2", "Greedy", "GreedyAcc", "GreedyCost")
#: :data:`PRIMARY` with the opt-in tie rule (``tolerance=None``: among affordable sets within one
#: standard error of the best, the cheapest), to show what it trades; see :func:`lab.job.with_tolerance`.
TIES = "PolyDom α=1 SE ties"
