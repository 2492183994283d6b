"""The demo's job: fit, deploy, serve held-out images, report.

:func:`run_demo` is what ``polydom demo`` runs:

1. **Data** (:mod:`polydom.demo.data`): training and held-out images that need no download.
2. **Fit.** The default :class:`~polydom.CostSensitiveClassifier` (PolyDom) and the same
   classifier with the Greedy backend, which precomputes far less; both share one feature cache.
3. **Deploy.** PolyDom is saved as an LMDB index and loaded back; the loaded copy serves.
4. **Serve, replayed.** Every held-out image's features are computed and timed once, one image
   at a time; each (image, budget) is then served by the index's own ``select`` on a clock
   replaying those times. An answer whose replayed time exceeds its budget counts as wrong.
5. **Serve, for real.** Some held-out images per size range are served again at every budget
   with their features computed now (:meth:`Server.explain <polydom.serving.planner.Server.explain>`).
6. **Report** (:mod:`polydom.demo.report`): a recommendation, then the evidence.
"""

from __future__ import annotations

import os
import platform
import sys
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from .data import load_demo_data, size_ranges
from .variants import BACKENDS, DEFAULT

__all__ = ["DemoSettings", "DemoResult", "demo_settings", "run_demo"]

@dataclass(frozen=True)
class DemoSettings:
    """What one demo run measures: its data, features and budgets (seconds per item)."""

    dataset: str
    features: tuple
    budgets: tuple
    sides: tuple = (28, 56, 112)
    train_per_class: int = 20
    held_out_per_class: int = 50
    n_train: int = 120
    n_held_out: int = 300
    #: Held-out images per size range served for real at every budget: 100 tell a 5% late share
    #: from a 15% one (binomial standard errors of 2.2 and 3.6 points).
    real_per_range: int = 100
    #: Whether the images reach the classifier as JPEG bytes, decoded inside the budget.
    encoded: bool = False


_DIGITS_FEATURES = ("intensity_hist", "thumbnail", "fft_bands", "edge_density", "lbp", "glcm", "harris", "hog")
PHOTO_FEATURES = ("intensity_hist", "thumbnail", "fft_bands", "edge_density", "lbp", "hog")
_SMALL_BUDGETS = (0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05)
_PHOTO_BUDGETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)


def demo_settings(dataset: str = "digits", quick: bool = False) -> DemoSettings:
    """The settings of ``polydom demo --dataset DATASET [--quick]``; ``quick`` is a smoke test
    whose numbers carry large standard errors."""
    if dataset == "photos":
        if quick:
            return DemoSettings(dataset, ("intensity_hist", "thumbnail", "edge_density"), (0.005, 0.02, 0.1),
                                n_train=24, n_held_out=18, real_per_range=2, encoded=True)
        return DemoSettings(dataset, PHOTO_FEATURES, _PHOTO_BUDGETS, real_per_range=100, encoded=True)
    if quick:
        return DemoSettings(dataset, ("intensity_hist", "thumbnail", "edge_density", "hog"), (0.0005, 0.002, 0.01),
                            sides=(28, 112), train_per_class=4, held_out_per_class=3, real_per_range=2)
    return DemoSettings(dataset, _DIGITS_FEATURES, _SMALL_BUDGETS)


@dataclass
class Served:
    """One backend's answers to every held-out item at every budget, judged on time."""

    correct: np.ndarray  # (n_budgets, n_items): right and within the budget
    late: np.ndarray  # (n_budgets, n_items): the replayed (or real) time exceeded the budget
    features: list  # per budget, per item: the tuple of features used
    idle: np.ndarray | None = None  # (n_budgets, n_items), served for real: the answer computed no feature


@dataclass
class DemoResult:
    """Everything the report reads."""

    settings: DemoSettings
    out: str
    classes: tuple
    n_train: int
    held_out_sizes: np.ndarray
    held_out_pictures: np.ndarray
    ranges: np.ndarray  # each held-out item's size range
    range_names: list
    chance: float
    fit_seconds: dict
    fit_stats: dict
    index_bytes: int
    replayed: dict  # variant -> Served
    real: dict  # PolyDom variant -> Served, on the items in ``real_items``
    real_items: np.ndarray  # positions among the held-out items
    real_wall: dict  # PolyDom variant -> (n_budgets, len(real_items)) seconds of each whole answer
    lookup_seconds: float
    round_trip: bool
    decode_seconds: np.ndarray | None = None  # each held-out image's decode, where they came encoded
    decode_fit: object = None  # the loaded classifier's decode cost fit
    stages: dict = field(default_factory=dict)
    machine: str = ""
    wall_seconds: float = 0.0
    report: str = ""


def _log(message: str) -> None:
    print(f"polydom demo: {message}", file=sys.stderr, flush=True)


def stamped_log(prefix: str = "polydom demo: "):
    """``log(message)``: a line on stderr with ``prefix`` and the seconds since this call."""
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"{prefix}[{time.perf_counter() - started:6.0f} s] {message}", file=sys.stderr, flush=True)

    return log


def run_demo(out, *, dataset: str = "digits", quick: bool = False, n_jobs: int | None = -1, cache_dir=None,
             random_state: int = 0, progress: bool | None = True, settings: DemoSettings | None = None) -> DemoResult:
    """Run the demo and write ``out/report.md``.

    Parameters
    ----------
    out : path
        Output directory: ``report.md`` and ``index/`` (the PolyDom classifier as an LMDB index).
    dataset : {"digits", "fashion-mnist", "photos"}, default "digits"
    quick : bool, default False
        A smoke test: few images, features and budgets.
    n_jobs : int, default -1
        Parallel workers for extraction and training.
    cache_dir : path, optional
        Feature, cost and training cache shared by the two fits (default ``out/cache``).
    random_state : int, default 0
        The data drawn and the learners' seeds.
    progress : bool or None, default True
        The classifier's progress lines.
    settings : DemoSettings, optional
        Instead of :func:`demo_settings` of ``dataset`` and ``quick``.

    Returns
    -------
    DemoResult
    """
    from threadpoolctl import threadpool_limits

    settings = settings or demo_settings(dataset, quick)
    # Parallelism is over images and feature sets; BLAS threads on top of joblib workers
    # oversubscribe the cores (a 15 ms logistic regression took over a second that way).
    with threadpool_limits(1), warnings.catch_warnings():  # _run's warning filters end with it
        return _run(os.fspath(out), settings, n_jobs, cache_dir, random_state, progress)


def _run(out: str, settings: DemoSettings, n_jobs, cache_dir, random_state, progress) -> DemoResult:
    import polydom
    from polydom.featurizers import resolve_features
    from polydom.index.protocol import ExtrapolationWarning

    from . import report
    from .evaluation import lookup_latency

    started = time.perf_counter()
    stages = {}
    os.makedirs(out, exist_ok=True)
    resolve_features(settings.features)  # an unknown name fails before any work

    t = time.perf_counter()
    _log(f"making the {settings.dataset} images")
    data = load_demo_data(settings.dataset, sides=settings.sides, train_per_class=settings.train_per_class,
                          held_out_per_class=settings.held_out_per_class, n_train=settings.n_train,
                          n_held_out=settings.n_held_out, random_state=random_state)
    train_images = [data.images[i] for i in data.train]
    test_images = [data.images[i] for i in data.test]
    y_train, y_test = data.labels[data.train], data.labels[data.test]
    sizes = data.sizes(data.test)
    ranges, range_names = size_ranges(sizes)
    if settings.encoded:  # as a service receives them: JPEG files, decoded inside the budget
        train_images = [_jpeg(im) for im in train_images]
        test_images = [_jpeg(im) for im in test_images]
        data.images = None  # the arrays are no longer needed; at natural sizes they are large
    stages["make the images"] = time.perf_counter() - t
    _log(f"{settings.dataset}: {len(data.train)} training and {len(data.test)} held-out images, "
         f"{len(settings.features)} features")

    cache = cache_dir if cache_dir is not None else os.path.join(out, "cache")
    fitted, fit_seconds, fit_stats = _fit_variants(settings, train_images, y_train, data.pictures[data.train], cache,
                                                   n_jobs, random_state, progress)
    stages["fit"] = sum(fit_seconds.values())
    # Held-out images larger than every training image extrapolate the cost curves; the report's
    # late shares show what that costs, one warning per index and pass would only repeat it.
    warnings.simplefilter("ignore", ExtrapolationWarning)

    t = time.perf_counter()
    _log("saving the index and loading it back")
    index_dir = os.path.join(out, "index")
    fitted[DEFAULT].save(index_dir)
    loaded = polydom.CostSensitiveClassifier.load(index_dir)
    index_bytes = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(index_dir) for f in files)
    stages["save and load"] = time.perf_counter() - t

    t = time.perf_counter()
    held, decode_seconds = _time_held_out(test_images, settings, progress)
    _log(f"held-out features timed in {time.perf_counter() - t:.0f} s")
    stages["held-out features (one at a time)"] = time.perf_counter() - t

    t = time.perf_counter()
    budgets = np.asarray(settings.budgets, dtype=float)
    serving = {**fitted, DEFAULT: loaded}  # the default served as deployed: from the index on disk
    replayed, round_trip = _serve_replayed(serving, fitted[DEFAULT], held, sizes, y_test, budgets, decode_seconds)
    stages["serve, replayed"] = time.perf_counter() - t

    t = time.perf_counter()
    rng = np.random.default_rng(random_state + 1)
    real_items = np.sort(np.concatenate([rng.permutation(np.flatnonzero(ranges == r))[:settings.real_per_range]
                                         for r in range(len(range_names))]))
    real, real_wall = {}, {}
    for name, clf in serving.items():
        if name.startswith(DEFAULT):
            _log(f"serving {name} for real: {len(real_items)} images x {len(budgets)} budgets, features computed now")
            real[name], real_wall[name] = _serve_for_real(clf.server(), [test_images[i] for i in real_items],
                                                          y_test[real_items], budgets)
    stages["serve, for real"] = time.perf_counter() - t

    _log("timing lookups and writing the report")
    q = rng.integers(len(sizes), size=2000)
    lookup = lookup_latency(loaded.index_, sizes[q], rng.choice(budgets, 2000))
    result = DemoResult(
        settings=settings, out=out, classes=data.classes, n_train=len(data.train), held_out_sizes=sizes,
        held_out_pictures=data.pictures[data.test], ranges=ranges, range_names=range_names,
        chance=float(np.mean(y_test == np.bincount(y_train).argmax())), fit_seconds=fit_seconds,
        fit_stats=fit_stats, index_bytes=index_bytes, replayed=replayed, real=real, real_items=real_items,
        real_wall=real_wall, lookup_seconds=float(lookup["lookup"]), round_trip=round_trip, stages=stages,
        decode_seconds=decode_seconds, decode_fit=loaded._state().decode_fit,
        machine=f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    result.wall_seconds = time.perf_counter() - started
    result.report = report.write_report(os.path.join(out, "report.md"), result)
    return result


def _jpeg(array) -> bytes:
    """``array`` as JPEG bytes (quality 90), as a camera or an upload would hand it over."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def _decoded(items) -> tuple[list, np.ndarray]:
    """Each encoded item decoded, one after another, and the wall seconds each decode took."""
    from polydom.featurizers.sources import decode_image

    arrays, seconds = [], np.zeros(len(items))
    for i, item in enumerate(items):
        start = time.perf_counter()
        arrays.append(decode_image(item, index=i))
        seconds[i] = time.perf_counter() - start
    return arrays, seconds


class _Replayable:
    """What :func:`~polydom.demo.evaluation.serve_grid` reads of a classifier, with the planner of
    a :class:`~polydom.serving.planner.Server`: the grid learns guards as that server would."""

    def __init__(self, clf, planner):
        self.planner_, self.feature_columns_, self.feature_names_ = planner, clf.feature_columns_, clf.feature_names_
        self._policies = clf._policies


def _time_held_out(test_images, settings, progress):
    """Compute and time every feature of every held-out image, one image at a time (files decoded
    first, their decode timed): ``(the feature matrix with its times, decode seconds or None)``."""
    from polydom.classifier.extraction import extract_features
    from polydom.classifier.progress import ProgressLog
    from polydom.featurizers import resolve_features

    _log(f"computing and timing every feature of the {len(test_images)} held-out images, one at a time")
    arrays, decode_seconds = _decoded(test_images) if settings.encoded else (test_images, None)
    plog = ProgressLog(bool(progress), label="polydom demo")
    held = extract_features(arrays, resolve_features(settings.features), n_jobs=None,
                            progress=plog.counter("timing the held-out images", len(arrays), "images"))
    return held, decode_seconds


def _fit_variants(settings, train_images, y_train, groups, cache, n_jobs, random_state, progress):
    """Fit every variant of :data:`BACKENDS` on the training images: ``(classifiers, fit seconds,
    fit stats)`` by variant name."""
    import polydom

    fitted, fit_seconds, fit_stats = {}, {}, {}
    for name, changes in BACKENDS.items():
        _log(f"fitting {name}")
        clf = polydom.CostSensitiveClassifier(
            features=list(settings.features), selection=polydom.Selection(**changes.get("selection", {})),
            serving=polydom.Serving(**changes.get("serving", {})), cache_dir=cache, n_jobs=n_jobs,
            random_state=random_state, progress=progress)
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", polydom.PolydomWarning)  # the fit stats keep the tallies
            clf.fit(train_images, y_train, groups=groups)
        fit_seconds[name] = time.perf_counter() - t
        fitted[name], fit_stats[name] = clf, dict(clf.fit_stats_)
        _log(f"{name} fitted in {fit_seconds[name]:.1f} s")
    return fitted, fit_seconds, fit_stats


def _serve_replayed(serving: dict, before_saving, held, sizes, y_test, budgets, decode_seconds):
    """Serve every held-out item at every budget on its recorded times, by each variant and by the
    default before it was saved: ``(Served by variant, whether the loaded index served exactly what
    the fitted classifier served)``."""
    from .evaluation import serve_grid

    replayed, keys = {}, {}
    for name, clf in [*serving.items(), ("before saving", before_saving)]:
        _log(f"serving {name} on the replayed times ({len(sizes)} images x {len(budgets)} budgets)")
        # A server learns its guards from the requests it serves; here from the replayed ones.
        grid = serve_grid(_Replayable(clf, clf.server().planner), held.X, held.seconds, sizes, y_test, budgets,
                          cpu_seconds=held.cpu_seconds, decode_seconds=decode_seconds)
        late = grid.measured > budgets[:, None]
        plan = clf.planner_.plan  # a served set's features (the steps they share are not features)
        used = [[plan(int(key)).names for key in row] for row in grid.keys]
        replayed[name], keys[name] = Served(grid.correct & ~late, late, used), grid.keys
    round_trip = bool(np.array_equal(keys[DEFAULT], keys.pop("before saving")))
    replayed.pop("before saving")
    return replayed, round_trip


def _serve_for_real(server, images, y, budgets) -> tuple[Served, np.ndarray]:
    """Each image served at each budget with its features computed now, one request at a time."""
    correct = np.zeros((len(budgets), len(images)), dtype=bool)
    late = np.zeros_like(correct)
    idle = np.zeros_like(correct)
    wall = np.zeros(correct.shape)
    used = []
    for b, budget in enumerate(budgets):
        row = []
        for i, image in enumerate(images):
            start = time.perf_counter()
            (exp,) = server.explain([image], budget=float(budget))
            wall[b, i] = time.perf_counter() - start
            late[b, i] = exp.measured_cost > budget
            idle[b, i] = not exp.computed
            correct[b, i] = exp.label == y[i] and not late[b, i]
            row.append(tuple(exp.features))
        used.append(row)
    return Served(correct, late, used, idle), wall
