"""The bridge commands through typer (robot_bridge/cli.py: `python -m robot_bridge`, also wired into `worldsample`)."""

from typer.testing import CliRunner

from robot_bridge.cli import app
from robot_bridge.profile import load_profile
from tests.bridge.helpers import small_profile
from tests.bridge.test_bag import fill_store

runner = CliRunner()


def test_help_lists_commands():
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0
    for cmd in ("sim-robot", "bridge", "bag"):
        assert cmd in res.output


def test_bag_export_import(tmp_path):
    prof = small_profile(tmp_path)
    fill_store(tmp_path / "a", load_profile(prof), n=2)
    args = ["bag", "export", str(tmp_path / "a"), str(tmp_path / "bag"), "-p", str(prof)]
    res = runner.invoke(app, [*args, "--episodes", "1", "--storage", "sqlite3"])
    assert res.exit_code == 0, res.output
    assert "exported 1 episode" in res.output
    res = runner.invoke(app, ["bag", "import", str(tmp_path / "bag"), str(tmp_path / "b"), "-p", str(prof)])
    assert res.exit_code == 0, res.output
    assert "imported 1 episode(s), 9 steps" in res.output


def test_bad_profile_is_a_friendly_error(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("name: x\ncontrol_rate_hz: -1\n")
    res = runner.invoke(app, ["bridge", "-p", str(bad), "--run", str(tmp_path / "r"), "--duration", "1"])
    assert res.exit_code == 2 and "control_rate_hz" in res.output
