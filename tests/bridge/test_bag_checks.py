"""Bag import that reports and refuses, bag export that checks: bags written by rosbags as another tool
would (no WorldSample topics), with the faults a new user meets."""

import json
import os

import numpy as np
import pytest
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from robot_bridge.bag import BagImportError, ImportOptions, _stream_message, export_bag, import_bag
from robot_bridge.codec import array_msg, encode
from robot_bridge.errors import BagError
from robot_bridge.profile import load_profile
from tests.bridge.helpers import small_profile
from tests.bridge.test_bag import fill_store
from worldsample.errors import WorldSampleError
from worldsample.store import EpisodeStore
from worldsample.store.layout import chunk_path

T0 = 10**18
STEP = 50_000_000  # 20 Hz


def foreign_bag(path, profile, ticks=6, storage="mcap", size=None, joint_names=None, action_topic=None,
                omit=(), actions=None, bad=(), jitter=None):
    """A bag as plain ROS tools record it: sensors and one action per tick, 3 ms after the frame.
    `bad`: (what, k) pairs whose message is replaced by garbage bytes."""
    ts = get_typestore(Stores.ROS2_JAZZY)
    rng = np.random.default_rng(0)
    times = []
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    with Writer(path, version=9, storage_plugin=plugin) as w:
        conns = {}
        for s in profile.streams:
            if s.key not in omit:
                conns[s.key] = w.add_connection(s.topic, "sensor_msgs/msg/JointState" if s.key == "proprio"
                                                else s.type, typestore=ts)
        act = w.add_connection(action_topic or profile.action.topic, profile.action.type, typestore=ts)
        for k in range(ticks):
            t = T0 + k * STEP + (int(jitter[k]) if jitter is not None else 0)
            for s in profile.streams:
                if s.key in omit:
                    continue
                shape = profile.obs_specs()[s.key].shape
                if s.key.startswith("image"):
                    s = s.model_copy(update={"height": size or s.height, "width": size or s.width})
                    shape = (s.height, s.width, s.channels)
                if s.key == "proprio" and joint_names:
                    s = s.model_copy(update={"names": joint_names})
                v = np.full(shape, k, np.uint8) if s.key.startswith("image") else np.full(shape, k, np.float32)
                raw = b"\x00\x01\x00\x00garbage" if (s.key, k) in bad else encode(_stream_message(s, v, t))
                w.write(conns[s.key], t, raw)
            a = actions[k] if actions is not None else rng.uniform(-0.5, 0.5, profile.action.dim)
            raw = b"\x00\x01\x00\x00xx" if ("action", k) in bad else encode(array_msg(profile.action.type, a, "a"))
            w.write(act, t + 3_000_000, raw)
            times.append(t + 3_000_000)
    return times


def assert_nothing_left(run):
    assert not run.exists(), sorted(p.name for p in run.rglob("*"))


@pytest.mark.parametrize(("fault", "why"), [
    ("missing_topic", r"required stream /cam/corner/image_raw is not in the bag"),
    ("image_size", r"wrong_size \d+ \(wrong_size: 48x48, profile says 32x32\)"),
    ("joint_names", r"missing_joint \d+ \(missing_joint: joints \['hand_x'"),
    ("no_leading_slash", r"action topic worldsample/action is not in the bag \(ROS topics start with '/'\); "
                         r"the bag has /worldsample/action"),
])
def test_zero_episodes_is_an_error_that_says_why_and_fixes_no_schema(tmp_path, fault, why):
    changes = {"action.topic": "worldsample/action"} if fault == "no_leading_slash" else {}
    profile = load_profile(small_profile(tmp_path, **changes))
    kw = {"missing_topic": {"omit": ("image_corner",)}, "image_size": {"size": 48},
          "joint_names": {"joint_names": ["j1", "j2", "j3", "j4"]},
          "no_leading_slash": {"action_topic": "/worldsample/action"}}[fault]
    foreign_bag(tmp_path / "bag", profile, **kw)
    run = tmp_path / "run"
    with pytest.raises(BagImportError, match="no episode imported, nothing written") as e:
        import_bag(tmp_path / "bag", run, profile)
    assert e.match(why)
    assert e.value.report.steps["recorded"] == 0
    assert_nothing_left(run)

    # the corrected profile imports into the same run: the failed import fixed no schema
    fixed = {"missing_topic": {"cameras.0.required": False}, "image_size": {"cameras.0.height": 48,
             "cameras.0.width": 48}, "joint_names": {"joints.names": ["j1", "j2", "j3", "j4"]},
             "no_leading_slash": {"action.topic": "/worldsample/action"}}[fault]
    (tmp_path / "fixed").mkdir()
    good = load_profile(small_profile(tmp_path / "fixed", **fixed))
    rep = import_bag(tmp_path / "bag", run, good)
    assert [r.length for r in rep.episodes] == [6]
    assert EpisodeStore(run).schema("real").keys["image_corner"].shape == good.obs_specs()["image_corner"].shape


def test_counts_bad_messages_drops_them_not_the_bag_and_strict_keeps_nothing(tmp_path):
    profile = load_profile(small_profile(tmp_path))
    foreign_bag(tmp_path / "bag", profile, ticks=8, storage="sqlite3", bad={("image_corner", 3), ("action", 5)})
    rep = import_bag(tmp_path / "bag", tmp_path / "run", profile)
    cam, act = rep.topics["/cam/corner/image_raw"], rep.topics["/worldsample/action"]
    assert (cam.received, cam.accepted, dict(cam.rejected)) == (8, 7, {"malformed": 1})
    assert (act.received, act.accepted, dict(act.rejected)) == (8, 7, {"malformed": 1})
    assert rep.steps["ticks"] == 7 and rep.steps["recorded"] == 7  # frame 3 is missing: tick 3 sees frame 2
    assert [r.length for r in rep.episodes] == [7]
    lines = "\n".join(rep.lines())
    assert "/cam/corner/image_raw: received 8, accepted 7, rejected malformed 1" in lines
    ep = EpisodeStore(tmp_path / "run").reader("real").episode(0)
    assert ep["image_corner"][:, 0, 0, 0].tolist() == [0, 1, 2, 2, 4, 6, 7]

    with pytest.raises(BagError, match=r"--strict: message on /cam/corner/image_raw at \d+ rejected \(malformed\)"):
        import_bag(tmp_path / "bag", tmp_path / "strict", profile, options=ImportOptions(strict=True))
    assert_nothing_left(tmp_path / "strict")


def test_reimport_refused_unless_allowed_and_a_failed_import_takes_back_its_episodes(tmp_path):
    profile = load_profile(small_profile(tmp_path))
    foreign_bag(tmp_path / "bag", profile)
    foreign_bag(tmp_path / "bad", profile, bad={("action", 4)})
    run = tmp_path / "run"
    first = import_bag(tmp_path / "bag", run, profile)
    assert first.episodes[0].extra["bag_sha256"] == first.sha256
    with pytest.raises(BagError, match=r"already imported into group 'real'.*as episodes \[0\]; pass --allow-dup"):
        import_bag(tmp_path / "bag", run, profile)
    assert EpisodeStore(run).reader("real").num_episodes == 1
    again = import_bag(tmp_path / "bag", run, profile, options=ImportOptions(allow_duplicate=True))
    assert [r.episode for r in again.episodes] == [1]
    # a strict failure in an existing group leaves the group as it was
    with pytest.raises(BagError, match="--strict"):
        import_bag(tmp_path / "bad", run, profile, options=ImportOptions(strict=True))
    assert [r.episode for r in EpisodeStore(run).reader("real").episode_records()] == [0, 1]


def test_max_steps_truncates_or_splits_and_the_last_step_is_flagged(tmp_path):
    profile = load_profile(small_profile(tmp_path, **{"episode.max_steps": 3}))
    foreign_bag(tmp_path / "bag", profile, ticks=10)
    rep = import_bag(tmp_path / "bag", tmp_path / "a", profile)
    assert [r.length for r in rep.episodes] == [3]
    assert rep.steps["dropped:over_max_steps"] == 7
    rec = rep.episodes[0]
    assert (rec.terminated, rec.extra["truncated"], rec.extra["outcome"]) == (False, True, "max_steps")

    rep = import_bag(tmp_path / "bag", tmp_path / "b", profile, options=ImportOptions(split_long=True))
    assert [r.length for r in rep.episodes] == [3, 3, 3, 1]
    assert [r.extra["outcome"] for r in rep.episodes] == ["max_steps"] * 3 + ["truncated"]
    assert all(r.extra["truncated"] and not r.terminated for r in rep.episodes)

    # exported, every episode's last step marker says how it ended
    export_bag(tmp_path / "b", tmp_path / "out", profile)
    with AnyReader([tmp_path / "out"]) as r:
        conn = next(c for c in r.connections if c.topic == "/worldsample/step")
        steps = [json.loads(r.deserialize(raw, conn.msgtype).data) for _, _, raw in r.messages(connections=[conn])]
    assert [s["step"] for s in steps if s["truncated"]] == [2, 2, 2, 0]


@pytest.mark.parametrize("mode", ["clip", "reject"])
def test_action_limits_apply(tmp_path, mode):
    profile = load_profile(small_profile(tmp_path))  # limits [-1, 1], max_delta 2
    acts = np.zeros((6, 4))
    acts[0] = [0, 0, 0, 3.0]  # the first step of the episode too
    acts[2] = [5.0, 0, 0, 0]
    acts[4] = [0, np.nan, 0, 0]
    foreign_bag(tmp_path / "bag", profile, actions=acts)
    rep = import_bag(tmp_path / "bag", tmp_path / "run", profile, options=ImportOptions(action_limits=mode))
    stored = EpisodeStore(tmp_path / "run").reader("real").episode(0)["action"]
    if mode == "clip":
        assert rep.steps["clipped_actions"] == 3
        assert stored.shape == (6, 4) and np.isfinite(stored).all()
        assert stored[0].tolist() == [0, 0, 0, 1] and stored[2].tolist() == [1, 0, 0, 0]
    else:
        assert rep.steps["dropped:action_out_of_limits"] == 3
        assert stored.shape == (3, 4) and np.abs(stored).max() == 0


def test_export_checks_the_profile_first_and_leaves_no_partial_directory(tmp_path):
    profile = load_profile(small_profile(tmp_path))
    fill_store(tmp_path / "a", profile)
    (tmp_path / "other").mkdir()
    other = load_profile(small_profile(tmp_path / "other", **{"cameras.0.height": 48, "joints.names": ["a", "b"]}))
    with pytest.raises(BagError, match=r"does not match group 'real'.*image_corner: store uint8\[32, 32, 3\], "
                                       r"profile uint8\[48, 32, 3\].*proprio: store float32\[4\], profile "
                                       r"float32\[2\]"):
        export_bag(tmp_path / "a", tmp_path / "out", other)
    assert sorted(os.listdir(tmp_path)) == ["a", "other", "profile.yaml"]

    # a failure half way (a damaged chunk of the last episode) leaves neither the bag nor its temp directory
    store = EpisodeStore(tmp_path / "a")
    rec = store.reader("real").episode_records()[-1]
    chunk = chunk_path(tmp_path / "a" / "store" / "real", "proprio", rec.start // 8) / "0"  # 1-d: c/<t>/0
    chunk.write_bytes(b"\xff" * 40)
    with pytest.raises(WorldSampleError):
        export_bag(tmp_path / "a", tmp_path / "out", profile)
    assert sorted(os.listdir(tmp_path)) == ["a", "other", "profile.yaml"]


def test_export_keeps_the_bag_times_of_imported_episodes(tmp_path):
    profile = load_profile(small_profile(tmp_path))
    jitter = np.random.default_rng(1).integers(-15_000_000, 15_000_000, 8)
    times = foreign_bag(tmp_path / "bag", profile, ticks=8, jitter=jitter)
    import_bag(tmp_path / "bag", tmp_path / "run", profile)
    export_bag(tmp_path / "run", tmp_path / "out", profile, storage="sqlite3")
    with AnyReader([tmp_path / "out"]) as r:
        conn = next(c for c in r.connections if c.topic == profile.action.topic)
        assert [t for _, t, _ in r.messages(connections=[conn])] == times


def test_a_topic_of_another_type_is_named_and_counted(tmp_path):
    profile = load_profile(small_profile(tmp_path))
    foreign_bag(tmp_path / "bag", profile, ticks=3)  # raw Image frames
    (tmp_path / "c").mkdir()
    compressed = load_profile(small_profile(tmp_path / "c", **{"cameras.0.type": "sensor_msgs/msg/CompressedImage"}))
    with pytest.raises(BagImportError, match=r"/cam/corner/image_raw is sensor_msgs/msg/Image in the bag, the "
                                             r"profile says sensor_msgs/msg/CompressedImage") as e:
        import_bag(tmp_path / "bag", tmp_path / "run", compressed)
    assert dict(e.value.report.topics["/cam/corner/image_raw"].rejected) == {"wrong_type": 3}
    assert_nothing_left(tmp_path / "run")
