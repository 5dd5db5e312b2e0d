"""Bags with other message types, written by rosbags as another tool would: PoseStamped and a custom
gripper `.msg` as observations (field paths), TwistStamped actions. `robot check --bag` reads it,
import stores the field values, export writes them back in the same types."""

import numpy as np
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import Writer
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from robot_bridge.bag import export_bag, import_bag
from robot_bridge.check import check_bag
from robot_bridge.profile import load_profile
from tests.bridge.msg_profiles import GRIPPER_STATE, servo_profile
from worldsample.store import EpisodeStore

T0 = 1_700_000_000 * 10**9
STEP = 50_000_000  # 20 Hz
TICKS = 8


def store():
    ts = get_typestore(Stores.ROS2_JAZZY)
    ts.register(get_types_from_msg(GRIPPER_STATE, "my_gripper/msg/GripperState"))
    return ts


def header(ts, ns, frame):
    return ts.types["std_msgs/msg/Header"](stamp=ts.types["builtin_interfaces/msg/Time"](
        sec=ns // 10**9, nanosec=ns % 10**9), frame_id=frame)


def write_bag(path):
    """Per tick: a pose, a gripper state, then (3 ms later) a twist command. Returns what was sent."""
    ts = store()
    T = ts.types
    poses, grips, twists = [], [], []
    with Writer(path, version=9) as w:
        c_pose = w.add_connection("/arm/pose", "geometry_msgs/msg/PoseStamped", typestore=ts)
        c_grip = w.add_connection("/gripper/state", "my_gripper/msg/GripperState", typestore=ts)
        c_twist = w.add_connection("/servo/delta_twist_cmds", "geometry_msgs/msg/TwistStamped", typestore=ts)
        for k in range(TICKS):
            t = T0 + k * STEP
            p = [0.4 + 0.01 * k, -0.1, 0.3 - 0.005 * k, 1.0]
            pose = T["geometry_msgs/msg/PoseStamped"](header=header(ts, t, "world"), pose=T["geometry_msgs/msg/Pose"](
                position=T["geometry_msgs/msg/Point"](x=p[0], y=p[1], z=p[2]),
                orientation=T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=p[3])))
            g = [0.08 - 0.005 * k, 0.5 * k, 0.25, float(k > 4)]
            grip = T["my_gripper/msg/GripperState"](header=header(ts, t, "gripper"), width=g[0],
                                                    finger_force=np.array(g[1:3], np.float32), grasped=bool(g[3]),
                                                    flags=np.array([k], np.uint8), status="ok")
            a = [0.1 * k / TICKS, -0.2, 0.05, 0.3 - 0.1 * k / TICKS]
            Vector3 = T["geometry_msgs/msg/Vector3"]
            twist = T["geometry_msgs/msg/TwistStamped"](header=header(ts, t + 3_000_000, "panda_link0"),
                                                        twist=T["geometry_msgs/msg/Twist"](
                                                            linear=Vector3(x=a[0], y=a[1], z=a[2]),
                                                            angular=Vector3(x=0.0, y=0.0, z=a[3])))
            w.write(c_pose, t, ts.serialize_cdr(pose, "geometry_msgs/msg/PoseStamped"))
            w.write(c_grip, t, ts.serialize_cdr(grip, "my_gripper/msg/GripperState"))
            w.write(c_twist, t + 3_000_000, ts.serialize_cdr(twist, "geometry_msgs/msg/TwistStamped"))
            poses.append(p)
            grips.append(g)
            twists.append(a)
    return np.array(poses, np.float32), np.array(grips, np.float32), np.array(twists, np.float32)


def test_check_import_export_with_pose_twist_and_custom_types(tmp_path):
    profile = load_profile(servo_profile(tmp_path, **{"vectors.0.rate_hz": 20, "vectors.1.rate_hz": 20}))
    poses, grips, twists = write_bag(tmp_path / "bag")

    report = check_bag(profile, tmp_path / "bag")
    assert report.ok, report.problems
    assert [r.input.counters.accepted for r in report.streams] == [TICKS, TICKS]

    rep = import_bag(tmp_path / "bag", tmp_path / "run", profile)
    assert [r.length for r in rep.episodes] == [TICKS], rep.lines()
    ep = EpisodeStore(tmp_path / "run").reader("real").episode(0)
    np.testing.assert_array_equal(ep["ee_pose"], poses)  # pose.position.xyz + orientation.w of each tick
    np.testing.assert_array_equal(ep["grip"], grips)  # width, finger_force[0:2], grasped
    np.testing.assert_array_equal(ep["action"], twists)  # twist.linear.xyz, twist.angular.z

    export_bag(tmp_path / "run", tmp_path / "out", profile)
    got = {"/arm/pose": [], "/gripper/state": [], "/servo/delta_twist_cmds": []}
    with AnyReader([tmp_path / "out"]) as r:
        types = {c.topic: c.msgtype for c in r.connections}
        for conn, _, raw in r.messages(connections=[c for c in r.connections if c.topic in got]):
            got[conn.topic].append(r.deserialize(raw, conn.msgtype))
    assert types["/servo/delta_twist_cmds"] == "geometry_msgs/msg/TwistStamped"
    assert types["/gripper/state"] == "my_gripper/msg/GripperState"
    p = got["/arm/pose"]
    np.testing.assert_array_equal([[m.pose.position.x, m.pose.position.y, m.pose.position.z, m.pose.orientation.w]
                                   for m in p], poses)
    np.testing.assert_array_equal([[m.width, *m.finger_force, m.grasped] for m in got["/gripper/state"]], grips)
    tw = got["/servo/delta_twist_cmds"]
    np.testing.assert_array_equal([[m.twist.linear.x, m.twist.linear.y, m.twist.linear.z, m.twist.angular.z]
                                   for m in tw], twists)
    assert {m.header.frame_id for m in tw} == {"panda_link0"}
    # and the exported bag imports again into the same values
    rep = import_bag(tmp_path / "out", tmp_path / "run2", profile)
    again = EpisodeStore(tmp_path / "run2").reader("real").episode(0)
    np.testing.assert_array_equal(again["ee_pose"], poses)
    np.testing.assert_array_equal(again["action"], twists)
