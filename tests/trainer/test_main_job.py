"""`worldsample run --robot bridge`: the main job with every part as in production: the simulated
arm as a ROS 2 robot over DDS on loopback, the bridge recording into Zarr, the trainer on local
Ray with the world model and synthesis, a summary at the end."""

import json
import os
import subprocess
import sys

from worldsample.store import EpisodeStore

from .tiny import ROOT, TINY


def test_run_with_the_simulated_arm_over_dds(tmp_path):
    run = tmp_path / "run"
    env = {**os.environ, "MUJOCO_GL": "egl", "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    cmd = [sys.executable, "-m", "services.cli.main", "run", "--out", str(run), "--robot", "bridge", "--no-dashboard",
           "--set", "demos.episodes=2", "--set", "loop.real_steps=120", "--set", "loop.learner.bc_pretrain_steps=20",
           "--set", "loop.world_model.train.holdout_every=2", "--progress-every", "1", *TINY]
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "simulated arm over DDS" in res.stdout and "trained" in res.stdout
    assert "best evaluated policy: v" in res.stdout
    # the live progress line while it trains (every second here; every 10 s by default)
    progress = [line for line in res.stdout.splitlines() if line.startswith("training  real steps")]
    assert len(progress) >= 2, res.stdout[-3000:]
    assert any("/120 (" in line and " lag " in line for line in progress), progress
    assert "world model v" in res.stdout and "held-out real episodes" in res.stdout  # fidelity in the summary
    # and its success and done heads' precision / recall (issue 17: reported in the run summary)
    assert "world model's heads on held-out real windows" in res.stdout
    assert "success precision" in res.stdout and "done precision" in res.stdout

    store = EpisodeStore(run)
    real = store.reader("real", cache=False)
    assert real.num_steps >= 120
    # recorded by the bridge from the DDS streams: the profile's keys, with the policy's version
    assert "proprio" in store.schema("real").keys
    assert any(r.policy_version is not None for r in real.records.values())
    verify = subprocess.run([sys.executable, "-m", "services.cli.main", "store", "verify", str(run)], cwd=ROOT, env=env)
    assert verify.returncode == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert any("eval/success_rate" in r for r in rows) and any("wm/version" in r for r in rows)
    lags = [r["learner/lag_steps"] for r in rows if "learner/lag_steps" in r]  # logged every learning round
    assert lags, "no learner/lag_steps in metrics.jsonl"
    assert any(k.startswith("wm_eval/h1/") for r in rows for k in r)
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    for name in ("sim-robot", "bridge"):
        assert (run / f"{name}.log").stat().st_size > 0
    # both robot processes are gone
    ps = subprocess.run(["pgrep", "-f", f"--run {run}"], capture_output=True, text=True)
    assert ps.stdout.strip() == ""
