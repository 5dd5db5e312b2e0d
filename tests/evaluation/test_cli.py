"""`worldsample eval policies|search` through typer's runner, on a run whose world model has
hand-set heads; the report is read back through the dashboard's own report reader."""

import json

from typer.testing import CliRunner

from services.cli.main import app
from services.dashboard.artifacts import list_reports, report_rows
from worldsample.evaluation.recommend import read_recommended


def test_eval_policies_writes_a_report_the_dashboard_shows(run):
    res = CliRunner().invoke(app, ["eval", "policies", str(run), "--policies", "v1,v3,v4", "--n-starts", "2",
                                   "--horizon", "3", "--episodes", "2", "--recommend"])
    assert res.exit_code == 0, res.output
    (path,) = (run / "reports").glob("policy_eval_*.json")
    report = json.loads(path.read_text())
    assert report["kind"] == "policy_eval" and report["recommended"] == "v4" and report["n_starts"] == 2
    assert [report["imagined"][v]["success_rate"] for v in ("v1", "v3", "v4")] == [0.0, 1.0, 1.0]
    assert report["real"]["v1"]["episodes"] == 2 and report["real_seed0"] == 10_000
    assert set(report["metrics"]) == {"success_rate", "success_prob", "mean_return"}
    assert path.with_suffix(".png").stat().st_size > 0
    assert read_recommended(run) == 4
    # the dashboard's policies view: the report is listed with its figures, and its rows compare
    (entry,) = [r for r in list_reports(run) if r.name == path.name]
    assert entry.summary["kind"] == "policy_eval" and entry.summary["recommended"] == "v4"
    rows = {r.policy: r for r in report_rows(run) if r.source == f"report/{path.name}"}
    assert set(rows) == {"v1", "v3", "v4", "v1 (world model)", "v3 (world model)", "v4 (world model)"}
    assert rows["v3 (world model)"].success_rate == 1.0 and rows["v3"].episodes == 2
    assert "Pearson" in res.output and "MMRV" in res.output


def test_eval_policies_without_the_arm_and_bad_versions(run):
    res = CliRunner().invoke(app, ["eval", "policies", str(run), "--no-real", "--n-starts", "2", "--horizon", "2"])
    assert res.exit_code == 0, res.output
    (path,) = (run / "reports").glob("policy_eval_*.json")
    report = json.loads(path.read_text())
    assert report["real"] == {} and "pearson" not in report and report["recommended"] == "v4"
    assert not path.with_suffix(".png").exists()
    bad = CliRunner().invoke(app, ["eval", "policies", str(run), "--policies", "v9", "--no-real"])
    assert bad.exit_code == 2 and "not in the registry" in bad.output
    bad = CliRunner().invoke(app, ["eval", "policies", str(run), "--starts", "nowhere", "--no-real"])
    assert bad.exit_code == 2 and "heldout, sim or auto" in bad.output


def test_eval_search_n1_matches_the_base_policy(run):
    res = CliRunner().invoke(app, ["eval", "search", str(run), "--n", "1", "--horizon", "2", "--episodes", "2",
                                   "--policy", "v2"])
    assert res.exit_code == 0, res.output
    (path,) = (run / "reports").glob("best_of_n_*.json")
    report = json.loads(path.read_text())
    assert report["base_episodes"] == report["search_episodes"] and report["gain"] == 0.0
    assert report["decisions"]["fallbacks"] == 0 and report["decisions"]["decisions"] == 8
    assert [r["policy"] for r in report["policies"]] == ["v2", "v2 best-of-1"]


def test_a_report_never_replaces_one_of_the_same_second(tmp_path, monkeypatch):
    from worldsample.evaluation import policies

    monkeypatch.setattr(policies.time, "strftime", lambda fmt: "20261206-120000")  # one second, three reports
    names = []
    for n in range(3):
        names.append(policies.report_name("best_of_n", tmp_path))
        policies.write_report(tmp_path, {"n": n}, names[-1])
    assert names == ["best_of_n_20261206-120000", "best_of_n_20261206-120000-2", "best_of_n_20261206-120000-3"]
    assert [json.loads((tmp_path / "reports" / f"{x}.json").read_text())["n"] for x in names] == [0, 1, 2]
