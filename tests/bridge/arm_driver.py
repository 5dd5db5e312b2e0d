"""A stand-in ROS 2 arm driver that knows nothing of WorldSample: raw cyclonedds-python, ROS 2
wire conventions (`rt/` topics, `pkg::msg::dds_::Name_` types), no project imports and no reset
handshake. It publishes best-effort sensor_msgs/JointState and an rgb8 sensor_msgs/Image, and
applies std_msgs/Float64MultiArray end-effector deltas: position += clip(action, -1, 1) * step.

    python tests/bridge/arm_driver.py --domain 7 --joints 3 --image 32x32 --start 0.5

The domain's discovery settings come from CYCLONEDDS_URI. Stops on SIGTERM/SIGINT.
"""

import argparse
import signal
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.idl.types import float64, int32, sequence, uint8, uint32
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
class Image_(IdlStruct, typename="sensor_msgs::msg::dds_::Image_"):
    header: Header_
    height: uint32
    width: uint32
    encoding: str
    is_bigendian: uint8
    step: uint32
    data: sequence[uint8]


@dataclass
class JointState_(IdlStruct, typename="sensor_msgs::msg::dds_::JointState_"):
    header: Header_
    name: sequence[str]
    position: sequence[float64]
    velocity: sequence[float64]
    effort: sequence[float64]


@dataclass
class MultiArrayDimension_(IdlStruct, typename="std_msgs::msg::dds_::MultiArrayDimension_"):
    label: str
    size: uint32
    stride: uint32


@dataclass
class MultiArrayLayout_(IdlStruct, typename="std_msgs::msg::dds_::MultiArrayLayout_"):
    dim: sequence[MultiArrayDimension_]
    data_offset: uint32


@dataclass
class Float64MultiArray_(IdlStruct, typename="std_msgs::msg::dds_::Float64MultiArray_"):
    layout: MultiArrayLayout_
    data: sequence[float64]


def header(now_ns: int, frame: str) -> Header_:
    return Header_(Time_(now_ns // 1_000_000_000, now_ns % 1_000_000_000), frame)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--domain", type=int, required=True)
    ap.add_argument("--joints", type=int, default=3)
    ap.add_argument("--image", default="32x32", help="WxH of the published rgb8 frames")
    ap.add_argument("--start", type=float, default=0.5, help="initial position of every joint")
    ap.add_argument("--step", type=float, default=0.05, help="position change per unit action per tick")
    ap.add_argument("--rate", type=float, default=50.0)
    ap.add_argument("--prefix", default="/arm")
    a = ap.parse_args()
    width, height = (int(v) for v in a.image.split("x"))

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    dp = DomainParticipant(a.domain)
    best_effort = Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(5), Policy.Durability.Volatile)
    js_w = DataWriter(dp, Topic(dp, f"rt{a.prefix}/joint_states", JointState_), qos=best_effort)
    img_w = DataWriter(dp, Topic(dp, "rt/cam/front", Image_), qos=best_effort)
    cmd_r = DataReader(dp, Topic(dp, f"rt{a.prefix}/cmd", Float64MultiArray_), qos=best_effort)

    names = [f"j{i + 1}" for i in range(a.joints)]
    pos = np.full(a.joints, a.start)
    action = np.zeros(a.joints)
    n_actions = tick = 0
    period = 1.0 / a.rate
    pixels = np.zeros((height, width, 3), np.uint8)
    while not stop.is_set():
        for m in cmd_r.take(N=64):
            if len(m.data) == a.joints:
                action = np.clip(np.asarray(m.data, float), -1, 1)
                n_actions += 1
        pos = np.clip(pos + action * a.step, -1.0, 1.0)
        now = time.time_ns()
        js_w.write(JointState_(header(now, "base"), names, pos.tolist(), [0.0] * a.joints, []))
        if tick % 2 == 0:
            pixels[:] = tick % 256
            img_w.write(Image_(header(now, "front"), height, width, "rgb8", 0, width * 3, pixels.tobytes()))
        tick += 1
        time.sleep(period)
    print(f"arm_driver: {n_actions} actions applied, final position {np.round(pos, 3).tolist()}", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
