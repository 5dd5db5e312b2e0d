"""rosbag2 export/import round trip (MCAP and sqlite3), readable by rosbags as standard ROS data."""

import numpy as np
import pytest
from rosbags.highlevel import AnyReader

from robot_bridge.bag import export_bag, import_bag, parse_episodes
from robot_bridge.errors import BagError
from robot_bridge.profile import load_profile
from tests.bridge.helpers import small_profile
from worldsample.store import EpisodeStore, GroupSchema
from worldsample.store.verify import verify_store


def fill_store(run, profile, n=3, seed=0):
    rng = np.random.default_rng(seed)
    store = EpisodeStore(run, create=True)
    store.ensure_group("real", GroupSchema.build(profile.obs_specs(), profile.action.dim, 8))
    with store.writer("real") as w:
        for e in range(n):
            L = 5 + 4 * e
            data = {k: (rng.integers(0, 256, (L, *s.shape), dtype=np.uint8) if s.kind == "image"
                        else rng.normal(size=(L, *s.shape)).astype(np.float32)) for k, s in profile.obs_specs().items()}
            data["action"] = rng.uniform(-1, 1, (L, 4)).astype(np.float32)
            data["reward"] = np.zeros(L, np.float32)
            data["intervention"] = rng.random(L) < 0.3
            data["success"] = np.zeros(L, bool)
            data["done"] = np.zeros(L, bool)
            if e == 1:
                data["reward"][-1], data["success"][-1], data["done"][-1] = 1.0, True, True
            w.append_episode(
                data,
                domain="real",
                policy_version=e + 1,
                extra={"outcome": "x", "control_rate_hz": 10.0, "t0_ns": 1_700_000_000_000_000_000 + e * 10**9},
            )


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
@pytest.mark.parametrize("compressed", [False, True])
def test_round_trip(tmp_path, storage, compressed):
    changes = {"wrench": {"topic": "/ft", "rate_hz": 10, "required": False},
               "joints.fields": ["position", "velocity"]}
    if compressed:
        changes["cameras.0.type"] = "sensor_msgs/msg/CompressedImage"
    profile = load_profile(small_profile(tmp_path, **changes))
    fill_store(tmp_path / "a", profile)
    assert export_bag(tmp_path / "a", tmp_path / "bag", profile, storage=storage) == 3

    # standard tooling sees the original topics and types
    with AnyReader([tmp_path / "bag"]) as r:
        types = {c.topic: c.msgtype for c in r.connections}
        assert types["/cam/corner/image_raw"] == profile.cameras[0].type
        assert types["/joint_states"] == "sensor_msgs/msg/JointState"
        assert types["/ft"] == "geometry_msgs/msg/WrenchStamped"
        conn = next(c for c in r.connections if c.topic == "/joint_states")
        _, _, raw = next(r.messages(connections=[conn]))
        assert list(r.deserialize(raw, conn.msgtype).name) == ["hand_x", "hand_y", "hand_z", "gripper"]

    recs = import_bag(tmp_path / "bag", tmp_path / "b", profile).episodes
    assert [r.length for r in recs] == [5, 9, 13]
    assert verify_store(tmp_path / "b").ok
    ra, rb = EpisodeStore(tmp_path / "a").reader("real"), EpisodeStore(tmp_path / "b").reader("real")
    for x, y in zip(ra.episode_records(), rb.episode_records(), strict=True):
        assert (x.length, x.success, x.terminated, x.policy_version, x.interventions, x.episode_return) == (
            y.length, y.success, y.terminated, y.policy_version, y.interventions, y.episode_return)
        assert y.extra["original_episode"] == x.episode and y.extra["outcome"] == "x"
        a, b = ra.episode(x.episode), rb.episode(y.episode)
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_subset_humble_and_errors(tmp_path):
    profile = load_profile(small_profile(tmp_path))
    fill_store(tmp_path / "a", profile)
    assert parse_episodes("0,2-2") == [0, 2]
    assert export_bag(tmp_path / "a", tmp_path / "bag", profile, [2], distro="humble") == 1
    recs = import_bag(tmp_path / "bag", tmp_path / "b", profile).episodes
    assert [r.length for r in recs] == [13]
    with pytest.raises(BagError, match="not committed"):
        export_bag(tmp_path / "a", tmp_path / "bag2", profile, [7])
    with pytest.raises(BagError, match="exists"):
        export_bag(tmp_path / "a", tmp_path / "bag", profile)
    with pytest.raises(BagError, match="N-M"):
        parse_episodes("1,x")
    with pytest.raises(BagError, match="does not exist"):
        import_bag(tmp_path / "nothing", tmp_path / "c", profile)
    (tmp_path / "junk.mcap").write_bytes(b"not a bag")
    with pytest.raises(BagError, match="cannot open"):
        import_bag(tmp_path / "junk.mcap", tmp_path / "c", profile)
    assert not (tmp_path / "c").exists()


def test_foreign_bag_without_markers(tmp_path):
    """A bag recorded by plain ROS tools (no WorldSample topics): action messages define the steps."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    from robot_bridge.bag import _stream_message
    from robot_bridge.codec import array_msg, encode

    profile = load_profile(small_profile(tmp_path))
    ts = get_typestore(Stores.ROS2_JAZZY)
    t0, rng = 10**18, np.random.default_rng(0)
    with Writer(tmp_path / "bag", version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conns = {s.key: w.add_connection(s.topic, "sensor_msgs/msg/Image" if s.key.startswith("image") else
                                         ("sensor_msgs/msg/JointState" if s.key == "proprio" else s.type), typestore=ts)
                 for s in profile.streams}
        act = w.add_connection(profile.action.topic, profile.action.type, typestore=ts)
        for k in range(20):  # sensors at 100 Hz, actions at 20 Hz, 3 ms after the frame they act on
            t = t0 + k * 10_000_000
            for s in profile.streams:
                shape = profile.obs_specs()[s.key].shape
                v = np.full(shape, k, np.uint8) if s.key.startswith("image") else np.full(shape, k, np.float32)
                w.write(conns[s.key], t, encode(_stream_message(s, v, t)))
            if k % 5 == 0:
                w.write(act, t + 3_000_000, encode(array_msg(profile.action.type, rng.uniform(-1, 1, 4), "action")))
    recs = import_bag(tmp_path / "bag", tmp_path / "run", profile).episodes
    assert [r.length for r in recs] == [4]
    ep = EpisodeStore(tmp_path / "run").reader("real").episode(0)
    assert ep["proprio"][:, 0].tolist() == [0, 5, 10, 15]  # aligned to the frame just before each action
    assert ep["image_corner"][:, 0, 0, 0].tolist() == [0, 5, 10, 15]
