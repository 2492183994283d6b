"""Where the black box's feature sets train: in this process, or on a pool of workers (loky's
executor, a Dask client, or joblib's own ``Parallel``), with its large arrays shipped to each
worker once per build (:class:`_Shipper`) and the task function shipped by value (:func:`_runner`).
:func:`_open_pool` picks the engine the caller's ``joblib.parallel_config`` chooses;
:class:`~polydom.expansion.ModelRecorder` drives it.
"""

from __future__ import annotations

import builtins
import copy
import hashlib
import io
import itertools
import os
import queue
import shutil
import sys
import tempfile
import types
import weakref
from collections.abc import Callable
from typing import Any

from .errors import ExpansionError, PolydomError

__all__ = ["OUT_OF_BAND_BYTES"]


def _expand_one(expand: Callable, features: frozenset):
    """The black box on one set; a failure is re-raised naming the set it failed on."""
    try:
        return expand(features)
    except PolydomError:
        raise
    except Exception as exc:
        raise ExpansionError(f"expand({sorted(features)}) raised {type(exc).__name__}: {exc}") from exc


def _failure(features: frozenset, exc: BaseException, remote_traceback: str | None = None) -> BaseException:
    """The error a build raises for a failed set: a polydom error as it is, anything else wrapped
    in an :class:`ExpansionError` naming the set (the worker's traceback added as a note)."""
    if isinstance(exc, PolydomError):
        error = exc
    else:
        error = ExpansionError(f"expand({sorted(features)}) raised {type(exc).__name__}: {exc}")
        error.__cause__ = exc
    if remote_traceback and hasattr(error, "add_note"):
        error.add_note("in the worker:\n" + remote_traceback.rstrip())
    return error


# -- the worker's side ------------------------------------------------------------------------

def _run_chunk(shipped, chunk, start):
    """Run the black box on ``chunk`` in a worker; ``(start, results, failure, seconds)``.

    Shipped by value (see :func:`_runner`): it imports only the standard library, so a worker running
    a plain function never imports polydom. ``shipped`` is ``("direct", expand)`` (threads: the
    object itself) or ``("pickled", stream, buffers, directory)``: the black box pickled with its
    large arrays out of band, each buffer either the data (Dask resolves it) or a key naming a
    file in ``directory`` that this process maps once and keeps for later tasks. Every task
    unpickles a fresh copy (state as the building process had it); only the arrays are shared,
    read-only. A failing set stops the chunk: ``failure`` is ``(index, exception, traceback)``.
    """
    import os
    import pickle
    import sys
    import time
    import traceback

    if shipped[0] == "direct":
        expand = shipped[1]
    else:
        _, stream, buffers, directory = shipped
        if directory is not None:
            state = sys.modules.get("_polydom_worker_buffers")
            if state is None:  # a private registry that lives as long as the worker process
                state = type(sys)("_polydom_worker_buffers")
                state.directory, state.maps = None, {}
                sys.modules["_polydom_worker_buffers"] = state
            if state.directory != directory:
                # Another build: its files are gone or going; let go of theirs (an array still
                # using one keeps it mapped until it is freed).
                state.directory, state.maps = directory, {}
            loaded = []
            for key in buffers:
                view = state.maps.get(key)
                if view is None:
                    import mmap

                    with open(os.path.join(directory, key), "rb") as f:
                        size = os.fstat(f.fileno()).st_size
                        view = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)) if size else memoryview(b"")
                    state.maps[key] = view
                loaded.append(view)
            buffers = loaded
        expand = pickle.loads(stream, buffers=buffers)
    results = []
    began = time.perf_counter()
    for i, features in enumerate(chunk):
        try:
            results.append(expand(features))
        except Exception as exc:
            text = traceback.format_exc()
            try:
                pickle.dumps(exc)
            except Exception:  # an exception that cannot travel: its type and message do
                exc = RuntimeError(f"{type(exc).__name__}: {exc}")
            return start, results, (i, exc, text), time.perf_counter() - began
    return start, results, None, time.perf_counter() - began


def _by_value(function):
    """A copy of ``function`` that cloudpickle ships by value: its module is not importable.

    The copy sees only builtins, so it must import what it uses inside its body.
    """
    copy = types.FunctionType(function.__code__, {"__builtins__": builtins, "__name__": "_polydom_worker"},
                              function.__name__, function.__defaults__)
    copy.__module__ = "_polydom_worker"
    copy.__qualname__ = function.__qualname__
    assert "_polydom_worker" not in sys.modules  # else it would be pickled by reference
    return copy


def _cloudpickle():
    """cloudpickle (standalone, or the copy older joblib releases vendor), or None."""
    try:
        import cloudpickle
    except ImportError:
        try:
            from joblib.externals import cloudpickle
        except ImportError:
            return None
    return cloudpickle


_SHIPPED_RUNNER: list = []


def _runner():
    """The function tasks run: ``_run_chunk`` shipped by value, or -- without cloudpickle, when
    loky pickles by reference too -- as it is (workers then import it from polydom)."""
    if not _SHIPPED_RUNNER:
        _SHIPPED_RUNNER.append(_by_value(_run_chunk) if _cloudpickle() is not None else _run_chunk)
    return _SHIPPED_RUNNER[0]


#: Arrays of at least this many bytes travel out of band, once per build.
OUT_OF_BAND_BYTES = 64 * 1024


class _Shipper:
    """The black box as tasks carry it: pickled with its large arrays out of band.

    A buffer is identified by its address and length while this shipper lives (it holds the
    buffer, so the memory cannot be reused), and checked against a sample of its bytes; a changed
    sample gets a new key. The first time, its content is hashed and shipped: written to a file
    in a private directory (``transport="file"``) or scattered to a Dask cluster (``"dask"``).

    Attributes
    ----------
    data_bytes : int
        Bytes shipped out of band (each buffer once).
    task_bytes : int
        Bytes of pickled black box the tasks carried, all tasks together.
    """

    def __init__(self, expand, transport: str, client=None):
        assert transport in ("file", "dask")
        import pickle

        cloudpickle = _cloudpickle()
        self._pickler = _shipping_pickler(cloudpickle.Pickler if cloudpickle is not None else pickle.Pickler)
        self.expand = expand
        self.transport = transport
        self.client = client
        self.directory = tempfile.mkdtemp(prefix="polydom-ship-") if transport == "file" else None
        self._known: dict[tuple[int, int], tuple[bytes, str, object]] = {}
        self._copies: dict[tuple, tuple[bytes, object, object]] = {}
        self._scattered: dict[str, object] = {}
        self.data_bytes = 0
        self.task_bytes = 0
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.directory, True) if self.directory else None

    def snapshot(self) -> tuple:
        """The black box as it is now, for the tasks of one submission."""
        big = []

        def out_of_band(buffer) -> bool:
            if buffer.raw().nbytes < OUT_OF_BAND_BYTES:
                return True  # in band: small arrays travel with the state
            big.append(buffer)
            return False

        target = io.BytesIO()
        self._pickler(target, self, out_of_band).dump(self.expand)
        stream = target.getvalue()
        keys = [self._key(buffer) for buffer in big]
        if self.transport == "file":
            return ("pickled", stream, keys, self.directory)
        return ("pickled", stream, [self._scattered[k] for k in keys], None)

    def count(self, shipped) -> None:
        """Account for one task carrying ``shipped``."""
        self.task_bytes += len(shipped[1])

    def contiguous(self, array):
        """A contiguous copy of a large strided array (a column slice of a data set), made once:
        only a contiguous array's memory can travel out of band."""
        import numpy as np

        where = (array.__array_interface__["data"][0], array.shape, array.strides, array.dtype.str)
        rows = array[:: max(1, array.shape[0] // 64)] if array.ndim else array
        sample = hashlib.blake2b(np.ascontiguousarray(rows).tobytes(), digest_size=16).digest()
        known = self._copies.get(where)
        if known is None or known[0] != sample:
            known = (sample, np.ascontiguousarray(array), array)  # holding the original pins its address
            self._copies[where] = known
        return known[1]

    def _key(self, buffer) -> str:
        import numpy as np

        raw = buffer.raw()
        octets = np.frombuffer(raw, dtype=np.uint8)
        where = (octets.ctypes.data, octets.size)
        step = max(1, octets.size // 16384)
        sample = hashlib.blake2b(octets[::step].tobytes() + octets[:4096].tobytes() + octets[-4096:].tobytes(),
                                 digest_size=16).digest()
        known = self._known.get(where)
        if known is not None and known[0] == sample:
            return known[1]
        key = hashlib.blake2b(raw, digest_size=20).hexdigest()
        if key not in self._scattered:
            if self.transport == "file":
                path = os.path.join(self.directory, key)
                with open(path + ".part", "wb") as f:
                    f.write(raw)
                os.replace(path + ".part", path)  # a worker never maps a half-written file
                self._scattered[key] = path
            else:
                self._scattered[key] = self.client.scatter(raw.tobytes(), hash=False)
            self.data_bytes += raw.nbytes
        self._known[where] = (sample, key, buffer)  # holding the buffer pins its address
        return key

    def close(self) -> None:
        self._scattered.clear()
        self._known.clear()
        self._copies.clear()
        if self._finalizer is not None:
            self._finalizer()


def _shipping_pickler(base):
    """A pickler class (protocol 5) that sends large strided arrays as contiguous copies, so
    that they too can travel out of band."""

    class ShippingPickler(base):
        def __init__(self, file, shipper: _Shipper, buffer_callback):
            super().__init__(file, protocol=5, buffer_callback=buffer_callback)
            self._shipper = shipper

        def reducer_override(self, obj):
            numpy = sys.modules.get("numpy")
            if (numpy is not None and type(obj) is numpy.ndarray and obj.nbytes >= OUT_OF_BAND_BYTES
                    and not (obj.flags.c_contiguous or obj.flags.f_contiguous) and not obj.dtype.hasobject):
                return self._shipper.contiguous(obj).__reduce_ex__(5)
            parent = getattr(super(), "reducer_override", None)
            return parent(obj) if parent is not None else NotImplemented

    return ShippingPickler


# -- engines ----------------------------------------------------------------------------------

class _FuturesPool:
    """Chunks on a ``concurrent.futures`` executor (loky's, or threads), results as they finish.

    At most ``2 * workers`` tasks are handed to the executor at a time (joblib's pre-dispatch);
    the rest wait here and are handed over as tasks finish. So a cancelled task that never
    started is simply dropped here -- loky's futures are never cancelled (its shutdown fails on a
    cancelled future it has not yet dropped, and leaves its workers running) -- and at most
    ``2 * workers`` tasks run on after a cancellation.
    """

    #: Seconds of work a chunk aims at: well above the per-task cost of dispatch.
    target = 0.02

    def __init__(self, executor, workers: int, shipper: _Shipper | None, on_close: Callable[[], None],
                 acquire: Callable[[], Any] | None = None):
        self.executor = executor
        self._acquire = acquire
        self.workers = workers
        self.shipper = shipper
        self._on_close = on_close
        self._futures: dict[int, Any] = {}  # handed to the executor
        self._backlog: dict[int, tuple] = {}  # waiting here, in submission order
        self._done: queue.Queue = queue.Queue()
        self._tokens = itertools.count()

    def snapshot(self, expand) -> tuple:
        """The black box for the tasks of one submission (and the executor they go to)."""
        if self._acquire is not None:
            # joblib may have replaced its executor since (another joblib call with other
            # settings): take the current one, as joblib.Parallel does at every call.
            self.executor = self._acquire()
        return ("direct", expand) if self.shipper is None else self.shipper.snapshot()

    def submit(self, shipped, chunk: list, start: int) -> int:
        token = next(self._tokens)
        self._backlog[token] = (shipped, chunk, start)
        if self.shipper is not None:
            self.shipper.count(shipped)
        self._dispatch()
        return token

    def submit_many(self, shipped, chunks: list[list], starts: list[int]) -> list[int]:
        return [self.submit(shipped, chunk, start) for chunk, start in zip(chunks, starts)]

    def _dispatch(self) -> None:
        """Hand waiting tasks to the executor while fewer than ``2 * workers`` are there."""
        while self._backlog and len(self._futures) < 2 * self.workers:
            token = next(iter(self._backlog))
            shipped, chunk, start = self._backlog.pop(token)
            future = self.executor.submit(_runner(), shipped, chunk, start)
            self._futures[token] = future
            future.add_done_callback(lambda _, token=token: self._done.put(token))

    def wait(self, block: bool) -> list[tuple[int, Any, BaseException | None]]:
        """``(token, outcome, error)`` of finished tasks; with ``block``, at least one if any runs."""
        out = []
        while not out:
            tokens = []
            if block:
                while self._futures:
                    try:  # a timeout, so that a signal is seen while waiting
                        tokens.append(self._done.get(timeout=0.5))
                        break
                    except queue.Empty:
                        continue
            while True:
                try:
                    tokens.append(self._done.get_nowait())
                except queue.Empty:
                    break
            for token in tokens:
                future = self._futures.pop(token, None)
                if future is None:  # cancelled while it ran
                    continue
                try:
                    out.append((token, future.result(), None))
                except BaseException as exc:  # the engine's own failure (a worker died)
                    out.append((token, None, exc))
            self._dispatch()
            if not block or not self._futures:
                break
        return out

    def cancel(self, tokens) -> None:
        for token in tokens:
            self._backlog.pop(token, None)  # never started
            self._futures.pop(token, None)  # running or queued in the executor: finishes, ignored

    def abort(self) -> None:
        """Drop everything, running tasks included: loky's workers are stopped (joblib starts
        new ones at its next call); threads cannot be, their results are ignored."""
        self._backlog.clear()
        self._futures.clear()
        terminate = getattr(self.executor, "terminate", None)
        if callable(terminate):
            terminate(kill_workers=True)
        else:
            self.executor.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        self.cancel(list(self._backlog) + list(self._futures))
        if self.shipper is not None:
            self.shipper.close()
        self._on_close()


class _DaskPool:
    """Chunks as Dask futures, one ``client.map`` per submission; the finished ones fetched together.

    Results are fetched straight from the workers when they are reachable (the client says so, or
    the scheduler runs on this machine): one hop instead of two through the scheduler, on the path
    between a result and the sets that wait for it.
    """

    target = 0.05

    def __init__(self, client, workers: int, shipper: _Shipper):
        from distributed import as_completed

        self.client = client
        self.workers = workers
        self.shipper = shipper
        self._futures: dict[str, tuple[int, Any]] = {}  # future key -> token, future
        self._finished = as_completed()
        self._tokens = itertools.count()
        direct = getattr(client, "direct_to_workers", None)
        if direct is None:
            address = str(getattr(getattr(client, "scheduler", None), "address", ""))
            direct = address.startswith("inproc") or any(h in address for h in ("127.0.0.1", "localhost", "[::1]"))
        self.direct = bool(direct)

    def snapshot(self, expand) -> tuple:
        return self.shipper.snapshot()

    def submit_many(self, shipped, chunks: list[list], starts: list[int]) -> list[int]:
        futures = self.client.map(_runner(), [shipped] * len(chunks), chunks, starts, pure=False)
        tokens = []
        for future in futures:
            token = next(self._tokens)
            self._futures[future.key] = (token, future)
            tokens.append(token)
            self.shipper.count(shipped)
        self._finished.update(futures)
        return tokens

    def wait(self, block: bool):
        out = []
        while not out:
            finished = []
            for future in self._finished.next_batch(block=block and bool(self._futures)):
                entry = self._futures.pop(future.key, None)
                if entry is None:  # cancelled
                    continue
                if future.status == "finished":
                    finished.append((entry[0], future))
                else:
                    out.append((entry[0], None, future.exception()))
            if finished:
                values = self.client.gather([f for _, f in finished], direct=self.direct)
                out += [(token, value, None) for (token, _), value in zip(finished, values)]
            if not block or not self._futures:
                break
        return out

    def cancel(self, tokens) -> None:
        wanted = set(tokens)
        futures = [f for key, (t, f) in list(self._futures.items()) if t in wanted]
        for future in futures:
            self._futures.pop(future.key, None)
        if futures:
            self.client.cancel(futures)

    def abort(self) -> None:
        self.cancel([t for t, _ in self._futures.values()])  # the scheduler releases running ones too

    def close(self) -> None:
        self.cancel([t for t, _ in self._futures.values()])
        self.shipper.close()


class _JoblibPool:
    """Any other joblib engine: each wave of submissions runs as one ``joblib.Parallel`` call."""

    target = 0.02

    def __init__(self, n_jobs, workers: int):
        self.n_jobs = n_jobs
        self.workers = workers
        self._queued: list[tuple[int, tuple]] = []
        self._running = None
        self._tokens = itertools.count()

    def snapshot(self, expand) -> tuple:
        return ("direct", expand)  # joblib pickles it with each task, as it always did

    def submit(self, shipped, chunk: list, start: int) -> int:
        token = next(self._tokens)
        self._queued.append((token, (shipped, chunk, start)))
        return token

    def submit_many(self, shipped, chunks: list[list], starts: list[int]) -> list[int]:
        return [self.submit(shipped, chunk, start) for chunk, start in zip(chunks, starts)]

    def wait(self, block: bool):
        if not block:
            return []
        from joblib import Parallel, delayed

        while True:
            if self._running is None:
                if not self._queued:
                    return []
                batch, self._queued = self._queued, []
                try:
                    parallel = Parallel(n_jobs=self.n_jobs, return_as="generator_unordered")
                except ValueError:  # joblib < 1.4: in input order
                    parallel = Parallel(n_jobs=self.n_jobs, return_as="generator")
                runner = delayed(_run_chunk)
                self._running = parallel(runner(*args[:2], (token, args[2])) for token, args in batch)
            try:
                (token, start), results, failure, seconds = next(self._running)
            except StopIteration:
                self._running = None
                continue
            return [(token, (start, results, failure, seconds), None)]

    def cancel(self, tokens) -> None:
        cancelled = set(tokens)
        self._queued = [(t, a) for t, a in self._queued if t not in cancelled]
        if self._running is not None:
            self._running.close()  # joblib stops what is still queued
            self._running = None

    def abort(self) -> None:
        self.cancel([t for t, _ in self._queued])

    def close(self) -> None:
        self.cancel([t for t, _ in self._queued])


def _open_pool(n_jobs, expand):
    """The engine ``joblib.parallel_config`` chooses, as a pool; None where it runs one set at a time.

    The engine is the one a ``joblib.Parallel(n_jobs=n_jobs)`` made here would use, configured
    as that call would configure it: for loky, the same reusable executor (same worker
    environment, same memmapping settings), so a build and the caller's own joblib calls share
    warm workers instead of replacing each other's.
    """
    import joblib

    parallel = joblib.Parallel(n_jobs=n_jobs)
    backend = getattr(parallel, "_backend", None)
    kind = type(backend).__name__
    if kind == "SequentialBackend":
        return None
    if kind == "DaskDistributedBackend" and getattr(backend, "client", None) is not None:
        client = backend.client
        workers = max(1, sum(client.ncores().values()))
        return _DaskPool(client, workers, _Shipper(expand, "dask", client))
    if kind == "ThreadingBackend":
        workers = backend.effective_n_jobs(n_jobs)
        if workers == 1:
            return None
        from concurrent.futures import ThreadPoolExecutor

        executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="polydom")
        return _FuturesPool(executor, workers, None, lambda: executor.shutdown(wait=False, cancel_futures=True))
    if kind == "LokyBackend":
        from joblib.parallel import FallbackToBackend

        mine = copy.copy(backend)  # configured here, not the instance a parallel_config shares
        settings = dict(getattr(parallel, "_backend_kwargs", {}))

        def acquire():
            mine.configure(n_jobs=n_jobs, parallel=parallel, **settings)
            return mine._workers

        try:
            workers = mine.configure(n_jobs=n_jobs, parallel=parallel, **settings)
            executor = mine._workers
        except FallbackToBackend:
            return None
        except (AttributeError, TypeError):  # a joblib whose backend is built otherwise
            workers = max(1, joblib.effective_n_jobs(n_jobs))
            return _JoblibPool(n_jobs, workers) if workers > 1 else None
        if workers == 1 or executor is None:
            return None

        def release():
            try:
                mine.terminate()
            except Exception:  # joblib's temporary folder bookkeeping; nothing of ours
                pass

        return _FuturesPool(executor, workers, _Shipper(expand, "file"), release, acquire)
    workers = max(1, joblib.effective_n_jobs(n_jobs))
    return _JoblibPool(n_jobs, workers) if workers > 1 else None


# -- the recorder -----------------------------------------------------------------------------
