"""Feature matrices: every feature of every item computed once, timed per feature, cached on disk.

Training needs all features of all items (each feature set's columns are sliced from this one
matrix), and serving experiments need each feature's measured time on each item. Both come from
one pass, parallel over items with joblib. A cache directory keeps the result between runs under
a fingerprint of the images, the feature definitions (their names, dimensions and the source of
the modules that define them), the versions of the imaging libraries and the machine (the times
are this machine's), so changing any of those recomputes instead of serving stale features.
"""

from __future__ import annotations

import hashlib
import math
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from polydom.featurizers import Feature, FeatureError, Step, validate_image, with_steps
from polydom.featurizers.provenance import source_digest

__all__ = ["FeatureMatrix", "extract_features", "feature_fingerprint", "images_fingerprint", "items_to_time",
           "machine_fingerprint", "write_atomically"]

_FORMAT = b"polydom-feature-matrix-v1"


@dataclass(frozen=True)
class FeatureMatrix:
    """All features of a collection of images.

    Attributes
    ----------
    X : ndarray of shape (n_items, n_columns), float64
        Row ``i`` holds every feature of item ``i``, each in its column range.
    columns : dict of str to slice
        Each feature's column range, in feature order.
    seconds : ndarray of shape (n_items, n_features), float64
        Wall time of each feature on each item (validation of the image not included). Taken
        while ``n_jobs`` workers shared the machine when computed in parallel.
    cached : bool
        Whether the matrix came from the cache.
    cpu_seconds : ndarray of shape (n_items, n_features), optional
        The computing thread's CPU time of the same calls: the feature's own work, which other
        processes' preemptions do not lengthen. None from caches written before it was kept.
    workers : int, optional
        How many workers computed the items side by side (1: one after another), so whether
        the times were taken while workers shared the machine. None from caches written
        before it was kept.
    """

    X: np.ndarray
    columns: dict
    seconds: np.ndarray
    cached: bool = False
    cpu_seconds: np.ndarray | None = None
    workers: int | None = 1

    @property
    def names(self) -> tuple[str, ...]:
        """Feature names, in column order."""
        return tuple(self.columns)


def feature_fingerprint(features: Sequence[Feature]) -> str:
    """A digest of the feature definitions and the libraries they run on."""
    h = hashlib.sha256(_FORMAT)
    for f in features:
        fn = getattr(f.function, "func", f.function)
        h.update(repr((f.name, f.dimension, tuple(f.requires), getattr(fn, "__module__", ""),
                       getattr(fn, "__qualname__", ""))).encode())
        h.update(source_digest(f.function).encode())
    for name in ("numpy", "scipy", "skimage", "PIL"):
        module = sys.modules.get(name)
        h.update(f"{name}={getattr(module, '__version__', '-')}".encode())
    return h.hexdigest()


def images_fingerprint(images: Sequence[np.ndarray]) -> str:
    """A digest of the images' shapes, dtypes and pixels."""
    h = hashlib.sha256()
    for image in images:
        a = np.ascontiguousarray(image)
        h.update(repr((a.shape, a.dtype.str)).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def machine_fingerprint() -> str:
    """What makes measured times this machine's: its name, architecture, cores and Python."""
    return repr((platform.node(), platform.machine(), platform.processor(), os.cpu_count(), sys.version))


def items_to_time(features, images, steps: bool | None) -> list:
    """The items a timing pass computes: ``features`` as given (``steps=False``), with every step
    they require (True), or with those that do work on ``images`` (None,
    ``featurizers.with_steps``)."""
    return list(features) if steps is False else with_steps(features, None if steps else images)


def _extract_chunk(features: Sequence[Feature], widths: Sequence[int], chunk):
    """Rows, per-feature wall times and CPU times of ``chunk`` = [(index, image), ...] (runs in a worker)."""
    clock, cpu = time.perf_counter, time.thread_time
    rows = np.empty((len(chunk), sum(widths)))
    seconds = np.empty((len(chunk), len(features)))
    cpu_seconds = np.empty((len(chunk), len(features)))
    for r, (index, image) in enumerate(chunk):
        array = validate_image(image, index=index)
        prepared: dict = {}  # the step items' outputs, computed (and timed) once for the features after them
        at = 0
        for j, (feature, width) in enumerate(zip(features, widths)):
            # A feature reads what the step items prepared; a step that is no item here it
            # computes itself, in its own time, as serving's cost model then assumes.
            given = prepared if isinstance(feature, Step) else dict(prepared)
            start, start_cpu = clock(), cpu()
            vector = feature.evaluate(array, index=index, prepared=given)
            seconds[r, j] = clock() - start
            cpu_seconds[r, j] = cpu() - start_cpu
            if vector.shape[0] != width:
                raise FeatureError(
                    f"feature {feature.name!r} on item {index} returned {vector.shape[0]} values, but "
                    f"{width} on item 0; a feature's length must not depend on the image",
                    feature=feature.name, index=index,
                )
            rows[r, at : at + width] = vector
            at += width
    return rows, seconds, cpu_seconds


def _widths(features: Sequence[Feature], first) -> list[int]:
    array = validate_image(first, index=0)
    prepared: dict = {}
    return [f.dimension if f.dimension is not None else len(f.evaluate(array, index=0, prepared=prepared))
            for f in features]


def _cache_path(cache_dir, images, features) -> str:
    h = hashlib.sha256(_FORMAT)
    for part in (feature_fingerprint(features), images_fingerprint(images), machine_fingerprint()):
        h.update(part.encode())
    return os.path.join(os.fspath(cache_dir), f"features-{h.hexdigest()[:32]}.npz")


def _read_cache(path: str, n: int, names: Sequence[str], widths: Sequence[int]):
    try:
        with np.load(path, allow_pickle=False) as data:
            X, seconds = data["X"], data["seconds"]
            cpu_seconds = data["cpu_seconds"] if "cpu_seconds" in data.files else None
            workers = int(data["workers"]) if "workers" in data.files else None
            stored_names = [str(s) for s in data["names"]]
            stored_widths = data["widths"].tolist()
    except (OSError, KeyError, ValueError, TypeError):
        return None
    if stored_names != list(names) or stored_widths != list(widths) or X.shape != (n, sum(widths)):
        return None
    if seconds.shape != (n, len(names)) or (cpu_seconds is not None and cpu_seconds.shape != seconds.shape):
        return None
    if workers is not None and workers < 1:
        return None
    return X, seconds, cpu_seconds, workers


def write_atomically(path: str, write) -> None:
    """Write a cache file whole or not at all: ``write(binary file)`` fills a temporary file
    beside ``path``, which then replaces it (readers see the old file or the whole new one)."""
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".polydom-", suffix=os.path.splitext(path)[1], dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _write_cache(path: str, X, seconds, cpu_seconds, names, widths, workers: int = 1) -> None:
    write_atomically(path, lambda fh: np.savez(fh, X=X, seconds=seconds, cpu_seconds=cpu_seconds,
                                               names=np.array(list(names)), widths=np.array(widths, dtype=np.int64),
                                               workers=np.int64(workers)))


def extract_features(
    images: Sequence,
    features: Sequence[Feature],
    *,
    n_jobs: int | None = None,
    cache_dir=None,
    progress: bool | None = None,
    steps: bool | None = None,
) -> FeatureMatrix:
    """Compute every feature of every image, once.

    Parameters
    ----------
    images : sequence of array_like
        Valid images (see :func:`polydom.featurizers.validate_image`).
    features : sequence of Feature (and Step)
        In order. A step item (``featurizers.Step``) is computed once per image, timed in its
        own column of ``seconds`` and adds no columns to ``X`` (``columns`` gives it an empty
        range); the features after it read its output.
    steps : bool, optional
        Add the steps the features require before them (``featurizers.with_steps``): True all
        of them, False none (the items are ``features`` as given), None (default) those that do
        work on these images (``grey`` on colour images).
    n_jobs : int, optional
        Items are split into chunks computed in parallel through joblib (``-1``: all cores).
    cache_dir : path, optional
        Read the matrix from, or write it to, ``cache_dir/features-<fingerprint>.npz``.
    progress : bool or callable, optional
        A tqdm bar over the items; ``None`` shows it on a terminal only. A callable is called
        as ``progress(done, total)`` after every chunk of items instead (plain log lines).

    Returns
    -------
    FeatureMatrix

    Raises
    ------
    TypeError, ValueError
        An invalid image, named by its position.
    FeatureError
        A feature failed or returned a bad vector, naming the feature and the item.
    """
    images = list(images)
    if not images:
        raise ValueError("no images: at least one is required")
    features = items_to_time(features, images, steps)
    names = [f.name for f in features]
    widths = _widths(features, images[0])
    columns, at = {}, 0
    for name, width in zip(names, widths):
        columns[name] = slice(at, at + width)
        at += width
    path = _cache_path(cache_dir, images, features) if cache_dir is not None else None
    if path is not None and os.path.exists(path):
        hit = _read_cache(path, len(images), names, widths)
        if hit is not None:
            return FeatureMatrix(hit[0], columns, hit[1], cached=True, cpu_seconds=hit[2], workers=hit[3])

    from joblib import Parallel, delayed, effective_n_jobs

    workers = 1 if n_jobs in (None, 1) else max(1, effective_n_jobs(n_jobs))
    # One image after another, chunks of at most a twentieth of the images: a report per chunk.
    size = max(1, math.ceil(len(images) / (4 * workers))) if workers > 1 else max(1, min(32, math.ceil(len(images) / 20)))
    items = list(enumerate(images))
    chunks = [items[i : i + size] for i in range(0, len(items), size)]
    bar, report = None, progress if callable(progress) else None
    if progress is not False and report is None:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(images), desc="computing features", unit="image",
                   disable=None if progress is None else False, file=sys.stderr)
    rows, secs, cpus = [], [], []
    try:
        if workers == 1:
            results = (_extract_chunk(features, widths, chunk) for chunk in chunks)
        else:
            results = Parallel(n_jobs=n_jobs, return_as="generator")(
                delayed(_extract_chunk)(features, widths, chunk) for chunk in chunks
            )
        for (r, s, c), chunk in zip(results, chunks):
            rows.append(r)
            secs.append(s)
            cpus.append(c)
            if bar is not None:
                bar.update(len(chunk))
            if report is not None:
                report(sum(len(part) for part in rows), len(images))
    finally:
        if bar is not None:
            bar.close()
    X = np.concatenate(rows)
    seconds, cpu_seconds = np.concatenate(secs), np.concatenate(cpus)
    if path is not None:
        _write_cache(path, X, seconds, cpu_seconds, names, widths, workers)
    return FeatureMatrix(X, columns, seconds, cpu_seconds=cpu_seconds, workers=workers)

