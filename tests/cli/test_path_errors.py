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


DRIVER = """
import json, sys
from typer.testing import CliRunner
from services.cli.main import app
for argv in json.loads(sys.stdin.read()):
    r = CliRunner().invoke(app, argv, env={"COLUMNS": "200"})
    print(json.dumps({"argv": argv, "exit": r.exit_code, "out": r.output, "exc": repr(r.exception)}))
"""
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]


def test_unreadable_paths_as_an_unprivileged_user(workdir, tmp_path):
    """As root, permissions stop nobody: the unreadable cases run as user `nobody` (setpriv), in one
    process, over a copy of the work directory that `nobody` may enter but whose `no_read` it may not."""
    import json
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    if os.geteuid() != 0:
        pytest.skip("not root: the parametrized test checks the unreadable cases directly")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    root = Path(__file__).resolve().parents[2]
    probe = subprocess.run([*NOBODY, sys.executable, "-c", "import services.cli.main"], cwd=root, capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"user nobody cannot import this checkout: {probe.stderr.decode()[-300:]}")
    work = Path(tempfile.mkdtemp(prefix="ws_noread_", dir="/tmp"))
    try:
        for name in (FILE, DIR, "okrun", "demorun", "profile.yaml", "bag"):
            src = workdir / name
            (shutil.copytree if src.is_dir() else shutil.copy)(src, work / name)
        (work / NOREAD).mkdir()
        (work / NOREAD / "x").write_text("x")
        os.chmod(work / NOREAD, 0)
        for p in [work, *work.rglob("*")]:
            if p.name != NOREAD and p.parent.name != NOREAD:
                os.chmod(p, 0o755 if p.is_dir() else 0o644)
        cases = [[a.replace("{p}", NOREAD) for a in argv] for argv, _kind in COMMANDS]
        env = {**os.environ, "PYTHONPATH": str(root), "HOME": str(work), "MUJOCO_GL": "egl"}
        res = subprocess.run([*NOBODY, sys.executable, "-c", DRIVER], cwd=work, env=env, input=json.dumps(cases),
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr[-3000:]
        results = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
        assert len(results) == len(cases), res.stdout[-3000:] + res.stderr[-3000:]
        for r in results:
            out = r["out"]
            assert r["exit"] == 2, f"{' '.join(r['argv'])}: exit {r['exit']}: {r['exc']}\n{out}"
            assert "Traceback" not in out, out
            lines = [ln for ln in out.splitlines()
                     if NOREAD in ln and ("error" in ln.lower() or "invalid value" in ln.lower())]
            assert lines, f"{' '.join(r['argv'])}:\n{out}"
        assert sorted(p.name for p in (work / "okrun").iterdir()) == []
        assert not (work / "newbag").exists() and not (work / "newrun").exists()
    finally:
        os.chmod(work / NOREAD, 0o700)
        shutil.rmtree(work, ignore_errors=True)
