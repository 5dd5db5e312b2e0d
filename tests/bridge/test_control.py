"""Episode control over plain topics: labels, re-record, hot-swap, e-stop, watchdog, takeovers."""

import time

import numpy as np
import pytest

from tests.bridge.helpers import Rig, publish_policy, small_profile
from worldsample.store import EpisodeStore
from worldsample.store.verify import verify_store


def running(op, steps=3, timeout=30):
    return op.wait(lambda s: s["state"] in ("running", "intervened") and s["step"] >= steps, timeout, f"{steps} steps")


def test_episode_control_estop_watchdog(tmp_path):
    run = tmp_path / "run"
    publish_policy(run, seed=1)
    profile = small_profile(tmp_path, **{"episode.max_steps": 400})
    with Rig(tmp_path, profile, run) as rig:
        op = rig.op
        op.wait_ready()
        # labels end an episode
        for label, n in (("success", 1), ("failure", 2)):
            op.send("start")
            running(op, 5)
            op.send(label)
            st = op.wait(lambda s, n=n: s["episodes"]["committed"] == n, 20, f"{label} commit")
            assert st["last_outcome"] == label and st["state"] == "ended"
        # re-record throws the attempt away and starts over
        op.send("start")
        running(op)
        op.send("rerecord")
        op.wait(lambda s: s["episodes"]["discarded"] == 1, 20, "the discarded attempt")
        running(op, 2)
        # a new policy arrives mid-episode: used from the next episode on
        assert publish_policy(run, seed=2) == 2
        time.sleep(0.3)
        op.send("stop")
        st = op.wait(lambda s: s["episodes"]["committed"] == 3, 20, "stop commit")
        assert st["policy_version"] == 1
        op.send("start")
        running(op, 2)
        assert op.status["policy_version"] == 2
        # e-stop: fault, discard, hold, refuse to start until released
        op.estop(True)
        st = op.wait(lambda s: s["state"] == "faulted" and s["episodes"]["discarded"] == 2, 10, "the e-stop fault")
        assert st["fault"] == "estop"
        time.sleep(0.4)
        n = len(op.actions)
        time.sleep(0.3)
        assert len(op.actions) > n and all(not a.any() for a in op.actions[n:])  # holding: zero deltas
        op.send("start")
        op.wait(lambda s: any("e-stop" in r for r in s["refused"]), 10, "the refused start")
        op.estop(False)
        op.send("clear_fault")
        op.wait(lambda s: s["state"] == "idle", 10, "the cleared fault")
        # watchdog: the robot dies mid-episode
        op.send("start")
        running(op, 2)
        rig.sim.kill()
        st = op.wait(lambda s: s["state"] == "faulted", 10, "the stale fault")
        assert st["fault"].startswith("stale:")
        st = op.wait(lambda s: s["episodes"]["discarded"] == 3, 10, "the faulted episode to be dropped")
        assert st["episodes"]["committed"] == 3
        assert rig.bridge.p.poll() is None
        assert rig.bridge.stop() == 0

    assert verify_store(run).ok
    recs = EpisodeStore(run).reader("real", cache=False).episode_records()
    assert [(r.extra["outcome"], r.success, r.terminated, r.policy_version) for r in recs] == [
        ("success", True, True, 1), ("failure", False, False, 1), ("stop", False, False, 1)]
    ep = EpisodeStore(run).reader("real").episode(0)
    assert ep["done"][-1] and ep["reward"][-1] == 1.0 and ep["success"][-1] and not ep["done"][:-1].any()


def test_simulated_human_takeovers_are_flagged(tmp_path):
    run = tmp_path / "run"
    publish_policy(run, seed=3, scale=3.0)  # saturated random actions: the human will step in
    profile = small_profile(tmp_path, **{"episode.max_steps": 40})
    with Rig(tmp_path, profile, run, sim_args=["--intervene"]) as rig:
        rig.op.wait_ready()
        st = rig.op.record_episode(40)
        assert st["episodes"]["committed"] == 1
    reader = EpisodeStore(run).reader("real")
    rec = reader.episode_records()[0]
    ep = reader.episode(0)
    assert rec.interventions > 0 and rec.interventions == int(ep["intervention"].sum())
    assert not ep["intervention"].all()  # the policy drove too
    # flagged steps carry the human's (limited) action, not the policy's
    assert np.abs(ep["action"][ep["intervention"]]).max() <= 1.0


def test_the_simulated_human_takes_the_settings_it_is_given(tmp_path):
    """--human reaches the sim-robot's human: a stall trigger patient for longer than the episode never
    takes over the saturated random policy that the default human takes over above."""
    run = tmp_path / "run"
    publish_policy(run, seed=3, scale=3.0)
    profile = small_profile(tmp_path, **{"episode.max_steps": 40})
    patient = '{"trigger": "stall", "stall_steps": 1000}'
    with Rig(tmp_path, profile, run, sim_args=["--intervene", "--human", patient]) as rig:
        rig.op.wait_ready()
        assert rig.op.record_episode(40)["episodes"]["committed"] == 1
    assert EpisodeStore(run).reader("real").episode_records()[0].interventions == 0


@pytest.mark.parametrize(("args", "message"), [
    (["--intervene", "--human", '{"trigger": "mood"}'], "trigger"),
    (["--intervene", "--human", "{not json"], "--human"),
    (["--human", '{"trigger": "stall"}'], "--intervene"),
])
def test_bad_human_settings_are_refused(tmp_path, args, message):
    from typer.testing import CliRunner

    from robot_bridge.cli import app

    res = CliRunner().invoke(app, ["sim-robot", "--profile", str(small_profile(tmp_path)), "--duration", "1", *args])
    assert res.exit_code != 0 and message in res.output


def test_the_main_jobs_human_settings_reach_the_sim_robot():
    from services.cli.dds_robot import sim_robot_args
    from worldsample.config import load_config
    from worldsample.sim.config import InterventionConfig

    cfg = load_config(None, ["intervention.trigger=stall", "intervention.stall_steps=12"])
    args = sim_robot_args(cfg)
    assert args[0] == "--intervene"
    assert InterventionConfig.model_validate_json(args[args.index("--human") + 1]) == cfg.intervention
    assert sim_robot_args(load_config(None, ["loop.interventions=false"])) == []
