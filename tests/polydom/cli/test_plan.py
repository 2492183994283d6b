"""``polydom plan``: a real saved index, sizes from a text file or .npy, the summary against an equal
split, per-item choices as CSV or JSON that round-trip, one-line errors and exit codes."""

import csv
import json
import math
import subprocess
import sys

import numpy as np
import pytest

import polydom
from polydom import cli
from polydom.cli.plan import FIELDS, SEPARATOR

TOTAL = 2000.0


@pytest.fixture(scope="module")
def built():
    inst = polydom.make_synthetic(6, k=None, seed=4)
    # Every set but one reports a standard error, which the plan's rows carry.
    return polydom.build(inst.costs, lambda s: polydom.Expansion(
        inst.expand(s), None, std_error=None if len(s) == 1 else 0.001 * (1 + len(s))))


@pytest.fixture(scope="module")
def saved(built, tmp_path_factory):
    path = tmp_path_factory.mktemp("plan") / "idx"
    built.save(path)
    return path


@pytest.fixture(scope="module")
def sizes():
    return np.round(np.random.default_rng(0).uniform(1, 10, 40), 3)


@pytest.fixture()
def sizes_txt(sizes, tmp_path):
    path = tmp_path / "sizes.txt"
    path.write_text("# one size per line\n" + "\n".join(repr(float(s)) for s in sizes) + "\n\n")
    return path


def run(argv, capsys):
    status = cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_csv_round_trips_and_the_summary_is_printed(built, saved, sizes, sizes_txt, tmp_path, capsys):
    out = tmp_path / "plan.csv"
    status, printed, err = run(["plan", saved, "--sizes", sizes_txt, "--total-budget", TOTAL, "--out", out], capsys)
    assert status == 0 and f"wrote {out} (40 items)" in err
    want = built.plan_batch(sizes, TOTAL)
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == list(FIELDS) and len(rows) == len(sizes)
    for i, row in enumerate(rows):
        key = int(row["key"])
        assert int(row["item"]) == i and float(row["size"]) == sizes[i]
        assert key == want.choices.keys[i] and float(row["accuracy"]) == want.choices.accuracy[i]
        se = built.std_error.get(key)
        assert (row["std_error"] == "") if se is None else float(row["std_error"]) == se
        assert float(row["cost"]) == want.choices.cost[i]  # repr of a float reads back exactly
        names = row["features"].split(SEPARATOR) if row["features"] else []
        assert names == sorted(built.space.frozenset(key))
    assert math.fsum(float(r["cost"]) for r in rows) == want.total_cost <= TOTAL
    lines = printed.splitlines()
    assert [line.split()[0] for line in lines] == ["items", "budget", "plan", "equal", "gain"]
    assert f"mean accuracy {want.mean_accuracy:.6g}" in lines[2] and "points over the equal split" in lines[4]


def test_json_round_trips_and_matches_the_printed_summary(built, saved, sizes, sizes_txt, tmp_path, capsys):
    out = tmp_path / "plan.json"
    status, printed, _ = run(["plan", saved, "--sizes", sizes_txt, "--total-budget", TOTAL, "--out", out, "--json"],
                             capsys)
    assert status == 0
    written = json.loads(out.read_text())
    assert written["summary"] == json.loads(printed)
    want = built.plan_batch(sizes, TOTAL)
    assert [r["key"] for r in written["items"]] == want.choices.keys.tolist()
    assert [r["cost"] for r in written["items"]] == want.choices.cost.tolist()
    assert [r["std_error"] for r in written["items"]] == [want.choices[i].std_error for i in range(len(sizes))]
    assert all(r["features"] == sorted(built.space.frozenset(r["key"])) for r in written["items"])
    summary = written["summary"]
    # No ties in this index (its black box reports no standard errors): the equal split over the
    # plan's options is what per-item lookups with total / N serve.
    equal = built.lookup_many(sizes, np.full(len(sizes), TOTAL / len(sizes)))
    assert summary["equal_split"]["mean_accuracy"] == pytest.approx(equal.accuracy.mean())
    assert summary["plan"]["total_cost"] == want.total_cost and summary["solver"] == "greedy"
    assert summary["gain_points"] == pytest.approx(100 * (want.mean_accuracy - equal.accuracy.mean()))


@pytest.mark.parametrize("fraction", [0.02, 0.1, 0.5])
def test_the_exact_plan_beats_or_matches_the_equal_split(saved, sizes, tmp_path, capsys, fraction):
    npy = tmp_path / "sizes.npy"
    np.save(npy, sizes)
    total = fraction * TOTAL
    status, printed, _ = run(["plan", saved, "--sizes", npy, "--total-budget", total, "--exact", "--json"], capsys)
    summary = json.loads(printed)
    assert status == 0 and summary["solver"] == "milp" and summary["items"] == len(sizes)
    # The equal split is itself a plan within the total; the solver stops within a 1e-4 relative gap.
    assert summary["gain_points"] >= -2e-2
    assert summary["plan"]["total_cost"] <= total


def test_text_and_npy_sizes_plan_alike_and_the_cap_holds(saved, sizes, sizes_txt, tmp_path, capsys):
    npy = tmp_path / "sizes.npy"
    np.save(npy, sizes)
    outs = []
    for source in (sizes_txt, npy):
        out = tmp_path / f"{source.suffix[1:]}.json"
        assert run(["plan", saved, "--sizes", source, "--total-budget", TOTAL, "--max-item-budget", "60",
                    "--out", out], capsys)[0] == 0
        outs.append(json.loads(out.read_text()))
    assert outs[0] == outs[1]
    assert all(r["cost"] <= 60 for r in outs[0]["items"])
    assert outs[0]["summary"]["equal_split"]["per_item_budget"] == min(60, TOTAL / len(sizes))


def test_an_infinite_total_serves_every_item_its_best_set(built, saved, sizes_txt, sizes, capsys):
    status, printed, _ = run(["plan", saved, "--sizes", sizes_txt, "--total-budget", "inf", "--json"], capsys)
    summary = json.loads(printed)
    assert status == 0 and summary["total_budget"] == "inf" and summary["gain_points"] == 0
    assert summary["plan"]["mean_accuracy"] == pytest.approx(built.lookup_many(sizes, math.inf).accuracy.mean())


def test_a_greedy_index_plans_too(sizes_txt, tmp_path, capsys):
    inst = polydom.make_synthetic(5, k=None, seed=2)
    greedy = polydom.build(inst.costs, inst.expand, backend="greedy", n0=2.0)
    greedy.save(tmp_path / "g")
    status, printed, _ = run(["plan", tmp_path / "g", "--sizes", sizes_txt, "--total-budget", 500, "--json"], capsys)
    assert status == 0 and json.loads(printed)["plan"]["total_cost"] <= 500


@pytest.mark.parametrize("argv, fragment", [
    (["{saved}", "--sizes", "{missing}", "--total-budget", "1"], "No such file"),
    (["{saved}", "--sizes", "{bad}", "--total-budget", "1"], "line 3: 'three' is not a number"),
    (["{saved}", "--sizes", "{empty}", "--total-budget", "1"], "holds no sizes"),
    (["{saved}", "--sizes", "{matrix}", "--total-budget", "1"], "1-D array of numbers"),
    (["{saved}", "--sizes", "{negative}", "--total-budget", "1"], "size must be >= 0"),
    (["{missing}", "--sizes", "{txt}", "--total-budget", "1"], "does not exist"),
    (["{saved}", "--sizes", "{infinite}", "--total-budget", "1"], "size must be finite; infinite at position 1"),
    (["{saved}", "--sizes", "{pickled}", "--total-budget", "1"], "not a .npy array file (no NumPy header)"),
    (["{saved}", "--sizes", "{fifo}", "--total-budget", "1"], "not a regular file"),
    (["{saved}", "--sizes", "/dev/zero", "--total-budget", "1"], "not a regular file"),
    (["{saved}", "--sizes", "{long}", "--total-budget", "1"], "line 1: longer than 256 bytes"),
])
def test_errors_exit_1_with_one_line(saved, sizes_txt, tmp_path, capsys, argv, fragment):
    (tmp_path / "bad.txt").write_text("1\n2\nthree\n")
    (tmp_path / "empty.txt").write_text("# nothing\n\n")
    (tmp_path / "negative.txt").write_text("1\n-4\n")
    (tmp_path / "infinite.txt").write_text("1\ninf\n")
    np.save(tmp_path / "matrix.npy", np.ones((2, 2)))
    import os
    import pickle

    (tmp_path / "pickled.npy").write_bytes(pickle.dumps([1.0, 2.0]))
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "long.txt").write_text("1" * 300 + "\n")
    paths = {"pickled": tmp_path / "pickled.npy", "fifo": tmp_path / "fifo", "long": tmp_path / "long.txt","saved": saved, "txt": sizes_txt, "missing": tmp_path / "missing", "bad": tmp_path / "bad.txt",
             "empty": tmp_path / "empty.txt", "matrix": tmp_path / "matrix.npy", "negative": tmp_path / "negative.txt",
             "infinite": tmp_path / "infinite.txt"}
    status, printed, err = run(["plan"] + [a.format(**paths) for a in argv], capsys)
    assert status == 1 and printed == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("polydom plan: error: ") and fragment in lines[0]


@pytest.mark.parametrize("argv, fragment", [
    (["x", "--sizes", "s"], "--total-budget"),
    (["x", "--total-budget", "1"], "--sizes"),
    (["x", "--sizes", "s", "--total-budget", "lots"], "expected a number, got 'lots'"),
    (["x", "--sizes", "s", "--total-budget", "-1"], "--total-budget: must be >= 0, got '-1'"),
    (["x", "--sizes", "s", "--total-budget", "nan"], "--total-budget: must be >= 0"),
    (["x", "--sizes", "s", "--total-budget", "1", "--max-item-budget", "-3"], "--max-item-budget: must be >= 0"),
    (["x", "--sizes", "s", "--total-budget", "1", "--out", "plan.txt"], "--out: must name a .csv or .json file"),
])
def test_usage_errors_exit_2_with_one_line(argv, fragment, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["plan", *argv])
    assert stop.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("polydom plan: error: ") and fragment in lines[0]


def test_the_command_runs_as_a_program_and_imports_neither_sklearn_nor_sympy(built, saved, sizes_txt, sizes,
                                                                              subprocess_env):
    code = (
        "import sys\nfrom polydom.cli import main\n"
        f"status = main(['plan', {str(saved)!r}, '--sizes', {str(sizes_txt)!r}, '--total-budget', '{TOTAL}', '--json'])\n"
        "heavy = [m for m in ('sklearn', 'sympy', 'scipy') if m in sys.modules]\n"
        "assert status == 0 and not heavy, (status, heavy)\n"
    )
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, env=subprocess_env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["plan"]["total_cost"] == built.plan_batch(sizes, TOTAL).total_cost
    ok = subprocess.run([sys.executable, "-P", "-m", "polydom.cli", "plan", str(saved), "--sizes", str(sizes_txt),
                         "--total-budget", str(TOTAL)], capture_output=True, text=True, env=subprocess_env, timeout=120)
    assert ok.returncode == 0 and "points over the equal split" in ok.stdout


def test_sizes_from_endless_or_huge_files_are_refused_in_bounded_memory(saved, tmp_path, subprocess_env):
    """/dev/zero never yields a newline and a 300 MB file has none: each is refused with one line,
    in a process that stays under 200 MB (its peak resident size, read by a parent of its own)."""
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as file:
        file.truncate(300 << 20)  # sparse: 300 MB of zero bytes and no newline
    for sizes, fragment in (("/dev/zero", "not a regular file"), (str(huge), "longer than 256 bytes")):
        code = (
            "import resource, subprocess, sys\n"
            f"done = subprocess.run([sys.executable, '-P', '-m', 'polydom.cli', 'plan', {str(saved)!r}, "
            f"'--sizes', {sizes!r}, '--total-budget', '1'], capture_output=True, text=True, timeout=60)\n"
            "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
            "print(done.stderr, end='')\n"
        )
        done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, env=subprocess_env,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        status, peak_kib = map(int, done.stdout.splitlines()[0].split())
        lines = done.stdout.splitlines()[1:]
        assert status == 1 and len(lines) == 1 and fragment in lines[0], done.stdout
        assert peak_kib < 200 * 1024
