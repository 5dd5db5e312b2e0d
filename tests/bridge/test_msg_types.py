"""Any ROS 2 message type: field paths into Jazzy/Humble and custom `.msg` types for observations and
actions, and the profile errors a wrong type, path, field count or `.msg` file gives. The bytes are
checked with rosbags typestores built here, independently of the profile's."""

import numpy as np
import pytest
import yaml
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from typer.testing import CliRunner

from robot_bridge.bridge import stream_converter
from robot_bridge.cli import app
from robot_bridge.core.streams import StreamInput
from robot_bridge.errors import ProfileError
from robot_bridge.profile import load_profile
from tests.bridge.helpers import ROOT
from tests.bridge.msg_profiles import GRIPPER_STATE, TWIST_FIELDS, servo_profile

STAMP = 1_700_000_000_250_000_000


def their_store(extra: dict[str, str] | None = None):
    ts = get_typestore(Stores.ROS2_JAZZY)
    for name, text in (extra or {}).items():
        ts.register(get_types_from_msg(text, name))
    return ts


def header(ts, frame="world", ns=STAMP):
    Time, Header = ts.types["builtin_interfaces/msg/Time"], ts.types["std_msgs/msg/Header"]
    return Header(stamp=Time(sec=ns // 10**9, nanosec=ns % 10**9), frame_id=frame)


def bridge_input(profile, key):
    """The StreamInput the bridge makes for observation `key`."""
    s = next(s for s in profile.streams if s.key == key)
    return StreamInput(s.key, s.type, stream_converter(s, profile), decode=profile.msg_types.decode)


def test_custom_msg_observation_from_field_paths(tmp_path):
    profile = load_profile(servo_profile(tmp_path))
    assert profile.obs_specs()["grip"].shape == (4,)  # width, finger_force[0:2], grasped
    ts = their_store({"my_gripper/msg/GripperState": GRIPPER_STATE})
    State = ts.types["my_gripper/msg/GripperState"]
    msg = State(header=header(ts, "gripper"), width=0.042, finger_force=np.array([1.5, -2.25], np.float32),
                grasped=True, flags=np.array([1, 2], np.uint8), status="holding")
    inp = bridge_input(profile, "grip")
    inp(bytes(ts.serialize_cdr(msg, "my_gripper/msg/GripperState")), STAMP + 5_000_000)
    assert inp.counters.accepted == 1, inp.counters.as_dict()
    sample = inp.buffer.latest()
    assert sample.stamp_ns == STAMP  # the header stamp, not the receive time
    np.testing.assert_array_equal(sample.value, np.array([0.042, 1.5, -2.25, 1.0], np.float32))
    # garbage is counted as malformed, not raised
    inp(b"\x00\x01\x00\x00\x01", STAMP + 6_000_000)
    assert inp.counters.rejected["malformed"] == 1


def test_sequence_slice_and_a_message_too_short_for_it(tmp_path):
    path = servo_profile(tmp_path, **{"vectors.1": {
        "key": "arm", "topic": "/joint_states", "type": "sensor_msgs/msg/JointState", "rate_hz": 50,
        "fields": ["position[0:3]", "velocity[2]"]}})
    profile = load_profile(path)
    ts = their_store()
    JointState = ts.types["sensor_msgs/msg/JointState"]
    inp = bridge_input(profile, "arm")
    for pos, vel in ([0.1, 0.2, 0.3, 0.4], [0.0, 0.0, -1.0]), ([0.1], [0.0, 0.0, 0.0]):
        msg = JointState(header=header(ts), name=["a"] * len(pos), position=np.array(pos),
                         velocity=np.array(vel), effort=np.zeros(0))
        inp(bytes(ts.serialize_cdr(msg, "sensor_msgs/msg/JointState")), STAMP)
    assert inp.counters.accepted == 1 and inp.counters.rejected["wrong_size"] == 1
    np.testing.assert_allclose(inp.buffer.latest().value, [0.1, 0.2, 0.3, -1.0], rtol=1e-6)
    assert "position[0:3]: position has 1 values" in inp.last_reject[0]


def test_twist_stamped_action_encodes_and_reads_back(tmp_path):
    profile = load_profile(servo_profile(tmp_path))
    m = profile.action_mapping()
    raw = m.encode(np.array([0.25, -0.5, 0.125, 1.0]), STAMP)
    msg = their_store().deserialize_cdr(raw, "geometry_msgs/msg/TwistStamped")
    t = msg.twist
    assert [t.linear.x, t.linear.y, t.linear.z, t.angular.x, t.angular.y, t.angular.z] == [0.25, -0.5, 0.125, 0,
                                                                                           0, 1.0]
    assert msg.header.frame_id == "panda_link0"
    assert msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec == STAMP
    np.testing.assert_array_equal(m.decode(raw), [0.25, -0.5, 0.125, 1.0])  # the intervention path


def test_joint_trajectory_and_custom_gripper_command_actions(tmp_path):
    joints = [f"panda_joint{i}" for i in range(1, 8)]
    traj = servo_profile(tmp_path, **{"action": {
        "topic": "/arm_controller/joint_trajectory", "type": "trajectory_msgs/msg/JointTrajectory",
        "fields": ["points[0].positions[0:7]"],
        "constants": {"joint_names": joints, "points[0].time_from_start.nanosec": 100_000_000},
        "low": [-3] * 7, "high": [3] * 7}})
    m = load_profile(traj).action_mapping()
    q = np.linspace(-1, 1, 7)
    msg = their_store().deserialize_cdr(m.encode(q), "trajectory_msgs/msg/JointTrajectory")
    assert msg.joint_names == joints and len(msg.points) == 1
    np.testing.assert_array_equal(msg.points[0].positions, q)
    assert msg.points[0].time_from_start.nanosec == 100_000_000 and msg.points[0].velocities.size == 0

    grip_cmd = "float64 position\nfloat64 max_effort\n"
    (tmp_path / "GripperCommand.msg").write_text(grip_cmd)
    grip = servo_profile(tmp_path, **{"types.control_msgs/msg/GripperCommand": "GripperCommand.msg", "action": {
        "topic": "/gripper/cmd", "type": "control_msgs/msg/GripperCommand", "fields": ["position"],
        "constants": {"max_effort": 40.0}, "low": [0.0], "high": [0.08]}})
    m = load_profile(grip).action_mapping()
    ts = their_store({"control_msgs/msg/GripperCommand": grip_cmd})
    msg = ts.deserialize_cdr(m.encode([0.03]), "control_msgs/msg/GripperCommand")
    assert (msg.position, msg.max_effort) == (0.03, 40.0)


def test_humble_typestore(tmp_path):
    profile = load_profile(servo_profile(tmp_path, typestore="humble"))
    assert profile.msg_types.distro == "humble"
    raw = profile.action_mapping().encode([1, 0, 0, 0])
    assert get_typestore(Stores.ROS2_HUMBLE).deserialize_cdr(raw, "geometry_msgs/msg/TwistStamped").twist.linear.x == 1


@pytest.mark.parametrize(("changes", "msg_file", "why"), [
    ({"action.type": "geometry_msgs/msg/TwistStampd"}, None,
     r"unknown message type 'geometry_msgs/msg/TwistStampd'.*did you mean geometry_msgs/msg/TwistStamped"),
    ({"action.fields": [*TWIST_FIELDS[:3], "twist.angular.w"]}, None,
     r"action: geometry_msgs/msg/TwistStamped has no field 'twist.angular.w' \(geometry_msgs/msg/Vector3 has: "
     r"x, y, z\)"),
    ({"action.fields": [*TWIST_FIELDS[:3], "twist.angular"]}, None,
     r"twist.angular is a geometry_msgs/msg/Vector3, not a number; name one of its fields \(x, y, z\)"),
    ({"action.fields": TWIST_FIELDS[:3]}, None,
     r"action: fields give 3 value\(s\) \[twist.linear.x \(1\), .*\], but low/high have 4"),
    ({"action.fields": None}, None, r"action type geometry_msgs/msg/TwistStamped needs `fields`"),
    ({"action.constants": {"header.frame_id": 3}}, None, r"constant .*header.frame_id is a string field, got 3"),
    ({"vectors.0.fields": ["pose.position.x", "header.frame_id"]}, None,
     r"vectors 'ee_pose': geometry_msgs/msg/PoseStamped.header.frame_id is a string, not a number"),
    ({"vectors.0.dim": 5}, None, r"vectors 'ee_pose': fields hold 4 values, dim says 5"),
    ({"vectors.1.fields": ["finger_force[1:3]"]}, None, r"finger_force is an array of 2 entries: \[1:3\] is out "
                                                        r"of range"),
    ({"vectors.0.type": "sensor_msgs/msg/JointState", "vectors.0.fields": ["position"]}, None,
     r"position is a sequence of float64 whose length varies: give the entries, e.g. position\[0:7\]"),
    ({"types.my_gripper/msg/GripperState": "msg/Nope.msg"}, None, r"types: my_gripper/msg/GripperState: \.msg "
                                                                   r"file .*Nope\.msg does not exist"),
    ({}, "float64[ width\n", r"types: my_gripper/msg/GripperState: .*GripperState\.msg is not a valid \.msg "
                             r"definition"),
    ({}, "flaot64 width\n", r"field 'width' is of type my_gripper/msg/flaot64, which is neither a jazzy message "
                            r"nor one of the profile's types"),
    ({"types.Foo": "msg/GripperState.msg"}, None, r"custom type name 'Foo' must look like pkg/msg/Name"),
])
def test_profile_errors(tmp_path, changes, msg_file, why):
    path = servo_profile(tmp_path, **changes)
    if msg_file is not None:
        (tmp_path / "msg" / "GripperState.msg").write_text(msg_file)
    with pytest.raises(ProfileError, match=why):
        load_profile(path)


def test_profile_error_is_one_clear_cli_error(tmp_path):
    path = servo_profile(tmp_path, **{"action.fields": TWIST_FIELDS[:3]})
    res = CliRunner().invoke(app, ["check", "--profile", str(path), "--bag", str(tmp_path / "nobag")])
    assert res.exit_code == 2, res.output
    assert "fields give 3 value(s)" in res.output and "Traceback" not in res.output


def test_bringup_servo_action_snippet_loads(tmp_path):
    """docs/bringup.md's MoveIt Servo action section, in place of the worked example's action."""
    text = (ROOT / "docs" / "bringup.md").read_text()
    example = yaml.safe_load(text.split("```yaml\n", 1)[1].split("```", 1)[0])
    snippet = next(b for b in text.split("```")[1::2] if "delta_twist_cmds" in b)
    example.update(yaml.safe_load(snippet))
    example.pop("reset")  # its home pose drives joints; the Servo action is Cartesian
    (tmp_path / "servo7.yaml").write_text(yaml.safe_dump(example))
    m = load_profile(tmp_path / "servo7.yaml").action_mapping()
    msg = their_store().deserialize_cdr(m.encode([0.1, 0, 0, 0.5]), "geometry_msgs/msg/TwistStamped")
    assert (msg.twist.linear.x, msg.twist.angular.z, msg.header.frame_id) == (0.1, 0.5, "base_link")


def test_bringup_worked_servo_profile_loads(tmp_path):
    """docs/bringup.md's whole 7-joint profile through MoveIt Servo: Cartesian twists out, and a home
    reset on the end-effector position read from a PoseStamped field path."""
    text = (ROOT / "docs" / "bringup.md").read_text()
    block = next(b for b in text.split("```yaml\n")[1:] if "name: arm7_servo" in b).split("```", 1)[0]
    (tmp_path / "arm7_servo.yaml").write_text(block)
    p = load_profile(tmp_path / "arm7_servo.yaml")
    assert [c.name for c in p.cameras] == ["front", "wrist"] and p.joints.dim == 14 and p.action.dim == 4
    home = p.reset.home
    assert p.reset.strategy == "home" and home.key == "ee_pose" and list(home.action_indices) == [0, 1, 2]
    assert p.obs_specs()["ee_pose"].shape == (3,)
    msg = their_store().deserialize_cdr(p.action_mapping().encode([0.05, 0, -0.05, 0.2]),
                                        "geometry_msgs/msg/TwistStamped")
    assert (msg.twist.linear.x, msg.twist.linear.z, msg.twist.angular.z) == pytest.approx((0.05, -0.05, 0.2))
    assert msg.header.frame_id == "base_link"
