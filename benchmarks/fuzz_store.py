"""Fuzz the storage layer: damage a saved index many ways and see how each load ends.

A small index with real models (logistic regressions) is saved once; each case copies it,
damages the copy one way, then -- in a forked child, with a time limit -- loads it, answers a
fixed set of queries, loads and runs every candidate's model, inspects it, saves it elsewhere
and loads that copy again. The outcome of each case is one of:

* ``correct`` -- every answer and every model's predictions equal the undamaged index's;
* ``clean error`` -- a ``polydom.PolydomError`` (the storage layer noticed);
* ``wrong`` -- it loaded, but an answer or a model differs (a silent wrong answer);
* ``other error`` -- an exception outside polydom's hierarchy escaped;
* ``signal`` -- the child died of a signal (SIGBUS, SIGSEGV, ...);
* ``hang`` -- it did not finish within the time limit and was killed.

It also counts children whose peak memory exceeded 512 MB. Damage modes, in turn:

``bytes``
    1 to 16 consecutive random bytes at a random offset of ``data.mdb``.
``header``
    1 to 4 random bytes among the first 48 of a random page (page header, node pointers, the
    first node headers) -- the damage that can point LMDB outside its file.
``truncate``
    ``data.mdb`` cut to a random length.
``array``
    One stored array crafted (an element set to an extreme value, or its recorded dtype or
    shape changed), the state checksum recomputed so it is valid.
``meta``
    One metadata entry crafted (NaN, negative or reversed values, deep nesting, duplicates),
    the state checksum recomputed.
``model``
    One candidate's model payload crafted (random edits, deep nesting, an allocation bomb, a huge array
    header, a non-estimator, an oversized schema), its SHA-256 recomputed.

    python benchmarks/fuzz_store.py --cases 600 --seed 0 --label after

Prints the counts and writes them, under ``--label``, into ``benchmarks/results/fuzz_store.md``
(other labels' sections are kept, so a run before a fix and one after sit side by side).
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import os
import pathlib
import random
import re
import resource
import select
import shlex
import shutil
import signal
import sys
import tempfile
import time
import zipfile

import lmdb
import numpy as np
from sklearn.linear_model import LogisticRegression

import polydom
from polydom.index.storage import modelcodec, records

MODES = ("bytes", "header", "truncate", "array", "meta", "model")
OUTCOMES = ("correct", "clean error", "wrong", "other error", "signal", "hang")
RESULTS = pathlib.Path(__file__).resolve().parent / "results" / "fuzz_store.md"
PAGE = 4096
WIDTH = 3


# ------------------------------------------------------------------------------ the index


def build_index(seed: int):
    """A 4-feature index whose every trained set has a logistic regression, and its data."""
    rng = np.random.default_rng(seed)
    n = 4
    X = rng.normal(size=(60, n * WIDTH))
    y = (X @ rng.normal(size=n * WIDTH) > 0).astype(int)
    names = [f"f{i}" for i in range(n)]
    costs = {f: [float(rng.uniform(0, 2)), float(rng.uniform(0, 1))] for f in names}

    def columns(mask):
        cols = [i * WIDTH + j for i in range(n) if mask >> i & 1 for j in range(WIDTH)]
        return X[:, cols or [0]]

    def expand(features):
        mask = sum(1 << names.index(f) for f in features)
        model = LogisticRegression().fit(columns(mask), y)
        return polydom.Expansion(0.5 + 0.1 * len(features) + 0.01 * model.score(columns(mask), y), model)

    return polydom.build(costs, expand), columns


def observe(index, columns, queries, keys):
    """Everything a user sees: answers, and each model's class probabilities."""
    answers = [tuple(index.lookup(n, c)[:4]) for n, c in queries]
    models = {}
    for key in keys:
        model = index.models.get(key)
        models[key] = None if model is None else np.asarray(model.predict_proba(columns(key))).tobytes()
    return answers, models


# ------------------------------------------------------------------------------ damage


def _version(path: pathlib.Path) -> pathlib.Path:
    return path / os.readlink(path / "current")


def _edit(env_dir: pathlib.Path, db: bytes, key: bytes, value: bytes, *, fix_state=False, fix_model=False):
    env = lmdb.open(str(env_dir), max_dbs=4, lock=False)
    try:
        with env.begin(write=True) as txn:
            txn.put(key, value, db=env.open_db(db, txn=txn))
            if fix_model:
                txn.put(key, modelcodec.digest(value), db=env.open_db(b"checksums", txn=txn))
            if fix_state:
                meta = dict(txn.cursor(db=env.open_db(b"meta", txn=txn)))
                arrays = dict(txn.cursor(db=env.open_db(b"arrays", txn=txn)))
                txn.put(records.STATE_DIGEST_KEY, records.state_digest(meta, arrays), db=env.open_db(b"checksums", txn=txn))
    finally:
        env.close()


def _records(env_dir: pathlib.Path, db: bytes) -> dict:
    env = lmdb.open(str(env_dir), max_dbs=4, lock=False, readonly=True)
    try:
        with env.begin() as txn:
            return dict(txn.cursor(db=env.open_db(db, txn=txn)))
    finally:
        env.close()


def damage_bytes(rng, data: pathlib.Path) -> str:
    raw = bytearray(data.read_bytes())
    length = rng.randint(1, 16)
    at = rng.randrange(0, len(raw) - length)
    raw[at : at + length] = bytes(rng.randrange(256) for _ in range(length))
    data.write_bytes(bytes(raw))
    return f"{length} bytes at {at}"


def damage_header(rng, data: pathlib.Path) -> str:
    raw = bytearray(data.read_bytes())
    page = rng.randrange(len(raw) // PAGE)
    spots = sorted(rng.sample(range(48), rng.randint(1, 4)))
    for s in spots:
        raw[page * PAGE + s] = rng.randrange(256)
    data.write_bytes(bytes(raw))
    return f"page {page} offsets {spots}"


def damage_truncate(rng, data: pathlib.Path) -> str:
    size = data.stat().st_size
    keep = rng.choice([rng.randrange(size), rng.randrange(size - PAGE, size), rng.randrange(0, 3 * PAGE)])
    os.truncate(data, keep)
    return f"truncated to {keep} of {size}"


_EXTREMES = [-1, -(2**62), 2**62, 2**63 - 1, 10**6, float("nan"), float("inf"), -float("inf"), -0.5, 1.5, 1e308, 0]


def damage_array(rng, vdir: pathlib.Path) -> str:
    meta = _records(vdir, b"meta")
    arrays = _records(vdir, b"arrays")
    info = json.loads(meta[records.STORE_KEY.encode()])
    name = rng.choice(sorted(info["arrays"]))
    spec = info["arrays"][name]
    kind = rng.random()
    if kind < 0.7 or not arrays[name.encode()]:
        arr = np.frombuffer(arrays[name.encode()], dtype=spec["dtype"]).copy()
        if not len(arr):
            arr = np.zeros(1, dtype=spec["dtype"])
            spec["shape"] = [1]
        value = rng.choice(_EXTREMES)
        i = rng.randrange(len(arr))
        try:
            arr[i] = value
        except (OverflowError, ValueError):
            arr[i] = -1
        _edit(vdir, b"arrays", name.encode(), arr.tobytes(), fix_state=True)
        info["arrays"][name] = spec
        _edit(vdir, b"meta", records.STORE_KEY.encode(), json.dumps(info).encode(), fix_state=True)
        return f"{name}[{i}] = {value!r}"
    if kind < 0.85:
        spec = dict(spec, shape=rng.choice([[2**62, 0], [0, 2**62], [-1], [len(arrays[name.encode()]) // 8, 1, 1]]))
    else:
        spec = dict(spec, dtype=rng.choice(["<i4", "|V8", "<c16", "|O", "<M8[s]", ">f8", "|b1"]))
    info["arrays"][name] = spec
    _edit(vdir, b"meta", records.STORE_KEY.encode(), json.dumps(info).encode(), fix_state=True)
    return f"{name} spec {spec}"


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def damage_meta(rng, vdir: pathlib.Path) -> str:
    meta = _records(vdir, b"meta")
    entry = rng.choice(sorted(k.decode() for k in meta))
    raw = meta[entry.encode()].decode()
    choices = [
        ("NaN", "NaN"), ("neg", "-1"), ("huge", "1e308"), ("deep", _deep(100_000)), ("list", "[]"),
        ("str", '"x"'), ("null", "null"),
    ]
    if entry == "costs":
        choices += [
            ("negative costs", json.dumps([[-1.0, 0.5]] * len(json.loads(raw)))),
            ("long curves", json.dumps([[1.0] * 20_000] * len(json.loads(raw)))),
        ]
    if entry == "domain":
        choices += [("reversed", "[10.0, 1.0]"), ("nan", "[NaN, 1]"), ("inf lo", '["inf", "inf"]')]
    if entry == "features":
        n = len(json.loads(raw))
        choices += [("dup", json.dumps(["a"] * n)), ("many", json.dumps([f"g{i}" for i in range(70)]))]
    if entry == records.STORE_KEY:
        info = json.loads(raw)
        choices += [
            ("no format", json.dumps({k: v for k, v in info.items() if k != "format_version"})),
            ("damaged key", raw.replace("format_version", "format_versioN")),
            ("models -1", json.dumps(dict(info, models=-1))),
            ("models huge", json.dumps(dict(info, models=2**70))),
        ]
    label, value = rng.choice(choices)
    _edit(vdir, b"meta", entry.encode(), value.encode(), fix_state=True)
    return f"{entry} := {label}"


def _zip(members: dict, compression=zipfile.ZIP_STORED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return out.getvalue()


def _npy_header(shape) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False, "shape": shape})
    return buf.getvalue()


def crafted_payload(rng, original: bytes) -> tuple[str, bytes]:
    src = zipfile.ZipFile(io.BytesIO(original))
    schema = json.loads(src.read("schema.json"))
    members = {i.filename: src.read(i) for i in src.infolist()}
    kind = rng.choice(["flip", "deep", "bytearray", "npy", "top", "bigschema", "refs", "bomb"])
    if kind == "flip":
        raw = bytearray(original)
        for _ in range(rng.randint(1, 8)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        return kind, bytes(raw)
    if kind == "deep":
        depth = 50_000
        inner = '{"__class__": "list", "__module__": "builtins", "__loader__": "ListNode", "content": ['
        text = inner * depth + "]}" * depth
        return kind, _zip({"schema.json": text})
    if kind == "bytearray":
        bomb = {
            "__class__": "bytearray", "__module__": "builtins", "__loader__": "ConstructorFromReduceNode",
            "content": {"__class__": "tuple", "__module__": "builtins", "__loader__": "TupleNode",
                        "content": [{"__class__": "int", "__module__": "builtins", "__loader__": "JsonNode",
                                     "content": str(1 << 30), "is_json": True}]},
        }
        if rng.random() < 0.5:
            schema.setdefault("content", {}).setdefault("content", {})["bomb"] = bomb
            return kind + " nested", _zip({**members, "schema.json": json.dumps(schema)})
        return kind, _zip({"schema.json": json.dumps({**bomb, "protocol": schema.get("protocol")})})
    if kind == "npy":
        npys = [m for m in members if m.endswith(".npy")]
        name = rng.choice(npys)
        members[name] = _npy_header((1 << 27,)) + b"\0" * 8
        return kind, _zip(members)
    if kind == "top":
        array = {"__class__": "ndarray", "__module__": "numpy", "__loader__": "NdArrayNode", "type": "numpy",
                 "file": "big.npy", "protocol": schema.get("protocol")}
        buf = io.BytesIO()
        np.save(buf, np.zeros(1 << 20))
        return kind, _zip({"schema.json": json.dumps(array), "big.npy": buf.getvalue()}, zipfile.ZIP_DEFLATED)
    if kind == "bigschema":
        padding = " " * (200 << 20)
        return kind, _zip({**members, "schema.json": json.dumps(schema) + padding}, zipfile.ZIP_DEFLATED)
    if kind == "refs":
        npys = [m for m in members if m.endswith(".npy")]
        ref = {"__class__": "ndarray", "__module__": "numpy", "__loader__": "NdArrayNode", "type": "numpy",
               "file": npys[0]}
        schema.setdefault("content", {}).setdefault("content", {})["refs"] = {
            "__class__": "list", "__module__": "builtins", "__loader__": "ListNode", "content": [ref] * 200_000,
        }
        return kind, _zip({**members, "schema.json": json.dumps(schema)}, zipfile.ZIP_DEFLATED)
    # a member that inflates to 256 MB
    npys = [m for m in members if m.endswith(".npy")]
    name = rng.choice(npys)
    z = io.BytesIO()
    with zipfile.ZipFile(z, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for m, data in members.items():
            if m != name:
                out.writestr(m, data)
        with out.open(name, "w", force_zip64=True) as fh:
            fh.write(_npy_header((1 << 25,)))
            block = b"\0" * (1 << 20)
            for _ in range(1 << 8):
                fh.write(block)
    return kind, z.getvalue()


def damage_model(rng, vdir: pathlib.Path, keys) -> str:
    models = _records(vdir, b"models")
    served = {k.to_bytes(8, "big") for k in keys}
    key = rng.choice(sorted(k for k in models if k in served))
    kind, payload = crafted_payload(rng, models[key])
    _edit(vdir, b"models", key, payload, fix_model=True)
    return f"model {int.from_bytes(key, 'big')}: {kind} ({len(payload)} bytes)"


def damage(rng, mode: str, path: pathlib.Path, keys) -> str:
    vdir = _version(path)
    data = vdir / "data.mdb"
    if mode == "bytes":
        return damage_bytes(rng, data)
    if mode == "header":
        return damage_header(rng, data)
    if mode == "truncate":
        return damage_truncate(rng, data)
    if mode == "array":
        return damage_array(rng, vdir)
    if mode == "meta":
        return damage_meta(rng, vdir)
    return damage_model(rng, vdir, keys)


# ------------------------------------------------------------------------------ one case


def child(path: pathlib.Path, columns, queries, keys, expected, out_fd: int) -> None:
    """Runs in the forked child: load, use, copy; report one outcome line."""
    try:
        index = polydom.load(path)
        seen = observe(index, columns, queries, keys)
        index.summary()
        index.refresh()
        copy = path.parent / (path.name + "-copy")
        index.save(copy)
        again = observe(polydom.load(copy), columns, queries, keys)
        result = ("correct", "") if seen == expected == again else ("wrong", "answers or models differ")
    except polydom.PolydomError as exc:
        result = ("clean error", f"{type(exc).__name__}: {str(exc)[:160]}")
    except BaseException as exc:  # noqa: BLE001 - a fuzzer counts every failure kind
        result = ("other error", f"{type(exc).__name__}: {str(exc)[:120]}")
    os.write(out_fd, json.dumps(result).encode())
    os._exit(0)


def run_case(path, columns, queries, keys, expected, timeout: float, memory_limit: int):
    """Fork, run :func:`child`, wait up to ``timeout``; ``(outcome, detail, peak_rss_mb)``."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        resource.setrlimit(resource.RLIMIT_DATA, (memory_limit, memory_limit))
        try:
            child(path, columns, queries, keys, expected, write_fd)
        finally:
            os._exit(3)
    os.close(write_fd)
    deadline = time.monotonic() + timeout
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            os.kill(pid, signal.SIGKILL)
            _, _, usage = os.wait4(pid, 0)
            os.close(read_fd)
            return "hang", f"killed after {timeout:.0f} s", usage.ru_maxrss / 1024
        ready, _, _ = select.select([read_fd], [], [], min(left, 0.5))
        if ready:
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    os.close(read_fd)
    _, status, usage = os.wait4(pid, 0)
    rss = usage.ru_maxrss / 1024
    if os.WIFSIGNALED(status):
        return "signal", signal.Signals(os.WTERMSIG(status)).name, rss
    if not chunks:
        return "other error", f"exit status {os.WEXITSTATUS(status)} without a report", rss
    outcome, detail = json.loads(b"".join(chunks))
    return outcome, detail, rss


def _vm_data() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


# ------------------------------------------------------------------------------ driver


def run(cases: int, seed: int, timeout: float, modes, workdir: pathlib.Path, verbose: bool) -> dict:
    index, columns = build_index(seed)
    base = workdir / "base"
    index.save(base)
    qrng = random.Random(seed)
    full = index.cost_of(index.features, 100.0)
    queries = [(qrng.uniform(0, 200), qrng.uniform(0, 1.2 * full)) for _ in range(40)] + [(0.0, 0.0), (5.0, 1e9)]
    keys = sorted(index.candidates)
    expected = observe(index, columns, queries, keys)
    memory_limit = _vm_data() + (3 << 30)  # a runaway allocation fails instead of swamping the machine
    rng = random.Random(seed)
    counts = {m: collections.Counter() for m in modes}
    memory = collections.Counter()
    examples: dict = collections.defaultdict(list)
    started = time.perf_counter()
    for i in range(cases):
        mode = modes[i % len(modes)]
        case = workdir / f"case{i}"
        shutil.copytree(base, case, symlinks=True)
        try:
            what = damage(rng, mode, case, keys)
        except Exception as exc:  # noqa: BLE001 - the damage itself failed; count the case as skipped
            what = f"(damage failed: {exc!r})"
        outcome, detail, rss = run_case(case, columns, queries, keys, expected, timeout, memory_limit)
        counts[mode][outcome] += 1
        if rss > 512:
            memory[mode] += 1
        if outcome not in ("correct", "clean error") and len(examples[(mode, outcome)]) < 3:
            examples[(mode, outcome)].append(f"{what} -> {detail}")
        if verbose:
            print(f"{i:5d} {mode:9s} {outcome:12s} {rss:7.0f} MB  {what} -> {detail}", flush=True)
        shutil.rmtree(case, ignore_errors=True)
        shutil.rmtree(workdir / f"case{i}-copy", ignore_errors=True)
    return dict(counts=counts, memory=memory, examples=examples, seconds=time.perf_counter() - started)


def table(result: dict, modes) -> str:
    lines = ["| mode | cases | " + " | ".join(OUTCOMES) + " | peak memory > 512 MB |", "|---" * (len(OUTCOMES) + 3) + "|"]
    total = collections.Counter()
    for mode in modes:
        c = result["counts"][mode]
        total.update(c)
        lines.append(f"| {mode} | {sum(c.values())} | " + " | ".join(str(c[o]) for o in OUTCOMES) + f" | {result['memory'][mode]} |")
    lines.append(f"| **all** | {sum(total.values())} | " + " | ".join(str(total[o]) for o in OUTCOMES)
                 + f" | {sum(result['memory'].values())} |")
    if result["examples"]:
        lines += ["", "Examples of cases that did not end cleanly:", ""]
        for (mode, outcome), items in sorted(result["examples"].items()):
            for item in items:
                lines.append(f"- {mode}, {outcome}: {item}")
    return "\n".join(lines)


def write_section(label: str, body: str) -> None:
    header = "# Storage fuzzing: damaged and crafted indexes\n\n" + (__doc__.split("\n\n")[0]) + "\n"
    text = RESULTS.read_text() if RESULTS.exists() else header
    sections = re.split(r"(?m)^(?=## )", text)
    new = f"## {label}\n\n{body}\n\n"
    if any(s.startswith(f"## {label}\n") for s in sections):
        sections = [new if s.startswith(f"## {label}\n") else s for s in sections]
    else:
        sections.append(new)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("".join(s if s.endswith("\n\n") else s + "\n" for s in sections))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds before a case counts as a hang")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--label", default="latest", help="section of the results file to (re)write")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    modes = tuple(m for m in args.modes.split(",") if m)
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes {sorted(unknown)}; choose from {MODES}")
    with tempfile.TemporaryDirectory(prefix="fuzz_store-") as tmp:
        result = run(args.cases, args.seed, args.timeout, modes, pathlib.Path(tmp), args.verbose)
    command = shlex.join(["python", "benchmarks/fuzz_store.py", *(argv if argv is not None else sys.argv[1:])])
    body = f"`{command}` ({result['seconds']:.0f} s)\n\n" + table(result, modes)
    print(body)
    if not args.no_write:
        write_section(args.label, body)


if __name__ == "__main__":
    main()
