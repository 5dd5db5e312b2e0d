"""The rclpy transport round-trips codec bytes; runs only where ROS 2 (rclpy) is installed."""

import time

import numpy as np
import pytest

pytest.importorskip("rclpy")

from robot_bridge.codec import Header, JointState, Time, decode, encode  # noqa: E402
from robot_bridge.transport.base import RELIABLE_QOS  # noqa: E402
from robot_bridge.transport.rclpy_ import RclpyTransport  # noqa: E402
from tests.bridge.helpers import new_domain  # noqa: E402


def test_raw_round_trip():
    t = RclpyTransport(new_domain())
    got = []
    try:
        t.subscribe("/probe", "sensor_msgs/msg/JointState", RELIABLE_QOS, lambda raw, ns: got.append(raw))
        pub = t.publisher("/probe", "sensor_msgs/msg/JointState", RELIABLE_QOS)
        msg = JointState(header=Header(Time.from_ns(7), "a"), name=["j"], position=np.array([2.5]))
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            pub(encode(msg))
            time.sleep(0.1)
        assert got and decode(got[0], "sensor_msgs/msg/JointState").position.tolist() == [2.5]
    finally:
        t.close()
