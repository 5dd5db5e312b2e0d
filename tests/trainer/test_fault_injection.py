"""Fault injection on the main job (`worldsample run --robot bridge`), real processes: each process
of the job in turn is SIGKILLed at a random moment of training, nothing of the run may be left
30 s later, and `worldsample run --resume RUN` continues it. At the end the store verifies, real
steps and episode ids continue without gaps or duplicates, and the summary is right. When the `run`
supervisor is killed, every other process (bridge, simulated arm, dashboard, the local Ray and its
reaper) ends by itself, the bridge as on SIGTERM (its episode closed, the store released).

The victims: the bridge, the simulated arm, the learner's Ray actor process, the dashboard (the
job goes on without it), and the `run` supervisor itself (which is also the trainer driver). Each kill's
cost is printed (run with -s): robot downtime (from the kill to the first real step committed after
the resume command) and learner updates lost (logged by the killed job, not in the checkpoint resumed from).
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from services.dashboard.server import free_port
from worldsample.loop.checkpoint import load_checkpoint
from worldsample.store import EpisodeStore
from worldsample.store.verify import verify_store

from .procs import REAPER, kill_run, left_after, processes_naming, ray_temp_dir
from .tiny import ROOT, TINY, rows

ENV = {**os.environ, "MUJOCO_GL": "egl", "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
# the part of a process's command line that tells which process of the job it is
FINAL_STEPS = 80  # real steps the last resume collects before the run ends
VICTIMS = {"bridge": "robot_bridge bridge", "sim-robot": "robot_bridge sim-robot", "learner": "ray::Learning"}


def real_steps(run) -> int:
    store = EpisodeStore(run)
    return store.reader("real", cache=False).num_steps if "real" in store.groups else 0


def updates(run) -> float:
    if not (run / "metrics.jsonl").exists():
        return 0.0
    return max((r.get("learner/updates", 0.0) for r in rows(run)), default=0.0)


def start(args, log):
    cmd = [sys.executable, "-m", "services.cli.main", "run", *args]
    return subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=log, stderr=subprocess.STDOUT)


def diagnosis(run, log_path) -> str:
    """What a failed wait shows: the job's log, the bridge's and the trainer's last words, the status file."""
    parts = [f"== {log_path.name}\n{log_path.read_text()[-3000:]}"]
    for name in ("bridge.log", "sim-robot.log", "status.json", "events.jsonl"):
        f = run / name
        if f.exists():
            parts.append(f"== {name}\n{f.read_text(errors='replace')[-1500:]}")
    if (run / "metrics.jsonl").exists() and (last := rows(run)[-1:]):
        parts.append(f"== last metrics row\n{json.dumps(last[0])[:1500]}")
    return "\n".join(parts)


def wait_for_learning(p, run, after_updates: float, log_path, timeout=300):
    """Until the learner has taken updates beyond `after_updates` (a round after a (re)start)."""
    deadline = time.monotonic() + timeout
    while updates(run) <= after_updates:
        assert p.poll() is None, diagnosis(run, log_path)
        why = f"no learning beyond {after_updates} updates within {timeout} s"
        assert time.monotonic() < deadline, why + "\n" + diagnosis(run, log_path)
        time.sleep(0.5)


def the_process(run, temp, mark):
    found = [pid for pid, cmd in processes_naming(str(run), temp).items() if mark in cmd]
    assert len(found) == 1, f"{mark}: {found}"
    return found[0]


@pytest.fixture
def no_job_left(tmp_path):
    """Whatever the test's outcome, nothing of the job on tmp_path/run outlives it (a failed assertion
    once left a resumed job with a 100,000-step budget training beside the rest of the suite)."""
    yield
    kill_run(tmp_path / "run")


@pytest.mark.timeout(1500)  # five kills and resumes of the whole job: about 5 min on 2 idle cores
def test_kill_each_process_of_the_main_job_then_resume(tmp_path, no_job_left):
    rng = np.random.default_rng(0)
    run, port = tmp_path / "run", str(free_port())
    log_path = tmp_path / "run.log"
    log = open(log_path, "a")
    p = start(["--out", str(run), "--robot", "bridge", "--port", port, "--set", "demos.episodes=2",
               "--set", "loop.real_steps=100000", "--set", "loop.learner.bc_pretrain_steps=20", *TINY], log)
    costs = {}
    # the dashboard before the learner: the learner's resume starts a new one, which the supervisor's kill must end
    for victim in ("bridge", "sim-robot", "dashboard", "learner", "run"):
        wait_for_learning(p, run, updates(run), log_path)
        if victim == "dashboard":  # the job goes on without it: it keeps learning
            os.kill(the_process(run, ray_temp_dir(run), "services.cli.main dashboard"), signal.SIGKILL)
            wait_for_learning(p, run, updates(run), log_path)
            costs[victim] = (0.0, 0.0)
            continue
        time.sleep(float(rng.uniform(0.0, 3.0)))  # a random moment of training
        temp = ray_temp_dir(run)
        if victim == "run":
            running = " ".join(processes_naming(str(run), temp).values())
            for part in ("robot_bridge bridge", "robot_bridge sim-robot", "dashboard", REAPER, "ray::", "raylet"):
                assert part in running, f"{part} not found: checking that nothing outlives the kill proves nothing"
        pid = p.pid if victim == "run" else the_process(run, temp, VICTIMS[victim])
        os.kill(pid, signal.SIGKILL)
        t_kill = time.monotonic()
        try:
            p.wait(timeout=120)  # the supervisor ends the job when a part of it dies
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the job went on for 120 s after its {victim} was killed\n" + diagnosis(
                run, log_path)) from None
        left = left_after([str(run), temp], timeout=30)
        assert not left, f"after killing the {victim}, still running 30 s later: {left}"
        if victim == "run":
            assert not os.path.exists(temp)
            gone = f"supervisor pid {pid} is gone"
            bridge_log = (run / "bridge.log").read_text()
            assert f"{gone}; ending the episode, holding the arm, releasing the store" in bridge_log
            assert "episodes committed" in bridge_log  # printed after the recorder closed the store
            assert gone in (run / "sim-robot.log").read_text() and gone in (run / "dashboard.log").read_text()
        rep = verify_store(run)  # `store verify`'s check, in this process (the CLI's runs once at the end)
        assert rep.ok, rep.problems
        restored = load_checkpoint(run / "trainer")
        kept = float(restored[0]["learner"]["updates"]) if restored else 0.0
        taken, before_steps = updates(run), real_steps(run)  # what the killed job had logged and committed
        # after the last kill (the supervisor's), a small budget from here ends the run (two 40-step episodes)
        budget = ["--set", f"loop.real_steps={before_steps + FINAL_STEPS}"] if victim == "run" else []
        p = start(["--resume", str(run), "--port", port, *budget], log)
        deadline = time.monotonic() + 300
        while real_steps(run) <= before_steps:
            assert p.poll() is None, diagnosis(run, log_path)
            why = f"no real step within 300 s of resuming after the {victim}"
            assert time.monotonic() < deadline, why + "\n" + diagnosis(run, log_path)
            time.sleep(0.25)
        costs[victim] = (time.monotonic() - t_kill, taken - kept)

    # the last resume ends at its small budget
    assert p.wait(timeout=600) == 0, log_path.read_text()[-3000:]
    budget = before_steps + FINAL_STEPS
    log.close()
    out = log_path.read_text()

    store = EpisodeStore(run)
    real = store.reader("real", cache=False)
    assert sorted(real.records) == list(range(real.num_episodes))  # no gap, nothing twice
    # the summary counts what the trainer learnt from; the bridge may commit an episode more before it stops
    trained = re.search(r"trained (\d+) real steps", out)
    assert trained and budget <= int(trained.group(1)) <= real.num_steps, out[-3000:]
    assert store.reader("demo", cache=False).num_episodes == 2  # demos never collected again
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert sum(e["kind"] == "resume" for e in events) >= 4
    verify = subprocess.run([sys.executable, "-m", "services.cli.main", "store", "verify", str(run)], cwd=ROOT, env=ENV,
                            capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    print("\nkill cost: victim, robot downtime s (kill to the first real step after resuming), learner updates lost")
    for victim, (down, lost) in costs.items():
        print(f"  {victim:10s} {down:6.1f} s  {lost:6.0f} updates")
