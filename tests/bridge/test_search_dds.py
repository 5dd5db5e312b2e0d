"""Best-of-N search in the bridge's control loop, end to end: the bridge process over DDS on
loopback drives the simulated arm with `episode.search` on, imagining in the run's world model
(its ONNX export, onnxruntime) at every tick. The recorded episodes carry the search's counts,
the executed actions are the ones the world model prefers (not the base policy's), and the loop
reports its timing. Without a usable world model the bridge refuses to start, saying why."""

import json

import numpy as np

from tests.bridge.helpers import Proc, Rig, new_domain, small_profile
from tests.evaluation.helpers import policy_tensors, rigged_model
from worldsample.paths import RunFiles
from worldsample.policy import PolicyRegistry
from worldsample.store import EpisodeStore
from worldsample.world_model import checkpoint

SEARCH = {"n": 8, "horizon": 5, "budget_ms": 25}


def test_the_bridge_searches_in_the_world_model_at_every_tick(tmp_path):
    run = tmp_path / "run"
    checkpoint.save(RunFiles.of(run).world_model, rigged_model())  # success needs a0 above ~0.35
    # the base policy's a0 is -0.3 whatever it sees: what it would send without the search
    version = PolicyRegistry(run).publish(*policy_tensors(-0.3, stochastic=True, log_std=0.5))
    profile = small_profile(tmp_path, **{"episode.search": SEARCH, "episode.max_steps": 30})
    stats_file = tmp_path / "bridge_stats.json"
    with Rig(tmp_path, profile, run, bridge_args=["--stats-out", str(stats_file)]) as rig:
        op = rig.op
        op.wait_ready()
        for _ in range(2):
            st = op.record_episode()
        assert st["episodes"]["committed"] == 2 and st["policy_version"] == version, st
        live = st["search"]
        assert live["active"] and live["world_model_version"] == 1 and live["error"] is None, live
        assert rig.bridge.stop() == 0
    stats = json.loads(stats_file.read_text())

    reader = EpisodeStore(run).reader("real")
    records = reader.episode_records()
    assert len(records) == 2
    for rec in records:
        s = rec.extra["search"]
        assert s["active"] and (s["n"], s["horizon"], s["budget_ms"]) == (8, 5, 25) and s["samples"] == 1, s
        # one decision per tick of the episode (max_steps 30, unless the arm succeeded first)
        assert s["decisions"] == rec.length <= 30 and s["searched"] + s["fallbacks"] == s["decisions"], s
        assert s["searched"] >= 10 and s["chose_base"] < s["searched"], s  # it searched, and it changed actions
        a0 = reader.episode(rec.episode)["action"][:, 0]
        assert (a0 > 0.3).sum() >= 0.5 * s["searched"], a0  # the candidates the model predicts to succeed
        assert np.isclose(a0, -0.3, atol=1e-5).sum() >= s["fallbacks"], a0  # a fallback sends the base action
        assert rec.wall_time_end > rec.wall_time_start  # the store's first step to its commit (not bounded)
    # the loop's timing figures are reported (their size depends on the machine's load, so not bounded)
    ticks = sum(r.length for r in records)
    assert isinstance(stats["overruns"], int) and 0 <= stats["overruns"] <= ticks, stats
    assert 0 <= stats["period_jitter_ms"]["p50"] <= stats["period_jitter_ms"]["p99"], stats
    assert stats["episodes"]["committed"] == 2


def test_without_a_world_model_export_the_bridge_refuses_to_start(tmp_path):
    run = tmp_path / "run"
    vdir = checkpoint.save(RunFiles.of(run).world_model, rigged_model()).parent
    (vdir / "model.onnx").unlink()
    profile = small_profile(tmp_path, **{"episode.search": SEARCH})
    with Proc(["bridge", "--profile", str(profile), "--run", str(run), "--loopback", "--duration", "20"],
              new_domain(), tmp_path / "bridge.log") as p:
        rc = p.p.wait(60)
        out = p.output()
    assert rc == 2, out
    assert "world model v1" in out and "model.onnx is missing" in out and "Traceback" not in out, out
    assert sorted(p.name for p in run.iterdir()) == ["world_model"]  # no store, nothing recorded
