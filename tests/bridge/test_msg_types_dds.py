"""A TwistStamped action and a PoseStamped observation over real DDS on loopback: the bridge (in this
process, topic types derived from rosbags' definitions) against tests/bridge/servo_peer.py, a
MoveIt-Servo stand-in with its own hand-written IDL and no project code. Plus a custom `.msg` type
(fixed array, bounded sequence and string) published as bytes rosbags made and read by the bridge."""

import json
import subprocess
import sys
import time

import numpy as np
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from robot_bridge.bridge import Bridge
from robot_bridge.profile import load_profile
from robot_bridge.transport.base import SENSOR_QOS
from robot_bridge.transport.dds import LOOPBACK_XML, DdsTransport
from tests.bridge.helpers import ROOT, env_for, new_domain
from tests.bridge.msg_profiles import GRIPPER_STATE, servo_profile

PEER = ROOT / "tests" / "bridge" / "servo_peer.py"


def test_twist_action_reaches_an_independent_subscriber_and_pose_comes_back(tmp_path):
    profile = load_profile(servo_profile(tmp_path))
    domain = new_domain()
    peer = subprocess.Popen([sys.executable, str(PEER), "--domain", str(domain), "--count", "3", "--timeout", "25"],
                            env=env_for(domain), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT, text=True)
    transport = DdsTransport(domain, LOOPBACK_XML, profile.msg_types)
    bridge = Bridge(profile, tmp_path / "run", transport)
    gripper = DdsTransport(domain, LOOPBACK_XML, profile.msg_types)  # a second participant: the gripper driver
    ts = get_typestore(Stores.ROS2_JAZZY)
    ts.register(get_types_from_msg(GRIPPER_STATE, "my_gripper/msg/GripperState"))
    T = ts.types
    state = T["my_gripper/msg/GripperState"](
        header=T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=0, nanosec=0), frame_id="g"),
        width=0.05, finger_force=np.array([2.0, 3.5], np.float32), grasped=True, flags=np.array([7, 9], np.uint8),
        status="closed")
    pub_grip = gripper.publisher("/gripper/state", "my_gripper/msg/GripperState", SENSOR_QOS)
    try:
        action = np.array([0.25, -0.5, 0.125, 0.75], np.float32)
        t_send = time.time_ns()
        end = time.monotonic() + 25
        while peer.poll() is None and time.monotonic() < end:
            bridge.controller.out.action(action)  # what the control loop calls each tick
            pub_grip(bytes(ts.serialize_cdr(state, "my_gripper/msg/GripperState")))
            time.sleep(0.05)
        while bridge.inputs["grip"].counters.accepted == 0 and time.monotonic() < end:
            pub_grip(bytes(ts.serialize_cdr(state, "my_gripper/msg/GripperState")))
            time.sleep(0.05)
        out, _ = peer.communicate(timeout=10)
        assert peer.returncode == 0, out
        pose = bridge.inputs["ee_pose"]
        assert pose.counters.accepted > 0, (pose.counters.as_dict(), out)
        value = pose.buffer.latest().value
        grip = bridge.inputs["grip"]
        assert grip.counters.accepted > 0 and not grip.counters.rejected, grip.counters.as_dict()
        np.testing.assert_array_equal(grip.buffer.latest().value, np.array([0.05, 2.0, 3.5, 1.0], np.float32))
    finally:
        if peer.poll() is None:
            peer.kill()
            peer.wait(5)
        bridge.recorder.close()
        transport.close()
        gripper.close()
    cmds = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert len(cmds) >= 3, out
    for c in cmds:
        assert c["linear"] == [float(v) for v in action[:3]] and c["angular"] == [0.0, 0.0, float(action[3])]
        assert c["frame_id"] == "panda_link0"
        assert t_send <= c["stamp_ns"] <= time.time_ns()  # stamped when sent
    # PoseStamped from the peer: position (0.1, 0.2, 0.3 + 0.001 * tick), orientation w = 1
    np.testing.assert_allclose(value[[0, 1, 3]], [0.1, 0.2, 1.0], rtol=1e-6)
    assert 0.3 <= value[2] < 0.4
