"""Suite-wide settings, set before any test module is imported, and the tiny run the whole-job tests share.

- headless rendering for every test that touches MuJoCo;
- no RAY_ADDRESS: a trainer a test starts without --address starts a Ray of its own (the driver's
  ray.init with no address would join the cluster RAY_ADDRESS names, e.g. docker-compose.yml's head);
- Hypothesis (schemathesis' engine) keeps its caches outside the checkout (it writes ./.hypothesis
  by default);
- under pytest-xdist (`make test` runs the suite on several workers) each worker draws DDS domains
  from a slice of its own (WORLDSAMPLE_DDS_DOMAINS, read by the jobs the tests start and by
  tests/bridge/helpers.new_domain), so that two workers' robots never talk to each other.
"""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.pop("RAY_ADDRESS", None)
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(Path(tempfile.gettempdir()) / "worldsample-tests-hypothesis"))


def _worker_domains() -> str:
    """This worker's slice of DDS domains 1-200 ("LO-HI"); all of them without xdist."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or count <= 1:
        return "1-200"
    size = 200 // count
    lo = 1 + int(worker[2:]) * size
    return f"{lo}-{lo + size - 1}"


os.environ["WORLDSAMPLE_DDS_DOMAINS"] = _worker_domains()

# the files whose tests run a whole job for a minute or more, longest first: collected first, so that
# xdist's workers (make test: --dist loadfile) start them at once instead of one of them finishing alone at the end
LONG_FIRST = [
    "tests/trainer/test_fault_injection.py",
    "tests/deploy/test_multinode.py",
    "tests/trainer/test_resume.py",
    "tests/store/test_crash.py",
    "tests/trainer/test_main_job.py",
    "tests/bridge/test_faults.py",
    "tests/test_demos.py",
]


def pytest_collection_modifyitems(config, items):
    rank = {path: i for i, path in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: the rest keep their order


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
