"""`demos collect` end to end on the simulated arm, including SIGKILL of the collector."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from services.cli.main import app
from worldsample.demos import SIM_SEED_OFFSET
from worldsample.errors import WorldSampleError
from worldsample.paths import RunFiles
from worldsample.store import EpisodeStore

ROOT = Path(__file__).resolve().parents[1]
FAST = ["--set", "env.max_episode_steps=25", "--set", "env.image_size=32"]


def test_collect_writes_episodes_with_images_and_metadata(tmp_path):
    res = CliRunner().invoke(app, ["demos", "collect", "--episodes", "2", "--out", str(tmp_path), *FAST])
    assert res.exit_code == 0, res.output
    assert "collected 2 episodes into demo" in res.output
    r = EpisodeStore(tmp_path).reader("demo")
    assert r.num_episodes == 2
    ep = r.episode(0)
    assert ep["image_corner"].shape[1:] == (32, 32, 3) and ep["image_corner"].std() > 0
    rec = r.records[0]
    assert rec.domain == "real" and rec.cameras == ["corner"] and rec.extra["seed"] == 0
    # the next collection into the same run continues with new seeds
    res = CliRunner().invoke(
        app, ["demos", "collect", "--episodes", "1", "--out", str(tmp_path), "--domain", "sim", *FAST]
    )
    assert res.exit_code == 0, res.output
    sim = EpisodeStore(tmp_path).reader("sim")
    assert sim.records[0].domain == "sim" and sim.records[0].domain_info


def test_collect_adds_the_configured_sim_episodes_from_their_own_seeds(tmp_path):
    res = CliRunner().invoke(app, ["demos", "collect", "--episodes", "1", "--out", str(tmp_path), *FAST,
                                   "--set", "demos.sim_episodes=1"])
    assert res.exit_code == 0, res.output
    assert "collected 1 episodes into demo" in res.output and "collected 1 episodes into sim" in res.output
    store = EpisodeStore(tmp_path)
    demo, sim = store.reader("demo").records[0], store.reader("sim").records[0]
    assert demo.domain == "real" and sim.domain == "sim"
    assert sim.extra["seed"] == demo.extra["seed"] + SIM_SEED_OFFSET


def committed(run) -> int:
    """Committed demo episodes; 0 while the collector is still creating its store (a reader may
    race the creation of the group's files)."""
    try:
        if not RunFiles.of(run).store.exists() or "demo" not in EpisodeStore(run).groups:
            return 0
        return EpisodeStore(run).reader("demo", cache=False).num_episodes
    except (WorldSampleError, OSError, ValueError):
        return 0


def test_collector_killed_repeatedly_leaves_a_store_that_verifies(tmp_path):
    rng = np.random.default_rng(3)
    cmd = [sys.executable, "-m", "services.cli.main", "demos", "collect", "--episodes", "1000", "--out", str(tmp_path),
           "--set", "env.max_episode_steps=12", "--set", "env.image_size=32", "--set", "store.chunk_len=8"]
    env = {**os.environ, "MUJOCO_GL": "egl"}
    for _ in range(4):
        p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # kill at a random moment of a later episode, once this collector has committed one (its
        # start-up time varies with the machine's load)
        try:
            before, deadline = committed(tmp_path), time.monotonic() + 180
            while committed(tmp_path) <= before:
                assert p.poll() is None and time.monotonic() < deadline, "the collector committed nothing"
                time.sleep(0.1)
            time.sleep(float(rng.uniform(0.0, 1.5)))
        finally:  # killed whatever happens above: a collector left running would hold the store
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
        res = CliRunner().invoke(app, ["store", "verify", str(tmp_path)])
        assert res.exit_code == 0, res.output
    r = EpisodeStore(tmp_path).reader("demo")
    assert r.num_episodes > 0
    seeds = [rec.extra["seed"] for rec in r.episode_records()]
    assert len(set(seeds)) == len(seeds), "a restarted collector must not repeat seeds"
