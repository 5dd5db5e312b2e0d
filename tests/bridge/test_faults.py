"""Bad input and faults: rejected and counted per topic, never a crash or a corrupt episode."""

import threading
import time

import numpy as np
import pytest

from robot_bridge.codec import Header, Image, JointState, Time, Vector3, Wrench, WrenchStamped, encode
from robot_bridge.errors import TransportError
from robot_bridge.transport.base import SENSOR_QOS
from robot_bridge.transport.dds import LOOPBACK_XML, DdsTransport
from tests.bridge.helpers import Rig, publish_policy, small_profile
from worldsample.store import EpisodeStore
from worldsample.store.verify import verify_store

WRENCH = {"topic": "/ft_sensor", "rate_hz": 50, "required": False}


def bad_messages(now: int) -> dict[str, list]:
    h = Header(Time.from_ns(now), "x")
    return {
        "/cam/corner/image_raw": [
            Image(header=h, height=32, width=32, encoding="bgr16", step=64, data=np.zeros(2048, np.uint8)),
            Image(header=h, height=16, width=16, encoding="rgb8", step=48, data=np.zeros(768, np.uint8)),
            Image(header=h, height=32, width=32, encoding="rgb8", step=96, data=np.zeros(100, np.uint8)),
        ],
        "/joint_states": [
            JointState(
                header=h, name=["hand_x", "hand_y", "hand_z", "gripper"], position=np.array([0, np.nan, 0, 0.0])
            ),
            JointState(header=h, name=["hand_x"], position=np.array([0.0])),
            JointState(header=h, name=["hand_x", "hand_y", "hand_z", "gripper"], position=np.zeros(3)),
        ],
    }


def wait_matched(transport: DdsTransport, topics: list[str], timeout_s: float = 30.0) -> None:
    """Wait until every publisher of `topics` on `transport` has matched a subscriber (DDS discovery)."""
    deadline = time.monotonic() + timeout_s
    while unmatched := [t for t in topics if transport.matched_subscribers(t) < 1]:
        assert time.monotonic() < deadline, f"no subscriber matched {unmatched} within {timeout_s} s"
        time.sleep(0.02)


def test_bad_input_is_counted_and_never_recorded(tmp_path):
    profile = small_profile(tmp_path, wrench=WRENCH)
    publish_policy(tmp_path / "run")
    with Rig(tmp_path, profile) as rig:
        op = rig.op
        bad = DdsTransport(rig.domain, LOOPBACK_XML)
        pubs = {t: bad.publisher(t, typ, SENSOR_QOS) for t, typ in [
            ("/cam/corner/image_raw", "sensor_msgs/msg/Image"), ("/joint_states", "sensor_msgs/msg/JointState"),
            ("/ft_sensor", "geometry_msgs/msg/WrenchStamped")]}
        op.wait_ready()
        wait_matched(bad, list(pubs))  # the bridge's readers know the extra publishers before the sequence

        # the wrench stream belongs to the attacker alone: stamps go good, duplicate, backwards, NaN
        t0 = time.time_ns()
        for stamp, force in [(t0, 1.0), (t0, 2.0), (t0 - 1000, 3.0), (t0 + 10, np.nan), (t0 + 20, 4.0)]:
            pubs["/ft_sensor"](encode(WrenchStamped(Header(Time.from_ns(stamp)), Wrench(Vector3(force, 0.0, 0.0)))))
            time.sleep(0.02)

        stop = threading.Event()

        def spam():
            while not stop.is_set():
                for topic, msgs in bad_messages(time.time_ns()).items():
                    for m in msgs:
                        pubs[topic](encode(m))
                time.sleep(0.02)

        spammer = threading.Thread(target=spam, daemon=True)
        spammer.start()
        try:
            st = op.record_episode()
            st = op.record_episode()
        finally:
            stop.set()
            spammer.join(5)
        assert st["episodes"]["committed"] == 2 and st["state"] == "ended"
        cam, joints, wrench = (st["topics"][k]["rejected"] for k in ("image_corner", "proprio", "wrench"))
        assert cam.get("wrong_encoding", 0) >= 1 and cam.get("wrong_size", 0) >= 2, cam
        assert joints.get("non_finite", 0) >= 1, joints
        assert joints.get("missing_joint", 0) >= 1, joints
        assert joints.get("wrong_size", 0) >= 1, joints
        assert wrench == {"duplicate_stamp": 1, "out_of_order": 1, "non_finite": 1}, wrench
        assert st["topics"]["wrench"]["accepted"] == 2
        assert rig.bridge.p.poll() is None
        bad.close()

    assert verify_store(tmp_path / "run").ok
    reader = EpisodeStore(tmp_path / "run").reader("real")
    for r in reader.episode_records():
        ep = reader.episode(r.episode)
        assert np.isfinite(ep["proprio"]).all()
        assert set(np.unique(ep["wrench"][:, 0])) <= {4.0}  # only the last good wrench is held


def test_qos_mismatch_is_reported(tmp_path):
    # the bridge asks for a reliable camera; the robot offers best effort: DDS will not match them
    profile = small_profile(tmp_path, **{"cameras.0.reliability": "reliable", "episode.reset_timeout_s": 1.5})
    with Rig(tmp_path, profile) as rig:
        op = rig.op
        st = op.wait(lambda s: s["qos_events"].get("/cam/corner/image_raw", {}).get("incompatible_qos", 0) >= 1,
                     60, "the QoS mismatch to be reported")
        assert "image_corner" in st["stale"] and st["topics"]["image_corner"]["received"] == 0
        op.send("start")
        st = op.wait(lambda s: s["state"] == "faulted", 20, "the reset to time out")
        assert st["fault"].startswith("no frame on /cam/corner/image_raw: QoS mismatch"), st["fault"]
        assert st["episodes"]["committed"] == 0
        assert rig.bridge.p.poll() is None


def test_sigkill_mid_episode_leaves_store_intact(tmp_path):
    profile = small_profile(tmp_path, **{"episode.max_steps": 200, "episode.chunk_len": 4})
    run = tmp_path / "run"
    publish_policy(run)
    with Rig(tmp_path, profile, run) as rig:
        op = rig.op
        op.wait_ready()
        op.send("start")
        op.wait(lambda s: s["state"] == "running" and s["step"] >= 10, 30, "a few steps")
        op.send("stop")
        op.wait(lambda s: s["episodes"]["committed"] == 1, 20, "the first commit")
        before = EpisodeStore(run).reader("real", cache=False)
        first = before.episode(0)
        op.send("start")
        op.wait(lambda s: s["state"] == "running" and s["step"] >= 30, 30, "the second episode to be under way")
        rig.bridge.kill()  # SIGKILL: no chance to clean up

        rep = verify_store(run)
        assert rep.ok, rep.problems
        reader = EpisodeStore(run).reader("real", cache=False)
        assert [r.episode for r in reader.episode_records()] == [0]
        for k, v in reader.episode(0).items():
            np.testing.assert_array_equal(v, first[k])

        # a new bridge on the same run takes the writer lock, drops the orphan chunks, continues
        op.status = {}
        rig.start_bridge()
        op.wait_ready()
        st = op.record_episode()
        assert st["episodes"]["last"] == 1
        assert rig.bridge.stop() == 0
    rep = verify_store(run)
    assert rep.ok, rep.problems
    assert [r.episode for r in EpisodeStore(run).reader("real", cache=False).episode_records()] == [0, 1]


def test_dds_raw_path_and_invalid_bytes(tmp_path):
    """The private cyclonedds raw write/take path this transport relies on still works."""
    from tests.bridge.helpers import new_domain

    t = DdsTransport(new_domain(), LOOPBACK_XML)
    got = []
    t.subscribe("/probe", "sensor_msgs/msg/JointState", SENSOR_QOS, lambda raw, ns: got.append(raw))
    pub = t.publisher("/probe", "sensor_msgs/msg/JointState", SENSOR_QOS)
    msg = JointState(header=Header(Time.from_ns(5), "a"), name=["j"], position=np.array([1.5]))
    deadline = time.monotonic() + 10
    while not got and time.monotonic() < deadline:
        pub(encode(msg))
        time.sleep(0.05)
    from robot_bridge.codec import decode

    assert got and decode(got[0], "sensor_msgs/msg/JointState").position.tolist() == [1.5]
    with pytest.raises(TransportError, match="not a valid"):
        pub(encode(msg)[:9])
    t.close()
