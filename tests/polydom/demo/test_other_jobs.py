"""``polydom demo --dataset policies`` and ``--dataset backlog``: each job runs end to end on a few
small generated images and writes a report whose numbers are the ones it returns."""

import pytest

from polydom.cli import main
from polydom.demo.backlog import BacklogSettings, run_backlog
from polydom.demo.policies import PolicySettings, run_policies

TWO = ("intensity_hist", "edge_density")
SMALL = ((100, 120), (160, 200))


def test_the_policies_job_compares_one_walk_with_one_classifier_per_label(tmp_path):
    settings = PolicySettings(n_train=30, n_held=8, budgets=(0.002, 0.05), shape=SMALL, features=TWO)
    ctx = run_policies(tmp_path / "report.md", settings=settings, log=lambda message: None)
    rows = ctx["rows"]
    assert [r["budget"] for r in rows] == [0.002, 0.05]
    for r in rows:
        assert 0.0 <= r["one"] <= 1.0 and 0.0 <= r["per"] <= 1.0
        assert r["diff"] == pytest.approx(r["one"] - r["per"], abs=1e-12)  # both averaged over the same cells
        assert len(r["one_labels"]) == len(ctx["labels"]) == 5
    text = (tmp_path / "report.md").read_text()
    assert text.count("\n| 2 ms |") == 2 and "What the multilabel index ranks by" in text


def test_the_backlog_job_reports_recall_against_the_budget(tmp_path):
    settings = BacklogSettings(n_backlog=40, k=4, n_train=40, positive_share=0.1, fractions=(0.1, 0.5),
                               shape=SMALL, features=TWO)
    ctx = run_backlog(tmp_path / "report.md", settings=settings, backlog_dir=tmp_path / "backlog",
                      log=lambda message: None)
    assert ctx["positives"] == 4 and len(ctx["triage"]) == 2
    for run in ctx["triage"]:
        assert 0.0 <= run["recall"] <= 1.0
        assert run["spent"] <= run["budget"] + run["longest"] + 1e-9  # never past the budget by more than one step
    assert ctx["verdict"]["overruns"] == 0
    assert (tmp_path / "backlog" / "labels.csv").is_file()
    assert any(p.name.startswith("extraction-") for p in (tmp_path / "backlog").iterdir())  # kept for a rerun
    assert "| all features |" in (tmp_path / "report.md").read_text()


def test_the_demo_command_offers_both_jobs(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["demo", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "policies" in out and "backlog" in out
