"""``polydom build SPEC --out PATH``: the precompute step of a build script.

SPEC names a Python object as ``module:attribute`` (an importable module) or
``path/to/file.py:attribute``. The object -- or, if it is callable with no arguments, what it
returns -- is a mapping or any object with attributes, in one of two shapes:

**Black box**
    ``costs``: mapping of feature name to cost curve (coefficients, lowest degree first);
    ``expand``: the black box ``expand(frozenset) -> accuracy | polydom.Expansion``;
    optional ``cache_key`` (needed with ``--cache``) and ``domain``.

**Images**
    ``images``: training images; ``labels``: their labels; optional ``features`` (names from
    polydom's registry), ``learners`` (a scikit-learn classifier or a list; ``estimator`` is read
    as one classifier too), ``cv``, ``budget``,
    ``random_state``. An :class:`polydom.CostSensitiveClassifier` measures the features' costs
    on this machine, trains, and saves.

The index is published only when everything succeeded; the exit code is 0 exactly then.
Exit codes follow ``polydom --help``: 1 the build failed (the learner raised, a limit was hit,
publishing failed); 2 a bad SPEC or bad options; 130 interrupted, with the sets trained so far
kept in the ``--cache``. Progress: a counter on a terminal, plain lines otherwise
(:class:`polydom.classifier.progress.TrainingProgress`). The learner's warnings are counted per trained set
and reported in one line at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import math
import os
import sys
import warnings
from collections.abc import Mapping

from polydom.backends import backend_spec, buildable
from polydom.index.ranking import SCORE_MODES

from .errors import SpecError  # noqa: F401 - defined with the package's errors

__all__ = ["configure", "run", "load_spec", "SpecError"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", help="module:attribute or path/to/file.py:attribute naming what to build")
    parser.add_argument("--out", required=True, help="where to publish the index (an LMDB index directory)")
    parser.add_argument("--alpha", type=float, default=1.0, help="approximation factor (default 1: exact)")
    parser.add_argument("--e", default=None,
                        help="monotonicity tolerance: a number >= 0, or auto to measure it on the trained sets "
                             "(default: the library's -- auto, and 0 with --time-budget)")
    parser.add_argument("--scores", choices=SCORE_MODES, default=None,
                        help="what PolyDom ranks trained sets by: the scores as given or their monotone fit "
                             "(default: measured for a black box, monotone for images, as polydom.build and "
                             "CostSensitiveClassifier do)")
    parser.add_argument("--backend", default="polydom", choices=buildable(), help="index backend (default polydom)")
    parser.add_argument("--n0", type=float, default=None, help="expansion size, for the backends that take one (Greedy)")
    parser.add_argument("--n-jobs", type=int, default=None, help="train sets in parallel (-1: all cores)")
    parser.add_argument("--time-budget", type=float, default=None,
                        help="seconds of precompute: lower alpha progressively while time remains")
    parser.add_argument("--cache", default=None, help="resumable expansion cache directory")
    parser.add_argument("--cache-key", default=None, help="cache key (default: the SPEC's cache_key)")
    parser.add_argument("--max-expansions", type=int, default=None, help="refuse to train more sets than this")
    parser.add_argument("--blas-threads", type=int, default=None, metavar="N",
                        help="BLAS threads per process while a black box trains (default 1: a build fits many small "
                             "models, and on a busy machine spinning BLAS threads made one 20 times slower; 0: the "
                             "BLAS library's default). An images SPEC's classifier always fits with one")


def _get(obj, name, default=None):
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def load_spec(spec: str):
    """The object SPEC names (called if it is a zero-argument callable)."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise SpecError(f"SPEC must look like module:attribute or file.py:attribute, got {spec!r}")
    try:
        if module_name.endswith(".py") or os.sep in module_name:
            if not os.path.isfile(module_name):
                raise SpecError(f"SPEC file {module_name!r} does not exist")
            loader_spec = importlib.util.spec_from_file_location("_polydom_build_spec", module_name)
            module = importlib.util.module_from_spec(loader_spec)
            loader_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except SpecError:
        raise
    except Exception as exc:
        raise SpecError(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}") from None
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise SpecError(f"{module_name!r} has no attribute {attr!r}") from None
    if callable(obj) and not isinstance(obj, Mapping) and _get(obj, "costs") is None and _get(obj, "images") is None:
        obj = obj()
    if _get(obj, "costs") is None and _get(obj, "images") is None:
        raise SpecError(f"{spec!r} provides neither costs+expand nor images+labels (see `polydom build --help`)")
    if _get(obj, "costs") is not None and not callable(_get(obj, "expand")):
        raise SpecError(f"{spec!r} provides costs but no callable expand")
    if _get(obj, "images") is not None and _get(obj, "labels") is None:
        raise SpecError(f"{spec!r} provides images but no labels")
    return obj


def run(args: argparse.Namespace) -> int:
    _check_options(args)
    obj = load_spec(args.spec)
    images = _get(obj, "images") is not None
    if images:
        unsupported = [flag for flag, value in (("--time-budget", args.time_budget), ("--max-expansions", args.max_expansions),
                                                ("--n0", args.n0), ("--cache-key", args.cache_key),
                                                ("--blas-threads", args.blas_threads)) if value is not None]
        if unsupported:
            raise SpecError(f"{', '.join(unsupported)} cannot be used with an images SPEC")
    # The classifier keeps its trained sets under CACHE/expansions; a black box right in CACHE.
    cache = None if args.cache is None else (os.path.join(args.cache, "expansions") if images else args.cache)
    # One BLAS thread unless --blas-threads says otherwise (a black box only: an images SPEC refuses
    # the flag, and its classifier's fits hold their pools to FeatureSetLearner.LIBRARY_THREADS).
    with warnings.catch_warnings(record=True) as caught, _blas_threads(1 if args.blas_threads is None else args.blas_threads):
        try:
            index = _build_images(obj, args) if images else _build_black_box(obj, args)
        except KeyboardInterrupt:
            from .interrupts import interrupted

            raise interrupted(cache) from None
    _show(caught)
    try:
        index.save(args.out)
    except (OSError, ValueError, TypeError) as exc:  # polydom's storage errors are among these
        raise type(exc)(f"cannot publish to {args.out!r}: {exc}") from exc
    from polydom.classifier.estimator import CostSensitiveClassifier

    built = index.index_ if isinstance(index, CostSensitiveClassifier) else index  # a classifier carries its index
    stats = built.stats or {}
    summary = ", ".join(f"{k}={stats[k]}" for k in ("trained", "reused", "candidates", "index_entries", "alpha_reached") if k in stats)
    print(f"polydom build: published {args.out} ({summary})", file=sys.stderr)
    return 0


def _blas_threads(n: int):
    """A context limiting BLAS threads to ``n`` (no limit for 0)."""
    if n == 0:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(n, user_api="blas")


def _show(caught) -> None:
    """The build's warnings: the learner's summary as a note line, any other as Python shows it."""
    from polydom.classifier.blackbox import LearnerWarning

    for w in caught:
        if issubclass(w.category, LearnerWarning):
            print(f"polydom build: note: {w.message}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def _check_options(args) -> None:
    """Bad option values are usage errors (exit 2), found before anything is trained."""
    if not args.alpha >= 1.0:
        raise SpecError(f"--alpha must be >= 1, got {args.alpha}")
    if args.e is not None and args.e != "auto":
        try:
            args.e = float(args.e)
        except ValueError:
            raise SpecError(f"--e must be a finite number >= 0 or auto, got {args.e!r}") from None
        if not (args.e >= 0.0 and math.isfinite(args.e)):
            raise SpecError(f"--e must be a finite number >= 0 or auto, got {args.e}")
    if args.n_jobs == 0:
        raise SpecError("--n-jobs must not be 0")
    if args.time_budget is not None and not args.time_budget > 0.0:
        raise SpecError(f"--time-budget must be > 0, got {args.time_budget}")
    if args.max_expansions is not None and args.max_expansions < 1:
        raise SpecError(f"--max-expansions must be >= 1, got {args.max_expansions}")
    if args.blas_threads is not None and args.blas_threads < 0:
        raise SpecError(f"--blas-threads must be >= 0, got {args.blas_threads}")
    if args.scores is not None and args.backend != "polydom":
        raise SpecError(f"--scores ranks PolyDom's trained sets; backend {args.backend!r} has none to rank")
    if args.scores in ("monotone", "bounded") and args.time_budget is not None:
        raise SpecError(f"--scores {args.scores} cannot be combined with --time-budget (a progressive build ranks by "
                        "measured scores)")


def _build_black_box(obj, args):
    import polydom
    from polydom.classifier.blackbox import CountingExpand
    from polydom.classifier.progress import TrainingProgress, sets_in_cache

    cache_key = args.cache_key or _get(obj, "cache_key")
    if args.cache and not cache_key:
        raise SpecError("--cache needs a cache key: give --cache-key or a cache_key in the SPEC")
    common = dict(n_jobs=args.n_jobs, cache=args.cache, cache_key=cache_key if args.cache else None,
                  max_expansions=args.max_expansions)
    domain = _get(obj, "domain")
    if domain is not None:
        common["domain"] = tuple(domain)
    takes = backend_spec(args.backend).options
    if args.time_budget is not None and "alpha" not in takes:
        raise SpecError(f"--time-budget lowers alpha while time remains; backend {args.backend!r} has no alpha")
    options = {} if args.scores is None else {"scores": args.scores}
    if args.e is not None:
        common["e"] = args.e
    if "n0" in takes:
        if args.n0 is None:
            raise SpecError(f"--backend {args.backend} needs --n0 (the size at which costs are compared)")
        options["n0"] = args.n0
    costs = _get(obj, "costs")
    expand = CountingExpand(_get(obj, "expand"))
    progress = TrainingProgress(True, 2 ** len(costs) - sets_in_cache(args.cache, cache_key), label="polydom build")
    try:
        if args.time_budget is not None:
            index = polydom.build_progressive(costs, expand, time_budget=args.time_budget, progress=progress,
                                              **common)
        else:
            requires = _get(obj, "requires")  # a SPEC may name the steps its features share
            index = polydom.build(costs, expand, alpha=args.alpha, backend=args.backend, progress=progress,
                                  **({"requires": requires} if requires is not None else {}), **common, **options)
    except BaseException:
        progress.close(done=False)
        raise
    progress.close()
    expand.tally.report("the black box")
    return index


def _build_images(obj, args):
    import polydom

    selection = dict(alpha=args.alpha, backend=args.backend)
    if args.e is not None:
        selection["e"] = args.e
    if args.scores is not None:
        selection["scores"] = args.scores
    params = dict(selection=polydom.Selection(**selection), n_jobs=args.n_jobs, progress=True)
    if args.cache is not None:
        params["cache_dir"] = args.cache
    for name in ("features", "learners", "cv", "budget", "random_state"):
        value = _get(obj, name)
        if value is not None:
            params[name] = value
    if "learners" not in params and _get(obj, "estimator") is not None:
        params["learners"] = _get(obj, "estimator")
    model = polydom.CostSensitiveClassifier(**params)
    model.fit(_get(obj, "images"), _get(obj, "labels"))
    return model
