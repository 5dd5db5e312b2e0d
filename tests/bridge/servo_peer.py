"""A stand-in for MoveIt Servo and an end-effector pose publisher that knows nothing of WorldSample:
raw cyclonedds-python with its own IDL for the ROS 2 types (`rt/` topics, `pkg::msg::dds_::Name_`
names), no project imports.

It subscribes geometry_msgs/TwistStamped on /servo/delta_twist_cmds (reliable) and prints every
command as one JSON line; it publishes geometry_msgs/PoseStamped on /arm/pose (best effort) at
--rate Hz with position (0.1, 0.2, 0.3 + 0.001 * tick) and orientation w = 1. Exits after
--count commands or --timeout seconds.

    python tests/bridge/servo_peer.py --domain 7 --count 5
"""

import argparse
import json
import sys
import time
from dataclasses import dataclass

from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.idl.types import float64, int32, uint32
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic


@dataclass
class Time_(IdlStruct, typename="builtin_interfaces::msg::dds_::Time_"):
    sec: int32
    nanosec: uint32


@dataclass
class Header_(IdlStruct, typename="std_msgs::msg::dds_::Header_"):
    stamp: Time_
    frame_id: str


@dataclass
class Vector3_(IdlStruct, typename="geometry_msgs::msg::dds_::Vector3_"):
    x: float64
    y: float64
    z: float64


@dataclass
class Twist_(IdlStruct, typename="geometry_msgs::msg::dds_::Twist_"):
    linear: Vector3_
    angular: Vector3_


@dataclass
class TwistStamped_(IdlStruct, typename="geometry_msgs::msg::dds_::TwistStamped_"):
    header: Header_
    twist: Twist_


@dataclass
class Point_(IdlStruct, typename="geometry_msgs::msg::dds_::Point_"):
    x: float64
    y: float64
    z: float64


@dataclass
class Quaternion_(IdlStruct, typename="geometry_msgs::msg::dds_::Quaternion_"):
    x: float64
    y: float64
    z: float64
    w: float64


@dataclass
class Pose_(IdlStruct, typename="geometry_msgs::msg::dds_::Pose_"):
    position: Point_
    orientation: Quaternion_


@dataclass
class PoseStamped_(IdlStruct, typename="geometry_msgs::msg::dds_::PoseStamped_"):
    header: Header_
    pose: Pose_


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--domain", type=int, required=True)
    ap.add_argument("--count", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--rate", type=float, default=50.0)
    a = ap.parse_args()

    dp = DomainParticipant(a.domain)
    reliable = Qos(Policy.Reliability.Reliable(0), Policy.History.KeepLast(10), Policy.Durability.Volatile)
    best_effort = Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(5), Policy.Durability.Volatile)
    cmd_r = DataReader(dp, Topic(dp, "rt/servo/delta_twist_cmds", TwistStamped_), qos=reliable)
    pose_w = DataWriter(dp, Topic(dp, "rt/arm/pose", PoseStamped_), qos=best_effort)
    print("servo_peer: ready", flush=True)
    got, tick, end = 0, 0, time.monotonic() + a.timeout
    while got < a.count and time.monotonic() < end:
        for m in cmd_r.take(N=64):
            t = m.twist
            print(json.dumps({"frame_id": m.header.frame_id,
                              "stamp_ns": m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec,
                              "linear": [t.linear.x, t.linear.y, t.linear.z],
                              "angular": [t.angular.x, t.angular.y, t.angular.z]}), flush=True)
            got += 1
        now = time.time_ns()
        pose_w.write(PoseStamped_(Header_(Time_(now // 1_000_000_000, now % 1_000_000_000), "world"),
                                  Pose_(Point_(0.1, 0.2, 0.3 + 0.001 * tick), Quaternion_(0.0, 0.0, 0.0, 1.0))))
        tick += 1
        time.sleep(1.0 / a.rate)
    sys.exit(0 if got >= a.count else 3)


if __name__ == "__main__":
    main()
