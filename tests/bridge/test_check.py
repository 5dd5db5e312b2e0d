"""`robot check`: a profile that matches the robot passes (exit 0); a wrong image size, a wrong
rate and a QoS mismatch are each reported with their reason (exit 1); usage errors exit 2."""

import subprocess
import sys
import threading

import numpy as np

from robot_bridge.check import check_bag
from robot_bridge.profile import load_profile
from robot_bridge.transport.base import SENSOR_QOS
from robot_bridge.transport.dds import LOOPBACK_XML, DdsTransport
from tests.bridge.arm_rig import Driver, arm_profile
from tests.bridge.helpers import ROOT, Proc, env_for, new_domain, small_profile

SECONDS = "2.5"


def start_check(args: list[str], domain: int, cli: str = "robot_bridge") -> subprocess.Popen:
    cmd = [sys.executable, "-m", cli, *(["robot"] if cli == "services.cli.main" else []), "check", *args]
    return subprocess.Popen(cmd, env=env_for(domain), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT,
                            text=True)


def wait_publishing(domain: int, topic: str, timeout: float = 40) -> None:
    """Until `topic` (JointState) arrives here: the robot is up, so a check that starts now hears it."""
    t = DdsTransport(domain, LOOPBACK_XML)
    got = threading.Event()
    t.subscribe(topic, "sensor_msgs/msg/JointState", SENSOR_QOS, lambda raw, ns: got.set())
    try:
        assert got.wait(timeout), f"nothing on {topic} after {timeout} s"
    finally:
        t.close()


def finish(p: subprocess.Popen) -> tuple[int, str]:
    out, _ = p.communicate(timeout=60)
    return p.returncode, out


def test_check_against_the_simulated_arm(tmp_path):
    good = small_profile(tmp_path)
    variants = {
        "size": {"cameras.0.width": 48},
        "rate": {"joints.rate_hz": 1000},
        "qos": {"cameras.0.reliability": "reliable"},  # the sim publishes best effort: DDS will not pair them
    }
    profiles = {}
    for name, change in variants.items():
        (tmp_path / name).mkdir()
        profiles[name] = small_profile(tmp_path / name, **change)
    domain = new_domain()
    with Proc(["sim-robot", "--profile", str(good)], domain, tmp_path / "sim.log") as sim:
        wait_publishing(domain, "/joint_states")  # the checks listen for SECONDS after their own start
        procs = {name: start_check(["--profile", str(p), "--seconds", SECONDS], domain)
                 for name, p in [("good", good), *profiles.items()]}
        results = {name: finish(p) for name, p in procs.items()}
        assert sim.p.poll() is None, sim.output()

    rc, out = results["good"]
    assert rc == 0, out
    assert "ok: every stream of sim_arm is as the profile says" in out
    assert "32x32 rgb8" in out and "yes (" in out

    rc, out = results["size"]
    assert rc == 1, out
    assert "/cam/corner/image_raw: the bridge would reject" in out
    assert "as wrong_size: 32x32, profile says 48x32" in out
    assert "1 problem(s)" in out  # only the problem it was given

    rc, out = results["rate"]
    assert rc == 1, out
    assert "/joint_states: rate" in out and "profile says 1000 Hz" in out and "1 problem(s)" in out

    rc, out = results["qos"]
    assert rc == 1, out
    assert "/cam/corner/image_raw: QoS mismatch: the profile asks for reliable (publisher offers best_effort)" in out
    assert "1 problem(s)" in out, out


def test_worldsample_robot_check_with_an_independent_driver(tmp_path):
    domain = new_domain()
    good = arm_profile(tmp_path)
    with Driver(domain, tmp_path / "driver.log"):
        wait_publishing(domain, "/arm/joint_states")
        rc, out = finish(start_check(["--profile", str(good), "--seconds", SECONDS], domain, cli="services.cli.main"))
    assert rc == 0, out
    assert "ok: every stream of test_arm" in out and "1 subscriber(s)" in out  # the driver takes the actions


def test_usage_errors_exit_2(tmp_path):
    env = env_for(new_domain())
    for args in (["--profile", str(tmp_path / "missing.yaml")],
                 ["--profile", str(small_profile(tmp_path)), "--bag", str(tmp_path / "no_bag")]):
        r = subprocess.run([sys.executable, "-m", "robot_bridge", "check", *args], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "error:" in r.stderr and "Traceback" not in r.stderr + r.stdout


def test_check_a_bag(tmp_path):
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    from robot_bridge.bag import _stream_message
    from robot_bridge.codec import array_msg, encode

    profile = load_profile(small_profile(tmp_path))
    ts = get_typestore(Stores.ROS2_JAZZY)
    t0 = 10**18
    with Writer(tmp_path / "bag", version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conns = {s.key: w.add_connection(s.topic, "sensor_msgs/msg/Image" if s.key.startswith("image") else
                                         ("sensor_msgs/msg/JointState" if s.key == "proprio" else s.type), typestore=ts)
                 for s in profile.streams}
        act = w.add_connection(profile.action.topic, profile.action.type, typestore=ts)
        for k in range(100):  # every stream at 50 Hz: the camera (profile: 20 Hz) too, and 3 stamps go backwards
            t = t0 + k * 20_000_000
            for s in profile.streams:
                shape = profile.obs_specs()[s.key].shape
                v = np.full(shape, k, np.uint8) if s.key.startswith("image") else np.full(shape, k, np.float32)
                stamp = t - 100_000_000 if s.key == "proprio" and k % 30 == 29 else t
                w.write(conns[s.key], t, encode(_stream_message(s, v, stamp)))
            w.write(act, t + 3_000_000, encode(array_msg(profile.action.type, np.zeros(4), "action")))
    rep = check_bag(profile, tmp_path / "bag")
    assert not rep.ok
    problems = "\n".join(rep.problems)
    assert "/cam/corner/image_raw: rate 50.0 Hz, profile says 20 Hz" in problems
    assert "/joint_states: the bridge would reject 3 of 100 message(s) as out_of_order" in problems
    assert not [p for p in rep.problems if p.startswith(("/sim/state", profile.action.topic))], problems
    rep = check_bag(load_profile(small_profile(tmp_path, **{"cameras.0.rate_hz": 50})), tmp_path / "bag")
    assert [p for p in rep.problems if "rate" in p] == []
