"""`kill -9` of `worldsample run --robot bridge` once it has learnt from an episode: the bridge, the
simulated arm, the dashboard and every process of the run's local Ray end by themselves within
30 s, the bridge as on SIGTERM (its episode closed, the store released), and the store verifies."""

import os
import signal
import subprocess
import sys
import time

from services.dashboard.server import free_port

from .procs import REAPER, left_after, processes_naming, ray_temp_dir
from .test_train_e2e import ROOT, TINY, rows


def test_nothing_outlives_a_killed_main_job(tmp_path):
    run = tmp_path / "run"
    env = {**os.environ, "MUJOCO_GL": "egl", "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    cmd = [sys.executable, "-m", "services.cli.main", "run", "--out", str(run), "--robot", "bridge",
           "--port", str(free_port()), "--set", "demos.episodes=2", "--set", "loop.real_steps=5000",
           "--set", "loop.learner.bc_pretrain_steps=20", *TINY]
    with open(tmp_path / "run.log", "w") as log:
        p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while not ((run / "metrics.jsonl").exists() and any(r["step"] > 0 for r in rows(run))):
            assert p.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no round on a real episode within 300 s"
            time.sleep(0.5)
        temp = ray_temp_dir(run)
        running = " ".join(processes_naming(str(run), temp).values())
        for part in ("robot_bridge bridge", "robot_bridge sim-robot", "dashboard", REAPER, "ray::", "raylet"):
            assert part in running, f"{part} not found: the search below would prove nothing"
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()

    left = left_after([str(run), temp], timeout=30)
    assert not left, f"still running 30 s after the kill: {left}"
    assert not os.path.exists(temp)
    bridge_log = (run / "bridge.log").read_text()
    assert f"supervisor pid {p.pid} is gone; ending the episode, holding the arm, releasing the store" in bridge_log
    assert "episodes committed" in bridge_log  # printed after the recorder closed the store
    assert f"supervisor pid {p.pid} is gone" in (run / "sim-robot.log").read_text()
    assert f"supervisor pid {p.pid} is gone" in (run / "dashboard.log").read_text()
    verify = subprocess.run([sys.executable, "-m", "services.cli.main", "store", "verify", str(run)], cwd=ROOT,
                            env=env, capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
