"""Suite-wide settings, set before any test module is imported, and the tiny run the whole-job tests share.

- headless rendering for every test that touches MuJoCo;
- no RAY_ADDRESS: a trainer a test starts without --address starts a Ray of its own (the driver's
  ray.init with no address would join the cluster RAY_ADDRESS names, e.g. docker-compose.yml's head);
- Hypothesis (schemathesis' engine) keeps its caches outside the checkout (it writes ./.hypothesis
  by default).
"""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.pop("RAY_ADDRESS", None)
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(Path(tempfile.gettempdir()) / "worldsample-tests-hypothesis"))


@pytest.fixture(scope="session")
def tiny_sim_run_template(tmp_path_factory) -> Path:
    """A run directory as `worldsample run --robot sim --no-train` leaves it, with the whole-job tests'
    tiny config (tests/trainer/tiny.py, two demonstrations): RUN/config.yaml, its history's `start`,
    the demos in the store. Built once a session and never written to: tests take a copy (`tiny_sim_run`)."""
    from typer.testing import CliRunner

    from services.cli.main import app
    from tests.trainer.tiny import TINY

    run = tmp_path_factory.mktemp("tiny_sim_run") / "run"
    res = CliRunner().invoke(app, ["run", "--out", str(run), "--robot", "sim", "--no-train", "--no-dashboard",
                                   "--set", "demos.episodes=2", *TINY], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return run


@pytest.fixture
def tiny_sim_run(tiny_sim_run_template, tmp_path) -> Path:
    """This test's own copy of the session's tiny run (demos and config, no trainer yet)."""
    run = tmp_path / "run"
    shutil.copytree(tiny_sim_run_template, run)
    return run
