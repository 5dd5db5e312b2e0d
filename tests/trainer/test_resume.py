"""`worldsample run --resume RUN` and `worldsample train RUN --resume`: the main job killed
(SIGKILL) once its trainer has a checkpoint continues with one command and the run's own config;
overrides given on resume are printed, saved and recorded in the run's config history. Without
`--resume` an existing run is refused; with it, step counters continue and nothing is lost or twice."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from typer.testing import CliRunner

from services.cli.main import app
from worldsample.config import config_history, load_config, load_run_config, record_config
from worldsample.errors import StoreError
from worldsample.paths import RunFiles
from worldsample.store import EpisodeStore
from worldsample.versioned import VersionedDir

from .tiny import ROOT, TINY, rows

ENV = {**os.environ, "MUJOCO_GL": "egl", "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
BUDGET = 120  # real steps: a few lock-step episodes (at most 40 steps each) after the first checkpoint


def cli(*args: str, timeout: float = 400) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "services.cli.main", *args]
    return subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout)


def descendants(pid: int) -> set[int]:
    """Every process below `pid` now, from /proc."""
    children: dict[int, set[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), set()).add(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.add(child)
            todo.append(child)
    return found


def wait_gone(pids: set[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while pids and time.monotonic() < deadline:
        pids = {p for p in pids if Path(f"/proc/{p}").exists()}
        time.sleep(0.5)


def summary_steps(output: str) -> int:
    m = re.search(r"trained (\d+) real steps", output)
    assert m, output[-3000:]
    return int(m.group(1))


def test_run_killed_after_a_checkpoint_resumes_with_one_command(tmp_path):
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "services.cli.main", "run", "--out", str(run), "--robot", "sim", "--no-dashboard",
           "--set", "demos.episodes=2", "--set", f"loop.real_steps={BUDGET}", *TINY]
    p = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    below: set[int] = set()
    try:
        deadline = time.time() + 300
        while VersionedDir(RunFiles.of(run).trainer).latest() is None:  # published, not only begun
            assert time.time() < deadline, "no trainer checkpoint within 300 s"
            assert p.poll() is None, p.stderr.read().decode()[-3000:]
            time.sleep(0.2)
        below = descendants(p.pid)
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
        p.wait()
    # the killed driver's local Ray goes by itself (or is left): never `ray stop`, other runs may share the machine
    wait_gone(below, timeout=30)
    store = EpisodeStore(run)
    deadline = time.monotonic() + 60
    while store.writer_active("real"):  # the lock-step collector's lock goes with its worker process
        assert time.monotonic() < deadline, "the killed run's collector still holds the real group's writer lock"
        time.sleep(0.5)
    demo = store.reader("demo", cache=False)
    demo_records = dict(demo.records)
    real = store.reader("real", cache=False)
    n_real = real.num_episodes
    assert real.num_steps < BUDGET, "the run finished before it was killed; raise BUDGET"
    n_rows = len(rows(run))
    steps_before = max(r["step"] for r in rows(run))

    # an existing run is never trained on by accident: it takes --resume
    res = cli("train", str(run), *TINY, timeout=120)
    assert res.returncode == 2 and "pass --resume" in " ".join(res.stdout.split() + res.stderr.split())

    res = cli("run", "--resume", str(run), "--no-dashboard", "--set", "loop.eval_episodes=1")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "demonstrations: complete, not collected again" in res.stdout
    assert "resume with overrides: loop.eval_episodes=1" in res.stdout

    demo.refresh()
    assert dict(demo.records) == demo_records  # no demonstration collected again
    real.refresh()
    assert real.num_episodes > n_real
    assert sorted(real.records) == list(range(real.num_episodes))  # no gap, nothing twice
    assert min(r["step"] for r in rows(run)[n_rows:]) >= steps_before  # counters continue, never restart
    logged = {k for r in rows(run) for k in r}
    assert {"episode/length", "qf_loss", "wm/version", "batch/synthetic_share", "policy/version"} <= logged
    assert cli("store", "verify", str(run), timeout=120).returncode == 0
    events = [json.loads(line) for line in RunFiles.of(run).events.read_text().splitlines()]
    assert any(e["kind"] == "resume" and e["source"] == "trainer" for e in events)
    steps = summary_steps(res.stdout)
    assert steps == real.num_steps
    assert BUDGET <= steps < BUDGET + 40  # the budget of the run's own config, not the default's
    assert [e["action"] for e in config_history(run)] == ["start", "resume"]
    assert config_history(run)[-1]["command"] == f"worldsample run --resume {run} --set loop.eval_episodes=1"
    assert config_history(run)[-1]["overrides"] == ["loop.eval_episodes=1"]

    # train --resume starts from RUN/config.yaml too (the default budget would train on for minutes);
    # an override given on resume is printed, saved and recorded
    res = cli("train", str(run), "--resume", "--set", "loop.eval_episodes=0", timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "resume with overrides: loop.eval_episodes=0" in res.stdout
    assert summary_steps(res.stdout) == steps  # the budget was spent: nothing more to collect
    assert "success - -> -" in res.stdout  # the override applied: no evaluation
    saved = yaml.safe_load(RunFiles.of(run).config.read_text())
    assert saved["loop"]["eval_episodes"] == 0 and saved["loop"]["real_steps"] == BUDGET
    last = config_history(run)[-1]
    assert last["action"] == "resume" and last["overrides"] == ["loop.eval_episodes=0"]
    assert last["command"].startswith(f"worldsample train {run} --resume")


def test_run_killed_while_collecting_demos_collects_only_the_missing_ones(tmp_path):
    run, episodes = tmp_path / "run", 8
    cmd = [sys.executable, "-m", "services.cli.main", "run", "--out", str(run), "--robot", "sim", "--no-dashboard",
           "--no-train", "--set", f"demos.episodes={episodes}", "--set", "env.cameras=[]",
           "--set", "env.max_episode_steps=40"]
    p = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 120
        while committed_demos(run) == 0:
            assert time.time() < deadline, "no demonstration committed within 120 s"
            assert p.poll() is None, p.stderr.read().decode()[-3000:]
            time.sleep(0.05)
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
        p.wait()
    committed = committed_demos(run)
    assert 1 <= committed < episodes, "the collection finished before it was killed; raise `episodes`"

    res = cli("run", "--resume", str(run), "--no-dashboard", "--no-train", timeout=120)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert f"demonstrations: {episodes - committed} of {episodes} still to collect" in res.stdout
    demo = EpisodeStore(run).reader("demo", cache=False)
    assert sorted(demo.records) == list(range(episodes))
    seeds = [r.extra["seed"] for r in demo.records.values()]
    assert len(set(seeds)) == episodes  # new initial states, not the killed collection's again
    assert cli("store", "verify", str(run), timeout=120).returncode == 0


def committed_demos(run: Path) -> int:
    try:
        return EpisodeStore(run).reader("demo", cache=False).num_episodes
    except (StoreError, OSError, ValueError):  # no store or demo group yet, or one being created
        return 0


def test_run_config_overlay_and_history(tmp_path):
    base = load_config(None, ["loop.real_steps=1500", "demos.episodes=2"])
    record_config(tmp_path, base, "start", ["worldsample", "run"], overrides=["loop.real_steps=1500"])
    assert load_run_config(tmp_path / "elsewhere") is None
    overlay = tmp_path / "more.yaml"
    overlay.write_text("loop:\n  eval_episodes: 3\n")
    cfg = load_run_config(tmp_path, overlay, ["loop.real_steps=3000"])
    # the run's own values stay unless overridden: the overlay and --set change one field each
    assert (cfg.loop.real_steps, cfg.loop.eval_episodes, cfg.demos.episodes) == (3000, 3, 2)
    record_config(tmp_path, cfg, "resume", ["worldsample", "train", "RUN", "--resume"], overlay=overlay,
                  overrides=["loop.real_steps=3000"])
    assert load_run_config(tmp_path).loop.real_steps == 3000
    with open(RunFiles.of(tmp_path).config_history, "a") as f:
        f.write('{"time": 1, "act')  # a line cut short by a crash
    history = config_history(tmp_path)
    assert [(e["action"], e["overrides"]) for e in history] == [
        ("start", ["loop.real_steps=1500"]), ("resume", ["loop.real_steps=3000"])
    ]
    assert history[1]["config"] == str(overlay) and history[1]["command"] == "worldsample train RUN --resume"


def test_resume_errors_are_one_line(tmp_path):
    runner = CliRunner()
    not_a_run = tmp_path / "notes"
    not_a_run.mkdir()
    (not_a_run / "a.txt").write_text("x")
    cases = [
        (["run", "--out", str(tmp_path / "new"), "--resume", str(not_a_run)], "--out .* and --resume .* together"),
        (["run", "--resume", str(not_a_run)], r"is not a run directory \(no config.yaml and no store\)"),
        (["run", "--out", str(not_a_run), "--no-train"],
         rf"continue that run with `worldsample run --resume {not_a_run}`"),
    ]
    for args, pattern in cases:
        res = runner.invoke(app, args)
        assert res.exit_code == 2, res.output
        assert re.search(pattern, " ".join(res.output.split())), res.output
        assert "Traceback" not in res.output
    assert not (tmp_path / "new").exists()
