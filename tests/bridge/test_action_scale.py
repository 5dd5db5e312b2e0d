"""ActionScale: the policy's [-1, 1] <-> the profile's [low, high]; and rosbag export/import keep the
store's actions normalised while the bag carries arm units."""

import numpy as np
import pytest
from rosbags.highlevel import AnyReader

from robot_bridge.bag import export_bag, import_bag
from robot_bridge.core.limits import ActionLimiter, ActionScale
from robot_bridge.profile import ActionSpec, load_profile
from tests.bridge.helpers import small_profile
from tests.bridge.test_bag import fill_store
from worldsample.store import EpisodeStore

LOW, HIGH = [-0.3, -0.1, 0.0], [0.3, 0.5, 1.0]


def spec(low, high, **kw) -> ActionSpec:
    return ActionSpec(topic="/a", type="std_msgs/msg/Float32MultiArray", low=low, high=high, **kw)


def test_the_map_is_affine_onto_the_range():
    s = ActionScale(spec(LOW, HIGH))
    np.testing.assert_allclose(s.to_arm([-1, -1, -1]), LOW, atol=1e-7)
    np.testing.assert_allclose(s.to_arm([1, 1, 1]), HIGH, atol=1e-7)
    np.testing.assert_allclose(s.to_arm([0, 0, 0]), [0.0, 0.2, 0.5], atol=1e-7)
    a = np.asarray([0.5, -0.25, 0.9], np.float32)
    np.testing.assert_allclose(s.to_arm(a), np.asarray(LOW) + (a + 1) / 2 * (np.asarray(HIGH) - LOW), atol=1e-7)
    assert s.to_arm(a).dtype == np.float32 and s.to_policy(a).dtype == np.float32


def test_round_trip():
    s = ActionScale(spec(LOW, HIGH))
    a = np.random.default_rng(0).uniform(-1, 1, (200, 3)).astype(np.float32)
    for row in a:
        np.testing.assert_allclose(s.to_policy(s.to_arm(row)), row, atol=1e-6)
    x = np.asarray([0.1, 0.4, 0.25], np.float32)
    np.testing.assert_allclose(s.to_arm(s.to_policy(x)), x, atol=1e-6)
    np.testing.assert_allclose(s.to_policy(LOW), [-1, -1, -1], atol=1e-6)
    np.testing.assert_allclose(s.to_policy(HIGH), [1, 1, 1], atol=1e-6)


def test_nothing_rounds_past_the_range():
    s = ActionScale(spec(LOW, HIGH))
    assert np.array_equal(s.to_arm([-1, -1, -1]), np.float32(LOW))
    assert np.array_equal(s.to_arm([1, 1, 1]), np.float32(HIGH))
    assert np.array_equal(s.to_policy(LOW), [-1, -1, -1]) and np.array_equal(s.to_policy(HIGH), [1, 1, 1])
    a = np.random.default_rng(2).uniform(-1, 1, (500, 3)).astype(np.float32)
    arm = np.stack([s.to_arm(r) for r in a])
    assert (arm >= np.float32(LOW)).all() and (arm <= np.float32(HIGH)).all()
    back = np.stack([s.to_policy(r) for r in arm])
    assert (back >= -1).all() and (back <= 1).all()
    np.testing.assert_allclose(s.to_arm([2, -3, 0]), [0.6, -0.7, 0.5], atol=1e-6)  # outside: not clipped here


def test_a_unit_range_is_the_identity_bit_for_bit():
    s = ActionScale(spec([-1] * 4, [1] * 4))
    assert s.identity
    a = np.random.default_rng(1).uniform(-1, 1, 4).astype(np.float32)
    assert np.array_equal(s.to_arm(a), a) and np.array_equal(s.to_policy(a), a)
    assert s.to_arm(a) is not a  # a copy: callers may keep it


def test_a_fixed_dimension_maps_to_zero_and_sizes_are_checked():
    s = ActionScale(spec([-0.5, 0.2], [0.5, 0.2]))
    np.testing.assert_allclose(s.to_arm([1, 1]), [0.5, 0.2])
    np.testing.assert_allclose(s.to_policy([0.5, 0.2]), [1, 0])
    with pytest.raises(ValueError, match="dimensions"):
        s.to_arm([1, 1, 1])


def test_scaled_then_limited_is_never_clipped_in_range():
    sp = spec(LOW, HIGH)
    s, lim = ActionScale(sp), ActionLimiter(sp)
    for a in ([1, 1, 1], [-1, -1, -1], [1, -1, 0.5]):
        arm = s.to_arm(a)
        np.testing.assert_array_equal(lim(arm), arm)
    assert lim.clipped == 0


def test_bag_export_sends_arm_units_and_import_stores_normalised(tmp_path):
    low, high = [-0.3, -0.1, 0.0, -2.0], [0.3, 0.5, 1.0, 2.0]
    changes = {"action.low": low, "action.high": high, "action.max_delta": 10.0}
    profile = load_profile(small_profile(tmp_path, **changes))
    fill_store(tmp_path / "a", profile, n=2)  # normalised actions in [-1, 1]
    assert export_bag(tmp_path / "a", tmp_path / "bag", profile) == 2
    src = EpisodeStore(tmp_path / "a").reader("real")
    stored = np.concatenate([src.episode(e)["action"] for e in (0, 1)])
    with AnyReader([tmp_path / "bag"]) as r:
        conn = next(c for c in r.connections if c.topic == profile.action.topic)
        wire = np.stack([np.asarray(r.deserialize(raw, conn.msgtype).data) for _, _, raw in r.messages([conn])])
    np.testing.assert_allclose(wire, np.asarray(low) + (stored + 1) / 2 * (np.asarray(high) - low), atol=1e-6)
    assert (wire[:, 3] < -1).any() or (wire[:, 3] > 1).any()  # the bag really holds arm units

    report = import_bag(tmp_path / "bag", tmp_path / "b", profile)
    assert report.steps["clipped_actions"] == 0
    back = EpisodeStore(tmp_path / "b").reader("real")
    got = np.concatenate([back.episode(r.episode)["action"] for r in report.episodes])
    np.testing.assert_allclose(got, stored, atol=1e-6)
