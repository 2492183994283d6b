"""index.store under fault injection: damaged pages, crafted records, FIFOs, links, a full file
system, fork inside a transaction. Every case must end in a polydom exception or a correct answer
within a time limit; risky cases run in a forked child, so a signal or a hang fails the test
instead of killing pytest. (Heavy random fuzzing lives in ``benchmarks/fuzz_store.py``.)"""

import io
import json
import os
import random
import resource
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
import zipfile
from pathlib import Path

import lmdb
import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

import polydom
from polydom.index.storage import modelcodec, records

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")

ROOT = Path(__file__).resolve().parents[2]
TIME_LIMIT = 20.0  # seconds; a healthy case takes well under one on a loaded machine
WIDTH = 2


# ------------------------------------------------------------------------------ isolation


def isolated(fn, *args, timeout=TIME_LIMIT, memory=1 << 30):
    """Run ``fn(*args)`` in a forked child; ``(kind, name, detail)`` with kind one of
    ``ok`` (name is the JSON of its result), ``polydom``, ``other``, ``signal`` or ``hang``.

    The child's data segment is capped ``memory`` bytes above the parent's, so a runaway
    allocation fails in the child instead of swamping the machine.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read_fd)
            limit = _data_size() + memory
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
            try:
                result = ["ok", json.dumps(fn(*args)), ""]
            except polydom.PolydomError as exc:
                result = ["polydom", type(exc).__name__, str(exc)]
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                result = ["other", type(exc).__name__, str(exc)[:500]]
            os.write(write_fd, json.dumps(result).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return ("hang", f"no answer within {timeout} s", "")
            if select.select([read_fd], [], [], min(left, 0.2))[0]:
                chunk = os.read(read_fd, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
    finally:
        os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return ("signal", signal.Signals(os.WTERMSIG(status)).name, "")
    return tuple(json.loads(b"".join(chunks))) if chunks else ("other", "no report", "")


def _data_size() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


def expect_polydom(outcome, *names):
    assert outcome[0] == "polydom" and (not names or outcome[1] in names), outcome


# ------------------------------------------------------------------------------ the index


@pytest.fixture(scope="module")
def built():
    """A 4-feature index with a logistic regression per trained set, its data and answers."""
    rng = np.random.default_rng(3)
    n = 4
    X = rng.normal(size=(40, n * WIDTH))
    y = (X @ rng.normal(size=n * WIDTH) > 0).astype(int)
    names = [f"f{i}" for i in range(n)]
    costs = {f: [float(rng.uniform(0, 2)), float(rng.uniform(0, 1))] for f in names}

    def columns(mask):
        return X[:, [i * WIDTH + j for i in range(n) if mask >> i & 1 for j in range(WIDTH)] or [0]]

    def expand(features):
        mask = sum(1 << names.index(f) for f in features)
        model = LogisticRegression().fit(columns(mask), y)
        return polydom.Expansion(0.5 + 0.1 * len(features) + 0.01 * model.score(columns(mask), y), model)

    index = polydom.build(costs, expand, scores="monotone")  # every stored array, the measured scores too
    qrng = random.Random(1)
    full = index.cost_of(index.features, 50.0)
    queries = [(qrng.uniform(0, 100), qrng.uniform(0, 1.2 * full)) for _ in range(30)] + [(0.0, 0.0), (3.0, 1e9)]
    return index, columns, queries


def observe(index, columns, queries):
    """Answers and every candidate's predictions, as JSON-able values."""
    answers = [[sorted(c.features), c.accuracy, c.cost] for c in (index.lookup(n, b) for n, b in queries)]
    predictions = {
        str(key): index.models.get(key).predict_proba(columns(key)).round(12).tolist() for key in sorted(index.candidates)
    }
    return [answers, predictions]


@pytest.fixture
def saved(built, tmp_path):
    path = tmp_path / "idx"
    built[0].save(path)
    return path


def version_dir(path) -> Path:
    return Path(path) / os.readlink(Path(path) / "current")


def load_and_use(path, columns, queries):
    return observe(polydom.load(path), columns, queries)


def expect_correct_or_polydom(outcome, built):
    index, columns, queries = built
    if outcome[0] == "ok":
        assert json.loads(outcome[1]) == json.loads(json.dumps(observe(index, columns, queries))), "a wrong answer"
    else:
        expect_polydom(outcome)


# ------------------------------------------------------------------------------ LMDB pages

PAGE_HEADER = struct.Struct("<QHHHH")
DB = struct.Struct("<IHHQQQQQ")


def _meta(raw: bytes):
    """``(page size, main DB record)`` of the newest meta page."""
    psize = DB.unpack_from(raw, 40)[0]
    newest = max((0, psize), key=lambda at: struct.unpack_from("<Q", raw, at + 144)[0])
    return psize, DB.unpack_from(raw, newest + 88)


def _node_at(raw: bytes, psize: int, pgno: int, i: int) -> int:
    return pgno * psize + struct.unpack_from("<H", raw, pgno * psize + 16 + 2 * i)[0]


def db_leaf(raw: bytes, name: bytes) -> tuple[int, int]:
    """``(page size, root page)`` of a named database whose root is its only leaf."""
    psize, main = _meta(raw)
    main_root = main[7]
    count = (PAGE_HEADER.unpack_from(raw, main_root * psize)[3] - 16) // 2
    for i in range(count):
        at = _node_at(raw, psize, main_root, i)
        ksize = struct.unpack_from("<H", raw, at + 6)[0]
        if raw[at + 8 : at + 8 + ksize] == name:
            record = DB.unpack_from(raw, at + 8 + ksize)
            assert record[2] == 1, "the test index's databases are one leaf each"
            return psize, record[7]
    raise KeyError(name)


def edit_data(path, edit) -> None:
    data = version_dir(path) / "data.mdb"
    raw = bytearray(data.read_bytes())
    edit(raw)
    data.write_bytes(bytes(raw))


# ------------------------------------------------------------------------------ crafting records


def rewrite(path, db: bytes, key: bytes, value: bytes, *, fix_state=False, fix_model=False):
    """Put one record into the published version; recompute the checksums a forger would."""
    env = lmdb.open(str(version_dir(path)), max_dbs=4, lock=False)
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


def read_records(path, db: bytes) -> dict:
    with lmdb.open(str(version_dir(path)), readonly=True, lock=False, max_dbs=4) as env:
        with env.begin() as txn:
            return dict(txn.cursor(db=env.open_db(db, txn=txn)))


def set_array(path, name: str, values=None, *, spec=None):
    info = json.loads(read_records(path, b"meta")[records.STORE_KEY.encode()])
    if values is not None:
        arr = np.asarray(values, dtype=info["arrays"][name]["dtype"])
        rewrite(path, b"arrays", name.encode(), arr.tobytes(), fix_state=True)
        info["arrays"][name]["shape"] = [len(arr)]
    if spec is not None:
        info["arrays"][name] = spec
    rewrite(path, b"meta", records.STORE_KEY.encode(), json.dumps(info).encode(), fix_state=True)


def stored_array(path, name: str) -> np.ndarray:
    info = json.loads(read_records(path, b"meta")[records.STORE_KEY.encode()])
    return np.frombuffer(read_records(path, b"arrays")[name.encode()], dtype=info["arrays"][name]["dtype"]).copy()


# ------------------------------------------------------------------------------ damaged pages


def test_a_value_running_past_the_end_of_the_file_is_a_format_error(built, saved):
    def edit(raw):
        psize, leaf = db_leaf(raw, b"arrays")
        at = _node_at(raw, psize, leaf, 0)
        raw[at : at + 4] = struct.pack("<HH", 0xFFFF, 0x00FF)  # a 16 MB inline value

    edit_data(saved, edit)
    expect_polydom(isolated(load_and_use, saved, *built[1:]), "IndexFormatError")


def test_node_pointers_past_the_end_of_the_file_are_a_format_error(built, saved):
    def edit(raw):
        psize = _meta(raw)[0]
        leaf = max(db_leaf(raw, name)[1] for name in (b"meta", b"arrays", b"models", b"checksums"))
        assert (leaf + 0xFFF8 // psize) * psize >= len(raw), "the offsets must reach past the file's end"
        count = (PAGE_HEADER.unpack_from(raw, leaf * psize)[3] - 16) // 2
        for i in range(count):  # once a SIGBUS: LMDB read the nodes through its map, past the file
            struct.pack_into("<H", raw, leaf * psize + 16 + 2 * i, 0xFFF8)

    edit_data(saved, edit)
    expect_polydom(isolated(load_and_use, saved, *built[1:]))


def test_a_node_pointer_outside_its_page_is_a_format_error(built, saved):
    def edit(raw):
        psize, leaf = db_leaf(raw, b"meta")
        struct.pack_into("<H", raw, leaf * psize + 16, 0xFFF8)

    edit_data(saved, edit)
    expect_polydom(isolated(load_and_use, saved, *built[1:]), "IndexFormatError")


def test_an_overflow_value_claiming_gigabytes_fails_when_its_model_is_loaded(built, saved):
    key = built[0].lookup(3.0, 1e9).key

    def edit(raw):
        psize, leaf = db_leaf(raw, b"models")
        count = (PAGE_HEADER.unpack_from(raw, leaf * psize)[3] - 16) // 2
        for i in range(count):
            at = _node_at(raw, psize, leaf, i)
            if raw[at + 8 : at + 16] == key.to_bytes(8, "big"):
                raw[at : at + 4] = struct.pack("<HH", 0xFFFF, 0xFFFF)  # 4 GB from its overflow page
                return
        raise AssertionError("model not found")

    edit_data(saved, edit)
    outcome = isolated(lambda: polydom.load(saved).lookup(3.0, 1e9).model.coef_.tolist())
    expect_polydom(outcome, "ModelIntegrityError")


def test_a_page_naming_a_child_beyond_the_file_is_a_format_error(built, saved):
    def edit(raw):
        psize, main = _meta(raw)
        root = main[7]
        at = _node_at(raw, psize, root, 0)
        ksize = struct.unpack_from("<H", raw, at + 6)[0]
        struct.pack_into("<Q", raw, at + 8 + ksize + 40, 10**9)  # the first database's root page

    edit_data(saved, edit)
    expect_polydom(isolated(load_and_use, saved, *built[1:]), "IndexFormatError")


def test_random_page_header_edits_end_cleanly(built, saved, tmp_path):
    rng = random.Random(5)
    raw = (version_dir(saved) / "data.mdb").read_bytes()
    pages = len(raw) // 4096
    for case in range(12):
        copy = tmp_path / f"c{case}"
        shutil.copytree(saved, copy, symlinks=True)
        page = rng.randrange(pages)

        def edit(buf):
            for spot in rng.sample(range(48), rng.randint(1, 4)):
                buf[page * 4096 + spot] = rng.randrange(256)

        edit_data(copy, edit)
        expect_correct_or_polydom(isolated(load_and_use, copy, *built[1:]), built)


@pytest.mark.parametrize("keep", [0, 4096, 8192 + 7, -4096])
def test_a_truncated_file_is_a_format_error(built, saved, keep):
    data = version_dir(saved) / "data.mdb"
    os.truncate(data, keep if keep >= 0 else data.stat().st_size + keep)
    expect_polydom(isolated(load_and_use, saved, *built[1:]), "IndexFormatError")


def test_damage_seen_by_refresh_is_a_format_error(built, saved):
    loaded = polydom.load(saved)
    built[0].save(saved)

    def edit(raw):
        psize, leaf = db_leaf(raw, b"arrays")
        at = _node_at(raw, psize, leaf, 0)
        raw[at : at + 4] = struct.pack("<HH", 0xFFFF, 0x00FF)

    edit_data(saved, edit)
    expect_polydom(isolated(loaded.refresh), "IndexFormatError")


# ------------------------------------------------------------------------------ crafted records

CRAFTED_ARRAYS = [
    ("candidates", lambda a: np.r_[-1, a[1:]]),  # once looped forever at load
    ("candidates", lambda a: np.r_[a[:-1], 1 << 40]),
    ("candidates", lambda a: np.r_[a[:-1], a[0]]),
    ("candidate_accuracy", lambda a: np.r_[np.nan, a[1:]]),
    ("candidate_accuracy", lambda a: np.r_[a[:-1], 7.5]),
    ("bounds", lambda a: a[::-1].copy()),
    ("bounds", lambda a: np.r_[a[:-1], np.inf]),
    ("skyline_ids", lambda a: np.r_[a[:-1], 10**6]),
    ("skyline_ids", lambda a: np.r_[-3, a[1:]]),
    ("skyline_offsets", lambda a: np.r_[a[:-1], 10**9]),
    ("skyline_offsets", lambda a: np.r_[0, a[2:]]),
    ("explored_masks", lambda a: np.r_[a[:-1], -(2**62)]),
    ("explored_accuracy", lambda a: np.r_[a[:-1], -0.5]),
    ("explored_std_error", lambda a: np.r_[a[:-1], -1.0]),
    ("explored_measured", lambda a: np.r_[a[:-1], 1.5]),
    ("chain_features", lambda a: np.r_[a[:-1], 99]),
    ("chain_offsets", lambda a: np.r_[a[:-1], 10**6]),
]


@pytest.mark.parametrize("name, craft", CRAFTED_ARRAYS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CRAFTED_ARRAYS)])
def test_a_crafted_array_with_a_valid_checksum_is_refused(built, saved, name, craft):
    set_array(saved, name, craft(stored_array(saved, name)))
    expect_polydom(isolated(load_and_use, saved, *built[1:]), "IndexFormatError")


@pytest.mark.parametrize("spec", [
    {"dtype": "<i8", "shape": [2**62, 0]},  # once hung: 2**62 empty rows
    {"dtype": "<i8", "shape": [0, 2**62]},
    {"dtype": "|O", "shape": [0]},
    {"dtype": "|V8", "shape": [0]},
    {"dtype": [["a", "<i8"]], "shape": [0]},
    {"dtype": "<i8", "shape": [-1]},
    {"dtype": "<i8", "shape": "12"},
])
def test_a_crafted_array_layout_is_refused(built, saved, spec):
    if isinstance(spec["shape"], list) and 0 in spec["shape"]:
        set_array(saved, "candidates", [])  # the bytes agree with the layout: no items
    set_array(saved, "candidates", spec=spec)
    expect_polydom(isolated(load_and_use, saved, *built[1:]), "IndexFormatError")


@pytest.mark.parametrize("entry, value", [
    ("costs", "[[-1.0, 0.5], [1.0], [1.0], [1.0]]"),  # negative costs
    ("costs", json.dumps([[1.0] * 5000] * 4)),
    ("domain", "[10.0, 1.0]"),
    ("domain", "[NaN, 1.0]"),
    ("stats", "{\"x\": NaN}"),
    ("params", "[" * 100_000 + "]" * 100_000),  # once escaped as RecursionError
    ("features", json.dumps([f"g{i}" for i in range(70)])),
])
def test_crafted_metadata_with_a_valid_checksum_is_refused(built, saved, entry, value):
    rewrite(saved, b"meta", entry.encode(), value.encode(), fix_state=True)
    expect_polydom(isolated(load_and_use, saved, *built[1:]), "IndexFormatError")


def test_a_damaged_format_record_is_a_format_error_not_a_version_error(saved):
    key = records.STORE_KEY.encode()
    raw = read_records(saved, b"meta")[key]
    rewrite(saved, b"meta", key, raw.replace(b"format_version", b"format_versioN"))
    with pytest.raises(polydom.IndexFormatError, match="damaged") as err:
        polydom.load(saved)
    assert not isinstance(err.value, polydom.IndexVersionError)


def test_a_model_count_that_disagrees_with_the_file_is_refused(saved):
    key = records.STORE_KEY.encode()
    info = json.loads(read_records(saved, b"meta")[key])
    info["models"] += 5
    rewrite(saved, b"meta", key, json.dumps(info).encode(), fix_state=True)
    with pytest.raises(polydom.IndexFormatError, match="models"):
        polydom.load(saved)


# ------------------------------------------------------------------------------ crafted models


def _zip(members: dict, compression=zipfile.ZIP_STORED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return out.getvalue()


def _payload_parts(saved, key):
    payload = read_records(saved, b"models")[key.to_bytes(8, "big")]
    archive = zipfile.ZipFile(io.BytesIO(payload))
    return json.loads(archive.read("schema.json")), {i.filename: archive.read(i) for i in archive.infolist()}


def _npy_header(shape) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False, "shape": shape})
    return buf.getvalue()


def _bytearray_bomb(size):
    return {
        "__class__": "bytearray", "__module__": "builtins", "__loader__": "ConstructorFromReduceNode",
        "content": {"__class__": "tuple", "__module__": "builtins", "__loader__": "TupleNode", "content": [
            {"__class__": "int", "__module__": "builtins", "__loader__": "JsonNode", "content": str(size), "is_json": True},
        ]},
    }


def crafted(kind, schema, members):
    if kind == "bytearray":  # 286 bytes that once came back as a 1 GB "model"
        return _zip({"schema.json": json.dumps({**_bytearray_bomb(1 << 30), "protocol": schema["protocol"]})})
    if kind == "nested bytearray":
        schema["content"]["content"]["extra"] = _bytearray_bomb(1 << 30)
        return _zip({**members, "schema.json": json.dumps(schema)})
    if kind == "array header":
        name = next(m for m in members if m.endswith(".npy"))
        return _zip({**members, name: _npy_header((1 << 27,)) + b"\0" * 8})
    if kind == "deep":
        inner = '{"__class__": "list", "__module__": "builtins", "__loader__": "ListNode", "content": ['
        return _zip({"schema.json": inner * 20_000 + "]}" * 20_000})
    if kind == "inflates":
        return _zip({**members, "schema.json": json.dumps(schema) + " " * (20 << 20)}, zipfile.ZIP_DEFLATED)
    if kind == "bare array":
        buf = io.BytesIO()
        np.save(buf, np.zeros(1 << 10))
        array = {"__class__": "ndarray", "__module__": "numpy", "__loader__": "NdArrayNode", "type": "numpy",
                 "file": "a.npy", "protocol": schema["protocol"]}
        return _zip({"schema.json": json.dumps(array), "a.npy": buf.getvalue()})
    raise ValueError(kind)


@pytest.mark.parametrize("kind, error", [
    ("bytearray", "ModelIntegrityError"),
    ("nested bytearray", "ModelIntegrityError"),
    ("array header", "ModelIntegrityError"),
    ("deep", "ModelIntegrityError"),
    ("inflates", "ModelIntegrityError"),
    ("bare array", "UntrustedModelError"),
])
def test_a_crafted_model_payload_is_refused_within_bounds(built, saved, kind, error):
    key = built[0].lookup(3.0, 1e9).key
    schema, members = _payload_parts(saved, key)
    rewrite(saved, b"models", key.to_bytes(8, "big"), crafted(kind, schema, members), fix_model=True)

    def use():
        started = time.perf_counter()
        try:
            polydom.load(saved).lookup(3.0, 1e9).model
        finally:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            assert time.perf_counter() - started < 5 and peak < 900, (time.perf_counter() - started, peak)

    outcome = isolated(use, memory=2 << 30)
    assert outcome[:2] == ("polydom", error), outcome


# ------------------------------------------------------------------------------ FIFOs and sockets


@pytest.mark.parametrize("name", ["data.mdb", "pin"])
def test_a_fifo_in_a_version_is_refused_without_blocking(built, saved, name):
    target = version_dir(saved) / name
    target.unlink()
    os.mkfifo(target)
    expect_polydom(isolated(load_and_use, saved, *built[1:], timeout=10), "IndexFormatError")


@pytest.mark.parametrize("name", ["data.mdb", "pin"])
def test_a_socket_in_a_version_is_refused(built, saved, name):
    target = version_dir(saved) / name
    target.unlink()
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(target))
        expect_polydom(isolated(load_and_use, saved, *built[1:], timeout=10), "IndexFormatError")
    finally:
        sock.close()


def test_a_fifo_or_socket_as_the_writer_lock_is_refused(built, saved):
    lock = saved / ".writer.lock"
    lock.unlink()
    os.mkfifo(lock)
    expect_polydom(isolated(built[0].save, saved, timeout=10), "IndexWriteError")
    lock.unlink()
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(lock))
        expect_polydom(isolated(built[0].save, saved, timeout=10), "IndexWriteError")
    finally:
        sock.close()


# ------------------------------------------------------------------------------ symbolic links


def test_a_linked_writer_lock_is_not_followed(built, saved, tmp_path):
    outside = tmp_path / "outside" / "victim"
    outside.parent.mkdir()
    (saved / ".writer.lock").unlink()
    os.symlink(outside, saved / ".writer.lock")
    with pytest.raises(polydom.IndexWriteError, match="symbolic link"):
        built[0].save(saved)
    assert not outside.exists()
    assert os.readlink(saved / "current") == "v00000001"


def test_a_version_linked_to_outside_the_index_is_not_read(built, saved, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(version_dir(saved), elsewhere)
    shutil.rmtree(version_dir(saved))
    os.symlink(elsewhere, saved / "v00000001")
    with pytest.raises(polydom.IndexFormatError, match="symbolic link"):
        polydom.load(saved)


@pytest.mark.parametrize("name", ["data.mdb", "pin"])
def test_a_linked_file_in_a_version_is_not_read(built, saved, tmp_path, name):
    moved = tmp_path / f"moved-{name}"
    shutil.move(version_dir(saved) / name, moved)
    os.symlink(moved, version_dir(saved) / name)
    with pytest.raises(polydom.IndexFormatError, match="symbolic link"):
        polydom.load(saved)


def test_linked_leftovers_are_removed_without_touching_their_targets(built, saved, tmp_path):
    target = tmp_path / "precious"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    for name in (".tmp-00aa", ".trash-00bb", ".current-00cc", "v00000000"):
        os.symlink(target, saved / name)
    assert built[0].save(saved, keep=1) == "v00000002"
    assert sorted(os.listdir(saved)) == [".writer.lock", "current", "v00000002"]
    assert (target / "keep.txt").read_text() == "mine"


def test_a_symlink_loop_or_an_overlong_path_is_a_polydom_error(built, tmp_path):
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    with pytest.raises(polydom.StoreError):
        polydom.load(tmp_path / "loop")
    with pytest.raises(polydom.IndexWriteError):
        built[0].save(tmp_path / "loop")
    long = tmp_path / ("x" * 300)
    with pytest.raises(polydom.IndexNotFoundError):
        polydom.load(long)
    with pytest.raises(polydom.IndexWriteError):
        built[0].save(long)


# ------------------------------------------------------------------------------ saves that fail


def test_following_the_missing_version_advice_with_keep_1_keeps_the_new_version(built, saved):
    built[0].save(saved)  # v1 and v2
    shutil.rmtree(saved / "v00000002")
    with pytest.raises(polydom.IndexFormatError, match="save it again"):
        polydom.load(saved)
    name = built[0].save(saved, keep=1)
    assert (saved / name).is_dir() and os.readlink(saved / "current") == name
    assert observe(polydom.load(saved), *built[1:]) == observe(*built)


def test_save_returns_the_published_version_name(built, tmp_path):
    assert built[0].save(tmp_path / "i") == "v00000001"
    assert built[0].save(tmp_path / "i", keep=1) == "v00000002"


class _Unsavable:
    def __init__(self):
        self.stream = (i for i in range(3))


def _with_model(index, model):
    return polydom.PolyDomIndex(
        index.space, index.costs, index.domain, index.candidates, index.candidate_accuracy, index.bounds,
        index.skylines, models={**index.models, index.candidates[-1]: model}, explored=index.explored,
    )


@pytest.mark.parametrize("model, error", [
    (_Unsavable(), polydom.UnsupportedModelError),
    (RandomForestClassifier(n_estimators=2).fit(np.eye(3), [0, 1, 1]), polydom.UntrustedModelError),
])
def test_a_failed_first_save_leaves_nothing_behind(built, tmp_path, model, error):
    target = tmp_path / "new" / "idx"
    with pytest.raises(error):
        _with_model(built[0], model).save(target)
    assert not (tmp_path / "new").exists()
    existing = tmp_path / "empty"
    existing.mkdir()
    with pytest.raises(error):
        _with_model(built[0], model).save(existing)
    assert os.listdir(existing) == []


def test_a_failed_save_leaves_the_previous_version_published(built, saved):
    with pytest.raises(polydom.UntrustedModelError, match="trusted="):
        _with_model(built[0], RandomForestClassifier(n_estimators=2).fit(np.eye(3), [0, 1, 1])).save(saved)
    assert sorted(os.listdir(saved)) == [".writer.lock", "current", "v00000001"]
    assert observe(polydom.load(saved), *built[1:]) == observe(*built)


# ------------------------------------------------------------------------------ a full file system

_TMPFS_SCRIPT = textwrap.dedent("""
    import json, os, subprocess, sys
    import numpy as np
    import polydom
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    mount = sys.argv[1]
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", mount], check=True)
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(4, 40_000)), np.array([0, 1, 0, 1])

    def index(width, model):
        def expand(fs):
            cols = list(range(width * len(fs))) or [0]
            return polydom.Expansion(0.5 + 0.1 * len(fs), model().fit(X[:, cols], y))
        return polydom.build({"a": [1.0], "b": [0.0, 1.0]}, expand)

    out = {}
    small, big = index(2, LogisticRegression), index(20_000, StandardScaler)  # the big one: ~2 MB of arrays
    path = os.path.join(mount, "idx")
    out["small"] = small.save(path)
    for label in ("big", "full"):
        if label == "full":
            fd = os.open(os.path.join(mount, "filler"), os.O_WRONLY | os.O_CREAT)
            try:
                while os.write(fd, b"x" * 4096):
                    pass
            except OSError:
                pass
            os.close(fd)
        try:
            big.save(path)
            out[label] = "saved"
        except polydom.PolydomError as exc:
            out[label] = type(exc).__name__
        loaded = polydom.load(path)
        out[label + " then"] = [loaded.lookup(1.0, 1e9).accuracy == small.lookup(1.0, 1e9).accuracy,
                                sorted(e for e in os.listdir(path) if e.startswith(".tmp"))]
    print(json.dumps(out))
""")


def test_saving_on_a_full_file_system_fails_cleanly_and_keeps_the_old_version(tmp_path):
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.skip("needs unshare(1) and mount(8) to mount a private tmpfs")
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot create a mount namespace here: {probe.stderr.decode().strip()}")
    mount = tmp_path / "tiny"
    mount.mkdir()
    script = tmp_path / "full.py"
    script.write_text(_TMPFS_SCRIPT)
    try:
        run = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", sys.executable, "-P", str(script), str(mount)],
            capture_output=True, text=True, timeout=120,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("saving on a full file system hung")
    if run.returncode != 0 and "mount" in run.stderr and "permission" in run.stderr.lower():
        pytest.skip(f"cannot mount a tmpfs here: {run.stderr.strip()[-200:]}")
    assert run.returncode == 0, f"exit {run.returncode} (a negative code is a signal): {run.stderr[-2000:]}"
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["small"] == "v00000001"
    assert out["big"] == "IndexWriteError" and out["full"] == "IndexWriteError", out
    assert out["big then"] == [True, []] and out["full then"] == [True, []], out


# ------------------------------------------------------------------------------ fork


def test_a_child_forked_during_transactions_loads_its_models(built, saved, tmp_path):
    index, columns, queries = built
    loaded = polydom.load(saved)
    keys = sorted(index.candidates)
    stop = threading.Event()

    def busy():  # reads and writes LMDB without pause
        i = 0
        while not stop.is_set():
            other = polydom.load(saved)
            for key in keys:
                other.models.get(key)
            index.save(tmp_path / "busy", keep=1)
            i += 1

    thread = threading.Thread(target=busy, daemon=True)
    thread.start()
    try:
        for round_ in range(8):
            time.sleep(0.01 * round_)
            key = keys[round_ % len(keys)]
            outcome = isolated(lambda: loaded.models.get(key).predict_proba(columns(key)).round(12).tolist(), timeout=15)
            assert outcome[0] == "ok", (round_, outcome)
            assert json.loads(outcome[1]) == index.models[key].predict_proba(columns(key)).round(12).tolist()
    finally:
        stop.set()
        thread.join(30)
