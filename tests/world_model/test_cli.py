"""`wm train` and `wm eval` through typer's runner."""

import json

from typer.testing import CliRunner

from services.cli.wm_cmd import app
from tests.world_model.helpers import toy_store

TINY = [
    "--set",
    "autoencoder.width=8",
    "--set",
    "dynamics.width=16",
    "--set",
    "dynamics.blocks=1",
    "--set",
    "dynamics.history=2",
    "--set",
    "train.ae_steps=4",
    "--set",
    "train.dyn_steps=4",
    "--set",
    "train.batch=4",
    "--set",
    "generator.diffusion_steps=2",
]


def test_train_then_eval(tmp_path):
    toy_store(tmp_path, episodes=5, length=20)
    res = CliRunner().invoke(app, ["train", str(tmp_path), "--mode", "demo", "--generator", "diffusion", *TINY])
    assert res.exit_code == 0, res.output
    assert "saved" in res.output and (tmp_path / "world_model" / "v000001" / "model.safetensors").exists()
    res = CliRunner().invoke(app, ["eval", str(tmp_path), "--horizons", "1,4", "--per-episode", "2"])
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "world_model" / "eval" / "report.json").read_text())
    assert set(report["horizons"]) == {"1", "4"} and report["generator"] == "diffusion"
    assert (tmp_path / "world_model" / "eval" / "strip.png").stat().st_size > 0


def test_errors_are_one_line_messages(tmp_path):
    toy_store(tmp_path, episodes=2, length=8)
    res = CliRunner().invoke(app, ["train", str(tmp_path), "--mode", "nope"])
    assert res.exit_code == 2 and "--mode must be" in res.output
    res = CliRunner().invoke(app, ["train", str(tmp_path), "--set", "dynamics.widht=3"])
    assert res.exit_code == 2 and "widht" in res.output
    res = CliRunner().invoke(app, ["eval", str(tmp_path)])
    assert res.exit_code == 2 and "train one first" in " ".join(res.output.split())
    res = CliRunner().invoke(app, ["train", str(tmp_path), "--mode", "cotrain", *TINY])
    assert res.exit_code == 2 and "sim" in res.output
