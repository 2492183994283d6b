"""The polydom command line: inspect and lookup on a real saved index, one-line errors, pluggable commands."""

import json
import subprocess
import sys

import pytest

import polydom
from polydom import cli


@pytest.fixture(scope="module")
def built():
    inst = polydom.make_synthetic(6, k=None, seed=4)
    return polydom.build(inst.costs, inst.expand)


@pytest.fixture(scope="module")
def saved(built, tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "idx"
    built.save(path)
    return path


def test_inspect_shows_features_counts_bounds_and_skylines(built, saved, capsys):
    assert cli.main(["inspect", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "version v00000001" in out and "backend polydom" in out
    for name, curve in zip(built.features, built.costs):
        assert name in out and str(curve.expression()) in out
    assert f"{len(built.candidates)} candidates" in out and f"{len(built.bounds)} ranges" in out
    assert out.count("\nrange ") == len(built.bounds)
    assert "range 0: [0, " in out and "(none)" in out


def test_inspect_json_matches_the_index(built, saved, capsys):
    assert cli.main(["inspect", str(saved), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["counts"] == {
        "features": 6, "explored": len(built.explored), "candidates": len(built.candidates),
        "ranges": len(built.bounds), "skyline_entries": sum(map(len, built.skylines)), "models": 0,
    }
    assert info["bounds"] == built.bounds and info["domain"] == [0.0, "inf"]
    assert [f["coefficients"] for f in info["features"]] == [list(c.coefficients) for c in built.costs]
    for rng, sky in zip(info["ranges"], built.skylines):
        assert [e["key"] for e in rng["skyline"]] == [built.candidates[c] for c in sky]
        assert [e["accuracy"] for e in rng["skyline"]] == [built.candidate_accuracy[c] for c in sky]


def test_inspect_shows_measured_scores_beside_the_fitted_ones(tmp_path, capsys):
    inst = polydom.make_synthetic(6, k=None, seed=4)
    noisy = {}

    def expand(features):
        # Scores that drop from some sets to their supersets, so the fit moves them.
        return noisy.setdefault(features, min(1.0, inst.expand(features) + 0.05 * (sum(map(ord, "".join(sorted(features)))) % 3 - 1)))

    index = polydom.build(inst.costs, expand, scores="monotone")
    index.save(tmp_path / "m")
    assert cli.main(["inspect", str(tmp_path / "m"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    entries = [e for rng in info["ranges"] for e in rng["skyline"]]
    assert all(e["measured"] == index.measured[e["key"]] and e["accuracy"] == index.explored[e["key"]] for e in entries)
    assert info["params"]["scores"] == "monotone" and info["stats"]["scores_moved"] > 0
    assert cli.main(["inspect", str(tmp_path / "m")]) == 0
    assert "measured" in capsys.readouterr().out


def test_inspect_and_lookup_show_the_std_error_of_each_score(tmp_path, capsys):
    inst = polydom.make_synthetic(5, k=None, seed=3)
    se = lambda features: 0.001 * (1 + len(features))  # noqa: E731
    index = polydom.build(inst.costs, lambda s: polydom.Expansion(inst.expand(s), None, std_error=se(s)))
    index.save(tmp_path / "s")
    assert cli.main(["inspect", str(tmp_path / "s"), "--json"]) == 0
    entries = [e for rng in json.loads(capsys.readouterr().out)["ranges"] for e in rng["skyline"]]
    assert entries and all(e["std_error"] == se(e["features"]) for e in entries)
    assert cli.main(["inspect", str(tmp_path / "s")]) == 0
    assert "± se" in capsys.readouterr().out
    want = index.lookup(3.0, 400.0)
    assert cli.main(["lookup", str(tmp_path / "s"), "--size", "3", "--budget", "400", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["std_error"] == want.std_error == se(want.features)
    assert cli.main(["lookup", str(tmp_path / "s"), "--size", "3", "--budget", "400"]) == 0
    assert f"± {want.std_error:g}" in capsys.readouterr().out


def test_inspect_shows_a_greedy_index_skyline(tmp_path, capsys):
    inst = polydom.make_synthetic(5, k=None, seed=2)
    greedy = polydom.build(inst.costs, inst.expand, backend="greedy", n0=2.0)
    greedy.save(tmp_path / "g")
    assert cli.main(["inspect", str(tmp_path / "g")]) == 0
    out = capsys.readouterr().out
    assert "backend greedy" in out and "skyline (costs at n0 = 2; one range)" in out
    assert cli.main(["inspect", str(tmp_path / "g"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert [e["key"] for e in info["skyline"]] == [e.mask for e in greedy.skyline]


def test_inspect_can_limit_the_ranges(saved, capsys):
    assert cli.main(["inspect", str(saved), "--ranges", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count("\nrange ") == 1 and "more ranges" in out


def test_lookup_prints_the_choice(built, saved, capsys):
    want = built.lookup(3.0, 400.0)
    assert cli.main(["lookup", str(saved), "--size", "3", "--budget", "400"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "features  " + ", ".join(sorted(want.features))
    assert cli.main(["lookup", str(saved), "--size", "3", "--budget", "400", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (set(got["features"]), got["accuracy"], got["cost"], got["key"]) == (set(want.features), want.accuracy, want.cost, want.key)
    assert got["model"] is False and got["version"] == "v00000001"


@pytest.mark.parametrize("argv, fragment", [
    (["lookup", "{missing}", "--size", "1", "--budget", "1"], "does not exist"),
    (["inspect", "{empty}"], "not a polydom index"),
    (["lookup", "{saved}", "--size", "nan", "--budget", "1"], "size is NaN"),
    (["lookup", "{saved}", "--size", "1", "--budget", "-2"], "budget must be >= 0"),
    (["lookup", "{saved}", "--size", "inf", "--budget", "1"], "finite"),
])
def test_errors_exit_1_with_one_line(saved, tmp_path, capsys, argv, fragment):
    (tmp_path / "empty").mkdir()
    paths = {"missing": tmp_path / "missing", "empty": tmp_path / "empty", "saved": saved}
    assert cli.main([a.format(**paths) for a in argv]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"polydom {argv[0]}: error: ") and fragment in lines[0]


@pytest.mark.parametrize("argv", [[], ["lookup", "x", "--size", "1"], ["lookup", "x", "--size", "one", "--budget", "1"], ["frobnicate"]])
def test_usage_errors_exit_2_with_one_line(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    assert stop.value.code == 2
    assert len(capsys.readouterr().err.splitlines()) == 1


def test_the_module_runs_as_a_program(built, saved, subprocess_env):
    ok = subprocess.run([sys.executable, "-P", "-m", "polydom.cli", "lookup", str(saved), "--size", "3", "--budget", "400", "--json"],
                        capture_output=True, text=True, env=subprocess_env)
    assert ok.returncode == 0 and json.loads(ok.stdout)["key"] == built.lookup(3.0, 400.0).key
    bad = subprocess.run([sys.executable, "-P", "-m", "polydom.cli", "inspect", str(saved / "nope")], capture_output=True,
                         text=True, env=subprocess_env)
    assert bad.returncode == 1 and len(bad.stderr.splitlines()) == 1


def test_other_commands_plug_in(monkeypatch, tmp_path, capsys):
    seen = []

    def configure(parser):
        parser.add_argument("--times", type=int, default=1)

    def run(args):
        seen.append(args.times)
        return 3

    monkeypatch.setitem(cli._COMMANDS, "echo", cli._COMMANDS["lookup"])  # restored after the test
    cli.add_command("echo", "repeat", configure, run)
    assert cli.main(["echo", "--times", "2"]) == 3 and seen == [2]

    (tmp_path / "polydom_plugin_probe.py").write_text(
        "def configure(parser):\n    parser.add_argument('word')\n"
        "def run(args):\n    print(args.word.upper())\n    return 0\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(cli._COMMANDS, "shout", cli._COMMANDS["lookup"])
    cli.add_lazy_command("shout", "print a word loudly", "polydom_plugin_probe")
    assert cli.main(["echo"]) == 3
    assert "polydom_plugin_probe" not in sys.modules  # not imported for another command
    assert cli.main(["shout", "hi"]) == 0 and capsys.readouterr().out.strip() == "HI"
    sys.modules.pop("polydom_plugin_probe", None)
