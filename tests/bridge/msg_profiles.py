"""Profiles with other message types than the MultiArrays: a MoveIt Servo arm (TwistStamped actions,
a PoseStamped end-effector pose) with a custom gripper state `.msg`."""

from __future__ import annotations

from pathlib import Path

import yaml

GRIPPER_STATE = """\
# a custom gripper driver's state
std_msgs/Header header
float64 width          # m
float32[2] finger_force
bool grasped
uint8[<=4] flags       # a bounded sequence
string<=16 status      # a bounded string
"""

TWIST_FIELDS = ["twist.linear.x", "twist.linear.y", "twist.linear.z", "twist.angular.z"]


def servo_profile(tmp_path: Path, **changes) -> Path:
    """`changes`: dotted keys into the profile dict (list entries by index), like small_profile."""
    (tmp_path / "msg").mkdir(exist_ok=True)
    (tmp_path / "msg" / "GripperState.msg").write_text(GRIPPER_STATE)
    data = {
        "name": "servo_arm",
        "control_rate_hz": 20,
        "status_rate_hz": 10,
        "typestore": "jazzy",
        "types": {"my_gripper/msg/GripperState": "msg/GripperState.msg"},
        "vectors": [
            {"key": "ee_pose", "topic": "/arm/pose", "type": "geometry_msgs/msg/PoseStamped", "rate_hz": 50,
             "fields": ["pose.position.x", "pose.position.y", "pose.position.z", "pose.orientation.w"]},
            {"key": "grip", "topic": "/gripper/state", "type": "my_gripper/msg/GripperState", "rate_hz": 50,
             "required": False, "fields": ["width", "finger_force[0:2]", "grasped"]},
        ],
        "action": {"topic": "/servo/delta_twist_cmds", "type": "geometry_msgs/msg/TwistStamped",
                   "fields": list(TWIST_FIELDS), "constants": {"header.frame_id": "panda_link0"},
                   "low": [-1] * 4, "high": [1] * 4, "hold": [0] * 4},
        "episode": {"max_steps": 50, "chunk_len": 8},
    }
    for dotted, value in changes.items():
        node = data
        *parents, leaf = dotted.split(".")
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        if isinstance(node, list):
            node[int(leaf)] = value
        elif value is None:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    path = tmp_path / "servo.yaml"
    path.write_text(yaml.safe_dump(data))
    return path
