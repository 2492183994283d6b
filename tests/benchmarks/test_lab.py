"""The backend comparison (``benchmarks/backends.py``, the lab) in quick mode, and the benchmarks that judge its runs."""

import argparse
import json
import re

import numpy as np
import pytest

import polydom
from lab import job, settings
from lab.job import add_run_arguments, load_run_split

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def main(args):
    """``benchmarks/backends.py ARGS`` (the word ``demo`` first, as the old command line had it)."""
    import runpy

    assert args[0] == "demo"
    return runpy.run_path(str(ROOT / "benchmarks" / "backends.py"))["main"](args[1:])


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "out"
    assert main(["demo", "--quick", "--out", str(out), "--n-jobs", "1"]) == 0
    return out


def test_the_default_demo_spans_a_decade_of_sizes_with_many_held_out_images():
    from lab.settings import DEFAULT_PICTURES

    assert max(settings.DEFAULT_SIDES) >= 10 * min(settings.DEFAULT_SIDES)
    assert max(settings.QUICK_SIDES) >= 10 * min(settings.QUICK_SIDES)
    # The old demo held out 320 images; several times more now, every picture at every size.
    assert DEFAULT_PICTURES[1] * 10 * len(settings.DEFAULT_SIDES) >= 5 * 320


def test_demo_writes_the_report_plots_and_index(demo_out):
    report = (demo_out / "report.md").read_text()
    sections = ["## Conclusions", "## Headline numbers", "## What was run", "## Fitted cost curves",
                "## Served sets by size", "## Accuracy vs budget", "## Budget violations", "## Expansions",
                "## Index size", "## Latency"]
    positions = [report.index(s) for s in sections]
    assert positions == sorted(positions)  # the Conclusions come first
    for backend in ("PolyDom α=1", "PolyDom α=1 SE ties", "PolyDom α=1.2", "Greedy", "GreedyAcc", "GreedyCost"):
        assert f"| {backend} |" in report
    assert "NaiveExpandAll" in report and "identically: **yes**" in report
    assert "lean labels identical to scikit-learn's: **yes**" in report
    for png in ("cost_curves", "accuracy_vs_budget", "features_by_size", "violations_by_size", "accuracy_by_size",
                "expansions", "accuracy_vs_cost"):
        path = demo_out / f"{png}.png"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
        assert f"]({png}.png)" in report
    clf = polydom.CostSensitiveClassifier.load(demo_out / "index")
    assert clf.index_.backend == "polydom" and clf.selection.alpha == 1.0
    assert "28x28" in report and "280x280" in report


def test_the_report_judges_the_primary_cell_by_cell(demo_out):
    cells = _section((demo_out / "report.md").read_text(), "## Cell by cell")
    assert re.search(r"within one standard error of the best of .* in \*\*\d+ of \d+\*\* cells", cells)
    for backend in (settings.PRIMARY, settings.PLAIN, "GreedyCost", settings.CASCADE, settings.WORST_CASE):
        assert f"| {backend} |" in cells, backend
    assert "Confidence cascades" in cells and "worst-case provisioning" in cells and "**On time.**" in cells
    assert re.search(r"Mean over cells, on time: PolyDom α=1 \d\.\d{3} ± \d\.\d{3}; PolyDom α=1 plain", cells)
    assert "walked plainly and with the cascade from one snapshot of the guards" in cells


def _section(report: str, title: str) -> str:
    start = report.index(title)
    end = report.find("\n## ", start + 1)
    return report[start:end if end > 0 else None]


def test_conclusions_say_which_backend_for_which_budget(demo_out):
    conclusions = _section((demo_out / "report.md").read_text(), "## Conclusions")
    assert "**Which backend for which budget:**" in conclusions
    assert re.search(r"\*\*[\d.]+ ms( to [\d.]+ ms)?\*\*: ", conclusions)  # budget ranges, told from the numbers
    assert "What the accuracy costs" in conclusions and "Reproducibility" in conclusions
    # The per-budget table: one row per budget, the best backend's accuracy with its standard error.
    rows = [line for line in conclusions.splitlines() if re.match(r"\| [\d.]+ ms \|", line)]
    assert len(rows) == len(settings.DEFAULT_BUDGETS) and all(" ± " in row for row in rows)


def test_every_accuracy_in_the_tables_has_a_standard_error(demo_out):
    report = (demo_out / "report.md").read_text()
    accuracy = _section(report, "## Accuracy vs budget")
    # The tables of accuracies and of paired differences (not the one of extraction times).
    blocks = accuracy.split("\n\n")
    tables = [b for before, b in zip(blocks, blocks[1:]) if b.startswith("|") and "extraction time" not in before]
    cells = [c.strip() for table in tables for line in table.splitlines() if re.match(r"\| [\d.]+ \|", line)
             for c in line.strip("|").split("|")[1:]]
    numbers = [c for c in cells if re.fullmatch(r"\*{0,2}[+-]?\d\.\d{3}( ± \d\.\d{3})?\*{0,2}", c)]
    assert numbers and all(" ± " in c for c in numbers)
    assert "Paired difference from PolyDom α=1" in accuracy
    headline = _section(report, "## Headline numbers")
    assert headline.count(" ± ") >= 2 * len(settings.BACKENDS)


def test_stage_timings_add_up_to_the_wall_time(demo_out):
    report = (demo_out / "report.md").read_text()
    wall = float(re.search(r"\*\*Wall time: ([\d.]+) s\*\*", report).group(1))
    stages = _section(report, "Stage timings")
    values = [float(v) for v in re.findall(r"^\| (?!\*\*total)[^|]+ \| ([\d.]+) \|$", stages, flags=re.M)]
    total = float(re.search(r"\| \*\*total\*\* \| \*\*([\d.]+)\*\* \|", stages).group(1))
    assert total == wall and abs(sum(values) - wall) <= 0.1 * len(values)
    fit_rows = re.findall(r"^\| (PolyDom α=1|Greedy) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$",
                          stages, flags=re.M)
    for _, *parts, total in fit_rows:
        assert abs(sum(map(float, parts)) - float(total)) <= 0.25


def test_second_run_reuses_the_cache_and_says_how_far_the_headline_moved(demo_out, capsys):
    first = json.loads((demo_out / "headline.json").read_text())
    assert set(first["backends"]) >= {"PolyDom α=1", "Greedy"}
    assert main(["demo", "--quick", "--out", str(demo_out), "--n-jobs", "1"]) == 0
    err = capsys.readouterr().err
    assert "PolyDom α=1: 0 sets trained" in err
    report = (demo_out / "report.md").read_text()
    assert "Features cached from an earlier run: training yes, held-out yes" in report
    assert "**Reproducibility:** against the previous run" in report
    assert f"generated {first['generated']}" in _section(report, "## Headline numbers")
    assert "| previous run | change |" in report


def test_compare_with_another_runs_output(demo_out, tmp_path, capsys):
    out = tmp_path / "other"
    assert main(["demo", "--quick", "--out", str(out), "--n-jobs", "1", "--compare", str(demo_out),
                 "--cache", str(demo_out / "cache")]) == 0
    capsys.readouterr()
    assert f"`{demo_out / 'headline.json'}`" in (out / "report.md").read_text()


def test_with_tolerance_matches_a_refit(demo_out, tmp_path):
    from polydom.featurizers.datasets import load_digits_images

    images, labels, _ = load_digits_images(sides=(16, 32, 48), n_per_class=6)
    groups = np.arange(len(images)) // 3
    # The cache keeps the first fit's features and cost fits: the refit differs in the tie rule alone.
    params = dict(features=["intensity_hist", "thumbnail", "edge_density"], cv=2, random_state=0, progress=False,
                  timing=polydom.Timing(sides=(16, 24, 32, 48), images=2, repeats=1), cache_dir=tmp_path / "cache",
                  selection=polydom.Selection(tolerance=0.0))
    clf = polydom.CostSensitiveClassifier(**params).fit(images, labels, groups=groups)
    derived = job.with_tolerance(clf, None)
    clf.set_params(selection__tolerance=None).fit(images, labels, groups=groups)
    assert derived.index_.params["tolerance"] is None
    for size in (256, 700, 1024, 2304):
        for budget in np.geomspace(1e-6, 1.0, 25):
            assert derived.index_.lookup(size, budget).key == clf.index_.lookup(size, budget).key


def test_another_seed_draws_other_pictures_and_runs_pool_cell_by_cell(demo_out, tmp_path, repo_root, capsys):
    import runpy

    from lab.answers import load_answers

    other = tmp_path / "seed1"
    assert main(["demo", "--quick", "--out", str(other), "--n-jobs", "1", "--seed", "1"]) == 0
    capsys.readouterr()
    assert "seed 1 (`--seed`)" in (other / "report.md").read_text()
    assert json.loads((other / "headline.json").read_text())["settings"]["random_state"] == 1
    grids0, sizes0, pictures0, y0 = load_answers(demo_out / "answers.npz")
    grids1, sizes1, _, y1 = load_answers(other / "answers.npz")
    assert set(grids0) == set(grids1) >= {settings.PRIMARY, settings.PLAIN, f"{settings.CASCADE_PAIR}/cascade"}
    assert np.array_equal(sizes0, sizes1) and not np.array_equal(y0, y1)  # other pictures at the same sizes
    # The answers file holds what the report judged: the headline's accuracy comes back from it.
    headline = json.loads((demo_out / "headline.json").read_text())["backends"][settings.PRIMARY]
    assert np.allclose([v for v, _ in headline["by_budget"]],
                       polydom.demo.stats.picture_shares(grids0[settings.PRIMARY].correct, pictures0).mean(axis=1))

    # A benchmark judging the run rebuilds the split it measured from its headline alone (seed 1,
    # the quick counts), refuses another dataset, and refuses a directory that holds no run.
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    _, labels, _, test = load_run_split(parser.parse_args(["--out", str(other)]))
    assert np.array_equal(labels[test], y1)
    with pytest.raises(ValueError, match="is a digits run, not fashion-mnist"):
        load_run_split(parser.parse_args(["--out", str(other), "--dataset", "fashion-mnist"]))
    with pytest.raises(SystemExit):
        parser.parse_args(["--out", str(tmp_path / "nowhere")])

    seeds = runpy.run_path(str(repo_root / "benchmarks" / "seeds.py"))
    args = [str(demo_out), str(other), "--name", "quick", "--results", str(tmp_path), "--scores"]
    assert seeds["main"](args) == 0
    pooled = (tmp_path / "seeds-quick.md").read_text()
    for heading in ("## Against the other backends", "## Anytime serving, on time", "## Confidence cascade",
                    "## Monotone against measured scores"):
        assert heading in pooled
    # Served again on the run's recorded times (wall and CPU), ranked as it was fitted (bounded),
    # the primary answers item by item as the run did.
    # (The run this test made: other tests may re-cost the shared run's index.)
    runs = seeds["load_runs"]([str(other)])
    seeds["add_score_grids"]([str(other)], runs)
    grids = runs[0][0]
    assert np.array_equal(grids[seeds["SCORE_GRIDS"]["bounded"]].keys, grids[settings.PRIMARY].keys)
    assert np.array_equal(grids[seeds["SCORE_GRIDS"]["bounded"]].correct, grids[settings.PRIMARY].correct)

    # The probe-interval replay: one row per value, the reference's gap a dash, bad values refused.
    probe = runpy.run_path(str(repo_root / "benchmarks" / "probe_interval.py"))
    assert probe["main"]([str(other), "--values", "1024,64", "--results", str(tmp_path)]) == 0
    rows = [line for line in (tmp_path / "probe-interval.md").read_text().splitlines() if line.startswith("| seed1 |")]
    assert [r.split(" | ")[2] for r in rows] == ["1024", "64"] and rows[0].split(" | ")[4] == "–"
    for bad in ("1024", "256,256", "abc,1"):
        with pytest.raises(SystemExit):
            probe["main"]([str(other), "--values", bad, "--results", str(tmp_path)])
    with pytest.raises(SystemExit, match="not a finished demo run"):
        probe["main"]([str(tmp_path / "nowhere"), "--results", str(tmp_path)])

    # Lookup speed both ways: the same run swept again, both rankings reported.
    speed = runpy.run_path(str(repo_root / "benchmarks" / "lookup_scores.py"))
    assert speed["main"]([str(other), "--queries", "50", "--passes", "2", "--results", str(tmp_path)]) == 0
    report = (tmp_path / "lookup-scores.md").read_text()
    assert "| measured |" in report and "| monotone |" in report and "lookup ×" in report
    assert re.search(r"Pooled: PolyDom α=1 is within one standard error of the best of .* in \*\*\d+ of \d+\*\*", pooled)


def test_a_negative_seed_or_no_fold_draw_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["demo", "--quick", "--seed", "-1"])
    assert stop.value.code == 2 and "--seed must be >= 0" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        main(["demo", "--quick", "--cv-repeats", "0"])
    assert stop.value.code == 2 and "--cv-repeats must be >= 1" in capsys.readouterr().err


def test_headlines_of_runs_with_other_fold_draws_are_not_compared():
    from lab import headline

    settings = {"dataset": "digits", "features": ["thumbnail"], "sides": [28], "train_per_class": 20,
                "held_out_per_class": 50, "cv": 3, "budgets": [0.001], "random_state": 0}
    backends = {"PolyDom α=1": {"mean": 0.9, "se": 0.01, "by_budget": [[0.9, 0.01]]}}
    older = {"settings": settings, "backends": backends}  # written before cv_repeats was recorded
    same = {"settings": {**settings, "cv_repeats": 1}, "backends": backends}
    other = {"settings": {**settings, "cv_repeats": 3}, "backends": backends}
    assert headline.compare(older, same)["status"] == "compared"
    found = headline.compare(older, other)
    assert found["status"] == "different" and found["differs"] == ["cv_repeats"]
