"""The policy's [-1, 1] reaches the arm scaled to the profile's action range, over loopback DDS: sim-robot
and bridge processes, a +/-0.3 and an asymmetric range. The policy's +1 arrives as `high`, -1 as `low`,
nothing is clipped that the policy did not ask for, and the store keeps the normalised action; a human's
takeover (arm units on the intervention topic) is stored normalised too."""

import threading

import numpy as np
import pytest

from robot_bridge.codec import array_msg, encode
from robot_bridge.transport.base import RELIABLE_QOS
from tests.bridge.helpers import Rig, small_profile
from worldsample.policy import ObsInput, PolicyConfig, PolicyRegistry, load_actor
from worldsample.store import EpisodeStore

INTERVENTION = "/worldsample/intervention"  # the sim profile's control.intervention
RANGES = {
    "pm0.3": ([-0.3] * 4, [0.3] * 4),
    "asymmetric": ([-0.3, -0.1, 0.0, -1.0], [0.3, 0.5, 1.0, 1.0]),
}
PRE_TANH = [20.0, -20.0, 0.0, float(np.arctanh(0.5))]  # the policy's action: [+1, -1, 0, 0.5], whatever it sees


def constant_policy(run) -> None:
    cfg = PolicyConfig(obs=[ObsInput(key="proprio", dim=4), ObsInput(key="state", dim=39)], action_dim=4,
                       hidden=[8], action_low=[-1] * 4, action_high=[1] * 4)
    tensors = {k: np.zeros(s, np.float32) for k, s in cfg.tensor_shapes().items()}
    tensors["mean.bias"] = np.asarray(PRE_TANH, np.float32)
    PolicyRegistry(run).publish(cfg, tensors)


def arm_units(a, low, high):
    return low + (np.asarray(a) + 1) / 2 * (high - low)


@pytest.mark.parametrize("name", list(RANGES))
def test_the_policy_range_reaches_the_arm_scaled(tmp_path, name):
    low, high = (np.asarray(v, np.float32) for v in RANGES[name])
    run = tmp_path / "run"
    constant_policy(run)
    policy_action = load_actor(run).act({"proprio": np.zeros(4, np.float32), "state": np.zeros(39, np.float32)})
    np.testing.assert_allclose(policy_action, [1, -1, 0, 0.5], atol=1e-6)
    want_on_wire = arm_units(policy_action, low, high)
    np.testing.assert_allclose(want_on_wire[:2], [high[0], low[1]], atol=1e-6)  # +1 -> high, -1 -> low
    human_normalised = np.asarray([-0.5, 0.5, 1.0, -1.0], np.float32)
    human_arm = arm_units(human_normalised, low, high).astype(np.float32)

    profile = small_profile(tmp_path, **{"action.low": low.tolist(), "action.high": high.tolist()})
    with Rig(tmp_path, profile, run) as rig:
        op = rig.op
        op.wait_ready()
        st = op.record_episode()
        assert st["episodes"]["committed"] == 1 and st["last_outcome"] == "max_steps"
        assert st["actions"] == {"clipped": 0, "non_finite": 0}, st["actions"]  # the limits never bound
        wire = np.stack(op.actions)
        assert (wire >= low - 1e-6).all() and (wire <= high + 1e-6).all()
        sent = np.isclose(wire, want_on_wire, atol=1e-6).all(axis=1)
        assert sent.sum() >= 10, (want_on_wire, wire[-20:])  # the policy's actions, scaled

        # a human takes over in arm units on the intervention topic
        pub = op.t.publisher(INTERVENTION, "std_msgs/msg/Float32MultiArray", RELIABLE_QOS)
        stop = threading.Event()

        def human():
            while not stop.is_set():
                pub(encode(array_msg("std_msgs/msg/Float32MultiArray", human_arm, "action")))
                stop.wait(0.02)

        t = threading.Thread(target=human, daemon=True)
        t.start()
        try:
            st = op.record_episode()
        finally:
            stop.set()
            t.join(5)
        assert st["episodes"]["committed"] == 2
        wire = np.stack(op.actions)
        assert np.isclose(wire, human_arm, atol=1e-6).all(axis=1).sum() >= 10  # sent as the human gave it
        assert rig.bridge.stop() == 0

    reader = EpisodeStore(run).reader("real")
    ep = reader.episode(0)
    assert not ep["intervention"].any()
    np.testing.assert_array_equal(ep["action"], np.tile(policy_action, (len(ep["action"]), 1)))  # normalised
    ep = reader.episode(1)
    flagged = ep["intervention"]
    assert flagged.sum() >= 10
    np.testing.assert_allclose(ep["action"][flagged], np.tile(human_normalised, (int(flagged.sum()), 1)), atol=1e-6)
    np.testing.assert_array_equal(ep["action"][~flagged], np.tile(policy_action, (int((~flagged).sum()), 1)))


