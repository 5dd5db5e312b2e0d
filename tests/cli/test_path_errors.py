"""No tracebacks for user mistakes: every `worldsample` command that takes a path, given a file where a
directory belongs, a directory where a file belongs, a missing path or an unreadable one, prints a
one-line error naming the path and exits with code 2."""

import os
import shutil

import pytest
from typer.testing import CliRunner

from robot_bridge.profile import load_profile
from services.cli.main import app
from tests.bridge.helpers import SIM_PROFILE
from tests.bridge.test_bag_checks import foreign_bag
from worldsample.store import EpisodeStore, GroupSchema, KeySpec

FILE, DIR, MISSING, NOREAD = "a_file.txt", "a_dir", "no_such_path", "no_read"

# what each kind of path argument must not be given (unreadable cases are added below)
WRONG = {
    "dir": [FILE, MISSING],  # an existing directory
    "file": [DIR, MISSING],  # an existing file
    "outdir": [FILE],  # a directory, created when missing
    "bag": [FILE, DIR, MISSING],  # a rosbag2 directory or .mcap file
    "new": [FILE, DIR],  # must not exist
}
COMMANDS = [  # argv with {p} for the path under test; the other paths are valid
    (["store", "info", "{p}"], "dir"),
    (["store", "verify", "{p}"], "dir"),
    (["train", "{p}"], "dir"),
    (["train", "demorun", "--config", "{p}"], "file"),
    (["demos", "collect", "--out", "{p}"], "outdir"),
    (["demos", "collect", "--out", "okrun", "--config", "{p}"], "file"),
    (["bag", "import", "{p}", "okrun", "--profile", "profile.yaml"], "bag"),
    (["bag", "import", "bag", "{p}", "--profile", "profile.yaml"], "outdir"),
    (["bag", "import", "bag", "okrun", "--profile", "{p}"], "file"),
    (["bag", "export", "{p}", "newbag", "--profile", "profile.yaml"], "dir"),
    (["bag", "export", "okrun", "{p}", "--profile", "profile.yaml"], "new"),
    (["bag", "export", "okrun", "newbag", "--profile", "{p}"], "file"),
    (["dashboard", "{p}"], "outdir"),  # a dashboard may start before its run does (docker-compose.yml)
    (["eval", "policies", "{p}"], "dir"),
    (["eval", "search", "{p}"], "dir"),
    (["wm", "train", "{p}"], "dir"),
    (["wm", "train", "okrun", "--config", "{p}"], "file"),
    (["wm", "eval", "{p}"], "dir"),
    (["bridge", "--profile", "{p}", "--run", "okrun"], "file"),
    (["bridge", "--profile", "profile.yaml", "--run", "{p}"], "outdir"),
    (["sim-robot", "--profile", "{p}"], "file"),
    (["run", "--out", "{p}"], "outdir"),
    (["run", "--config", "{p}", "--out", "newrun"], "file"),
    (["run", "--resume", "{p}"], "dir"),
]
CASES = [(argv, kind, bad) for argv, kind in COMMANDS for bad in [*WRONG[kind], NOREAD]]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("paths")
    (d / FILE).write_text("not what was asked for\n")
    (d / DIR).mkdir()
    (d / "okrun").mkdir()
    store = EpisodeStore(d / "demorun", create=True)  # what `train` checks before its config
    store.ensure_group("demo", GroupSchema.build({"x": KeySpec(dtype="float32", shape=(2,))}, 2))
    shutil.copy(SIM_PROFILE, d / "profile.yaml")
    foreign_bag(d / "bag", load_profile(SIM_PROFILE), ticks=2)
    (d / NOREAD).mkdir()
    (d / NOREAD / "x").write_text("x")
    os.chmod(d / NOREAD, 0)
    yield d
    os.chmod(d / NOREAD, 0o700)


@pytest.mark.parametrize(("argv", "kind", "bad"), CASES, ids=[f"{' '.join(a)}-{b}" for a, _, b in CASES])
def test_path_mistake_is_one_clear_line_and_exit_2(workdir, monkeypatch, argv, kind, bad):
    if bad == NOREAD and os.geteuid() == 0:
        pytest.skip("running as root: permissions do not stop root from reading")
    monkeypatch.chdir(workdir)
    result = CliRunner().invoke(app, [a.replace("{p}", bad) for a in argv], env={"COLUMNS": "200"})
    out = result.output
    assert result.exit_code == 2, f"exit {result.exit_code}: {result.exception!r}\n{out}"
    assert "Traceback" not in out
    lines = [ln for ln in out.splitlines() if bad in ln and ("error" in ln.lower() or "invalid value" in ln.lower())]
    assert lines, out
    assert not (workdir / "newbag").exists() and not (workdir / "newrun").exists()
    assert sorted(p.name for p in (workdir / "okrun").iterdir()) == []
