"""Dashboard requests reach the bridge process through the run directory, and the bridge reports
the robot's state there (worldsample.runlog)."""

import math

import pytest

from tests.bridge.helpers import Rig, small_profile
from worldsample.runlog import ControlChannel, StatusFile


def test_dashboard_estop_and_episode_requests_reach_the_bridge(tmp_path):
    run = tmp_path / "run"
    profile = small_profile(tmp_path, **{"episode.max_steps": 400})
    with Rig(tmp_path, profile, run) as rig:
        op = rig.op
        op.wait_ready()
        ch = ControlChannel(run)
        ch.send("start_episode")
        op.wait(lambda s: s["state"] == "running" and s["step"] >= 2, 20, "the episode started from the dashboard")
        ch.send("estop")
        st = op.wait(lambda s: s["state"] == "faulted", 10, "the e-stop fault")
        assert st["fault"] == "estop"
        status = StatusFile(run).read()
        assert status.robot is not None and status.robot.connected and status.robot.transport == "dds"
        # the live figures the robot panel shows, measured by the bridge (the profile runs at 20 Hz)
        assert 0 <= status.robot.obs_age_s < 2.0
        # the jitter is measured from the loop's periods: a loop that has ticked is never within half a
        # microsecond of its nominal period on 99 % of its ticks, so 0.0 means the figure was not measured
        jitter = status.robot.jitter_p99_ms
        assert isinstance(jitter, float) and math.isfinite(jitter) and jitter > 0, jitter
        assert round(jitter, 3) == jitter  # reported in whole microseconds
        assert status.robot.control_hz is not None and status.robot.control_hz > 0  # measured (not bounded: load)
        op.wait(lambda s: StatusFile(run).read().robot.estop, 10, "the e-stop in status.json")
        acked = [c for c, acks in ch.history() if c.kind.value == "estop"]
        assert acked, "the e-stop request is in the history"
        op.wait(
            lambda s: any(a.consumer == "bridge" for c, acks in ch.history() if c.kind.value == "estop" for a in acks),
            10,
            "the ack",
        )


def wait_observations(op, n: int, timeout_s: float = 60.0) -> dict:
    """Wait until the bridge has accepted `n` more robot observations (`n` more control ticks'
    worth of chances to act) and return its status then."""
    first = op.status["topics"]["proprio"]["accepted"]
    return op.wait(lambda s: s["topics"]["proprio"]["accepted"] >= first + n, timeout_s,
                   f"{n} more observations accepted by the bridge")


def test_auto_start_and_exploration_for_unattended_online_rl(tmp_path):
    import numpy as np

    from tests.bridge.helpers import publish_policy
    from worldsample.policy import load_actor
    from worldsample.store import EpisodeStore

    run = tmp_path / "run"
    publish_policy(run, seed=3, scale=0.1, stochastic=True)
    profile = small_profile(tmp_path, **{"episode.max_steps": 8, "episode.auto_start": True, "episode.explore": True,
                                         "action.max_delta": 10.0})
    with Rig(tmp_path, profile, run) as rig:
        rig.op.wait(lambda s: s["episodes"]["committed"] >= 2, 60, "two episodes without a start command")
    reader = EpisodeStore(run).reader("real")
    actor = load_actor(run)
    ep = reader.episode(reader.episode_records()[0].episode)
    mean = np.stack([actor.act({"proprio": p, "state": s}) for p, s in zip(ep["proprio"], ep["state"])])
    assert np.abs(ep["action"] - mean).mean() > 1e-3  # sampled around the mean, not the mean itself


def test_unattended_episodes_wait_for_the_first_policy(tmp_path):
    from tests.bridge.helpers import publish_policy

    run = tmp_path / "run"
    profile = small_profile(tmp_path, **{"episode.max_steps": 8, "episode.auto_start": True, "action.max_delta": 10.0})
    with Rig(tmp_path, profile, run) as rig:
        st = rig.op.wait_ready()
        st = wait_observations(rig.op, 40)  # ready, auto-start on, 40 ticks, but nothing to act with: no episode
        assert st["state"] in ("idle", "ended") and st["episodes"]["committed"] == 0 and st["policy_version"] is None
        publish_policy(run, seed=3, scale=0.1)
        st = rig.op.wait(lambda s: s["episodes"]["committed"] >= 1, 60, "an episode once a policy exists")
        assert st["policy_version"] == 1
        rig.op.wait(lambda s: StatusFile(run).read().robot.policy_version == 1, 10, "the policy version in status.json")


def test_unattended_episodes_stop_at_the_step_budget(tmp_path):
    """With `episode.auto_start_steps` the bridge starts no episode once the group holds that many
    committed steps, counting what earlier runs stored (the main job's real-step budget: before, the
    arm went on collecting while the learner caught up, 6,328 real steps for a budget of 4,000)."""
    from tests.bridge.helpers import publish_policy
    from worldsample.store import EpisodeStore

    run = tmp_path / "run"
    publish_policy(run, seed=3, scale=0.1)

    def steps() -> list[int]:
        return [r.length for r in EpisodeStore(run).reader("real").episode_records()]

    for budget in (12, 20):
        profile = small_profile(tmp_path, **{"episode.max_steps": 8, "episode.auto_start": True,
                                             "episode.auto_start_steps": budget, "action.max_delta": 10.0})
        before = sum(steps()) if budget == 20 else 0  # the first run's steps
        with Rig(tmp_path, profile, run) as rig:
            rig.op.wait(lambda s, b=budget: s["episodes"]["committed"] >= 1 and sum(steps()) >= b, 60,
                        f"{budget} committed steps")
            st = wait_observations(rig.op, 40)  # ticks enough for several more 8-step episodes: none starts
            assert st["state"] in ("idle", "ended"), st
        got = sum(steps())
        assert budget <= got < budget + 8 and got > before, (budget, before, steps())


def test_the_exploration_noise_falls_with_the_committed_steps(tmp_path):
    """With `episode.explore_scale_end` each episode samples with the scale its start's committed steps give
    (`explore_anneal_steps`): full noise on the first 8-step episode, the end scale from 16 steps on; the
    bridge reports the scale it runs."""
    import numpy as np

    from tests.bridge.helpers import publish_policy
    from worldsample.policy import load_actor
    from worldsample.store import EpisodeStore

    run = tmp_path / "run"
    publish_policy(run, seed=3, scale=0.1, stochastic=True)
    profile = small_profile(tmp_path, **{"episode.max_steps": 8, "episode.auto_start": True, "episode.explore": True,
                                         "episode.explore_scale_end": 0.05, "episode.explore_anneal_steps": [8, 16],
                                         "action.max_delta": 10.0})
    with Rig(tmp_path, profile, run) as rig:
        st = rig.op.wait(lambda s: s["episodes"]["committed"] >= 5, 60, "five episodes")
        assert st["explore_scale"] == pytest.approx(0.05), st["explore_scale"]
    reader = EpisodeStore(run).reader("real")
    actor = load_actor(run)

    def spread(record) -> float:  # how far the sampled actions stray from the policy's mean
        ep = reader.episode(record.episode)
        mean = np.stack([actor.act({"proprio": p, "state": s}) for p, s in zip(ep["proprio"], ep["state"])])
        return float(np.abs(ep["action"] - mean).mean())

    records = reader.episode_records()
    first, late = spread(records[0]), [spread(r) for r in records[3:]]  # 0 and >= 16 committed steps at their start
    assert first > 1e-3 and max(late) < first / 4, (first, late)


@pytest.mark.parametrize("follow", ["latest", "recommended"])
def test_unattended_episodes_wait_for_the_learner_to_catch_up(tmp_path, follow):
    """With `episode.max_policy_lag_steps` an unattended episode starts only while the newest policy was
    trained on all but that many of the committed steps (`source.real_steps`): the arm waits for a newer
    policy instead of collecting ahead of the learner (before: 6,328 real steps collected for a 4,000-step
    budget by a main job whose learner was four times slower than the arm). Following `recommended`,
    pinned to the first version, the robot keeps running it and the learner's progress still counts."""
    from tests.bridge.helpers import publish_policy
    from worldsample.evaluation.recommend import write_recommended
    from worldsample.store import EpisodeStore

    run = tmp_path / "run"
    publish_policy(run, seed=3, scale=0.1, source={"real_steps": 0})
    if follow == "recommended":
        write_recommended(run, 1)

    def steps() -> int:
        return sum(r.length for r in EpisodeStore(run).reader("real").episode_records())

    profile = small_profile(tmp_path, **{"episode.max_steps": 8, "episode.auto_start": True,
                                         "episode.max_policy_lag_steps": 10, "episode.policy": follow,
                                         "action.max_delta": 10.0})
    with Rig(tmp_path, profile, run) as rig:
        st = rig.op.wait(lambda s: s["learner_waits"]["waiting"], 60, "the bridge waiting for the learner")
        held = steps()
        # the last episode started at a lag of at most 10 and lasted at most 8 steps
        assert 10 < held <= 18 and st["policy_lag_steps"] == held, (held, st["policy_lag_steps"])
        st = wait_observations(rig.op, 40)  # ticks enough for several more 8-step episodes: none starts
        assert st["state"] in ("idle", "ended") and st["learner_waits"]["waiting"] and steps() == held, st
        publish_policy(run, seed=3, scale=0.1, source={"real_steps": held})  # the learner caught up
        st = rig.op.wait(lambda s: s["episodes"]["committed"] >= 1 and steps() > held, 60,
                         "the next episode once a policy trained on the committed steps exists")
        st = rig.op.wait(lambda s: s["learner_waits"]["seconds"] > 0, 30, "the wait counted")
        assert st["learner_waits"]["episodes"] >= 1 and st["policy_version"] == (2 if follow == "latest" else 1)
        rig.op.wait(lambda s: StatusFile(run).read().robot.learner_wait_s > 0, 10, "the wait in status.json")


def test_unattended_episodes_start_again_after_a_stalled_sensor(tmp_path):
    """The simulated arm stalls (SIGSTOP) long enough for its streams to go stale: the bridge faults,
    holds the arm, and with auto_start starts again once every stream has been fresh for
    `fault_recover_s`; with `fault_recover_s: null` it stays faulted until the operator clears it."""
    import os
    import signal

    from tests.bridge.helpers import publish_policy

    for recover in (1.0, None):
        run = tmp_path / f"run_{recover}"
        publish_policy(run, seed=3, scale=0.1)
        profile = small_profile(tmp_path, **{"episode.max_steps": 400, "episode.auto_start": True,
                                             "episode.fault_recover_s": recover, "action.max_delta": 10.0})
        with Rig(tmp_path, profile, run) as rig:
            rig.op.wait(lambda s: s["state"] == "running" and s["step"] >= 3, 60, "the first unattended episode")
            os.kill(rig.sim.p.pid, signal.SIGSTOP)  # the robot's computer stalls until its streams go stale
            try:
                rig.op.wait(lambda s: s["state"] == "faulted" and (s["fault"] or "").startswith("stale:"), 30,
                            "the stale fault while the arm is stopped")
            finally:
                os.kill(rig.sim.p.pid, signal.SIGCONT)
            st = rig.op.wait(lambda s: s["state"] == "faulted" or s["recoveries"] >= 1, 20, "the stale fault")
            assert st["recoveries"] >= 1 or st["fault"].startswith("stale:"), st
            if recover is not None:
                st = rig.op.wait(lambda s: s["recoveries"] >= 1 and s["state"] == "running", 30,
                                 "the next episode once the streams were fresh again")
                assert st["fault"] is None
                continue
            # fresh again for 80 ticks (at 20 Hz 4 s, longer than the other profile's 1 s): still faulted
            rig.op.wait(lambda s: not s["stale"], 30, "the streams fresh again")
            st = wait_observations(rig.op, 80)
            assert st["state"] == "faulted" and st["recoveries"] == 0 and st["fault"].startswith("stale:"), st
            rig.op.send("clear_fault")
            rig.op.wait(lambda s: s["state"] == "running", 30, "auto-start once the operator cleared the fault")
