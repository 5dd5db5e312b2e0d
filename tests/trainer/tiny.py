"""The trainer with every actor (sim, learner, world model, synth) on local Ray, then SIGKILL and
--resume: step counters continue, the store verifies, no episode is lost or counted twice."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from services.cli.main import app
from worldsample.store import EpisodeStore
from worldsample.versioned import VersionedDir

from .procs import left_after, ray_temp_dir

ROOT = Path(__file__).resolve().parents[2]
TINY = [
    "--set",
    "env.cameras=[]",
    "--set",
    "env.max_episode_steps=40",
    "--set",
    "loop.eval_episodes=1",
    "--set",
    "loop.learner.hidden=[32,32]",
    "--set",
    "loop.learner.batch_size=64",
    "--set",
    "loop.learner.utd=1",
    "--set",
    "loop.min_real_for_learning=64",
    "--set",
    "loop.synth_branches=4",
    "--set",
    "loop.synth.horizon=5",
    "--set",
    "loop.wm_every_episodes=2",
    "--set",
    "loop.synth_every_episodes=1",
    "--set",
    "loop.checkpoint_every_episodes=1",
    "--set",
    "loop.world_model.train.ae_steps=20",
    "--set",
    "loop.world_model.train.dyn_steps=20",
    "--set",
    "loop.ppl.q_probe=32",
    "--set",
    "loop.learner.bc_pretrain_steps=30",
    "--set",
    "loop.learner.critic_warmup_updates=10",
]


def rows(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


def test_train_kill_and_resume(tmp_path):
    env = {**os.environ, "MUJOCO_GL": "egl", "PYTHONPATH": str(ROOT)}
    res = CliRunner().invoke(
        app, ["demos", "collect", "--episodes", "2", "--out", str(tmp_path), "--set", "env.cameras=[]"]
    )
    assert res.exit_code == 0, res.output

    cmd = [sys.executable, "-m", "services.cli.main", "train", str(tmp_path), "--set", "loop.real_steps=2000", *TINY]
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 240
        while time.time() < deadline:  # wait for a few rounds with checkpoints, then kill mid-run
            ckpts = VersionedDir(tmp_path / "trainer").versions()
            if len(ckpts) >= 3:
                break
            assert p.poll() is None, p.stderr.read().decode()[-3000:]
            time.sleep(0.5)
        else:
            raise AssertionError("no checkpoints within 240 s")
        temp = ray_temp_dir(tmp_path)
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    left = left_after([str(tmp_path), temp], timeout=30)  # the killed driver's local Ray ends by itself
    assert not left, f"still running 30 s after the kill: {left}"

    before = rows(tmp_path)
    steps_before = max(r["step"] for r in before)
    actors = {k for r in before for k in r}
    assert {"episode/length", "qf_loss", "wm/version", "batch/synthetic_share", "policy/version"} <= actors
    real = EpisodeStore(tmp_path).reader("real", cache=False)
    n_real = real.num_episodes

    res = CliRunner().invoke(app, ["train", str(tmp_path), *TINY, "--set", f"loop.real_steps={steps_before + 80}"])
    assert "pass --resume" in " ".join(res.output.split()) and res.exit_code == 2  # rich wraps at the terminal width
    res = CliRunner().invoke(
        app, ["train", str(tmp_path), "--resume", *TINY, "--set", f"loop.real_steps={steps_before + 80}"]
    )
    assert res.exit_code == 0, res.output
    assert "trained" in res.output

    after = rows(tmp_path)[len(before) :]
    assert min(r["step"] for r in after) >= steps_before  # counters continue, never restart
    real.refresh()
    assert real.num_episodes > n_real
    assert sorted(real.records) == list(range(real.num_episodes))  # nothing lost, nothing twice
    res = CliRunner().invoke(app, ["store", "verify", str(tmp_path)])
    assert res.exit_code == 0, res.output
    ev = [json.loads(line)["kind"] for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert "resume" in ev
