"""sim-robot and bridge as separate processes on loopback DDS, recording into a real store."""

import numpy as np

from robot_bridge.sim_robot import image_step
from tests.bridge.helpers import Rig, publish_policy, small_profile
from worldsample.policy import load_actor
from worldsample.store import EpisodeStore
from worldsample.store.verify import verify_store


def contains_run(haystack: list[np.ndarray], needle: np.ndarray) -> bool:
    """`needle` (n, d) appears as consecutive rows of `haystack`."""
    hay = np.stack(haystack)
    n = len(needle)
    return any(np.array_equal(hay[i : i + n], needle) for i in range(len(hay) - n + 1))


def test_episodes_recorded_end_to_end(tmp_path):
    run = tmp_path / "run"
    publish_policy(run)
    actor = load_actor(run)
    with Rig(tmp_path, small_profile(tmp_path), run) as rig:
        op = rig.op
        op.wait_ready()
        for _ in range(3):
            st = op.record_episode()
            assert st["last_outcome"] == "max_steps"
        assert st["episodes"]["committed"] == 3 and st["policy_version"] == 1
        actions_on_wire = list(op.actions)
        topics = st["topics"]
        assert rig.bridge.stop() == 0  # clean shutdown releases the writer

    assert verify_store(run).ok
    reader = EpisodeStore(run).reader("real")
    recs = reader.episode_records()
    assert [r.episode for r in recs] == [0, 1, 2]
    for r in recs:
        assert r.length == 15 and r.policy_version == 1 and r.extra["outcome"] == "max_steps"
        ep = reader.episode(r.episode)
        # action echo: what was stored is what went over the wire, in order
        assert contains_run(actions_on_wire, ep["action"])
        # the stored action is the policy's action on the stored observation (limits do not bind here)
        for k in (0, 7, 14):
            stored_obs = {"proprio": ep["proprio"][k], "state": ep["state"][k]}
            np.testing.assert_array_equal(ep["action"][k], actor.act(stored_obs))
        # alignment: camera frames come from consecutive physics steps, one per control tick
        steps = np.array([image_step(im) for im in ep["image_corner"]])
        assert (np.diff(steps) >= 0).all() and steps[0] <= 3, steps
        assert 0.5 <= np.diff(steps).mean() <= 1.6, steps
        age = r.extra["age_ms"]["image_corner"]  # recorded per episode (its size depends on the machine's load)
        assert 0 <= age["p50"] <= age["p99"] <= age["max"], age
        assert not ep["done"].any() and not ep["intervention"].any()
        assert r.wall_time_end > r.wall_time_start  # the episode's span (not bounded: the machine is shared)
    # the three episodes were recorded one after the other
    assert all(a.wall_time_end <= b.wall_time_start for a, b in zip(recs, recs[1:])), recs
    for key in ("image_corner", "proprio", "state"):
        assert topics[key]["rejected"] == {} and topics[key]["accepted"] > 20
