"""`worldsample bag import|export` as a user runs them: per-topic counts printed, a useless bag or a
mismatched profile is an error (exit 2) that says why, and nothing is written."""

import json

from typer.testing import CliRunner

from robot_bridge.profile import load_profile
from services.cli.main import app
from tests.bridge.helpers import small_profile
from tests.bridge.test_bag_checks import foreign_bag

runner = CliRunner()


def test_bag_import_prints_counts_and_refuses_useless_bags(tmp_path):
    prof = small_profile(tmp_path)
    foreign_bag(tmp_path / "bag", load_profile(prof), ticks=5, bad={("action", 1)})
    foreign_bag(tmp_path / "big", load_profile(prof), ticks=5, size=48)
    run = tmp_path / "run"

    res = runner.invoke(app, ["bag", "import", str(tmp_path / "big"), str(run), "-p", str(prof)],
                        env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert "no episode imported, nothing written" in res.output
    assert "/cam/corner/image_raw: received 5, accepted 0, rejected wrong_size 5 (wrong_size: 48x48, profile says " \
           "32x32)" in res.output
    assert not run.exists()

    res = runner.invoke(app, ["bag", "import", str(tmp_path / "bag"), str(run), "-p", str(prof),
                              "--report-out", str(tmp_path / "rep.json")], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "/worldsample/action: received 5, accepted 4, rejected malformed 1" in res.output
    assert "imported 1 episode(s), 4 steps" in res.output
    rep = json.loads((tmp_path / "rep.json").read_text())
    assert rep["topics"]["/worldsample/action"]["rejected"] == {"malformed": 1} and rep["episodes"] == [0]

    res = runner.invoke(app, ["bag", "import", str(tmp_path / "bag"), str(run), "-p", str(prof)])
    assert res.exit_code == 2 and "already imported" in res.output

    # export with a profile of another robot: exit 2 before anything is written
    (tmp_path / "other").mkdir()
    other = small_profile(tmp_path / "other", **{"cameras.0.height": 48})
    res = runner.invoke(app, ["bag", "export", str(run), str(tmp_path / "out"), "-p", str(other)],
                        env={"COLUMNS": "200"})
    assert res.exit_code == 2 and "does not match group 'real'" in res.output, res.output
    assert not (tmp_path / "out").exists()
    res = runner.invoke(app, ["bag", "export", str(run), str(tmp_path / "out"), "-p", str(prof)])
    assert res.exit_code == 0 and (tmp_path / "out" / "metadata.yaml").exists(), res.output
