"""Transports: `dds` (cyclonedds-python) and `rclpy` (inside a ROS 2 environment)."""

from __future__ import annotations

from robot_bridge.errors import TransportError
from robot_bridge.transport.base import RELIABLE_QOS, SENSOR_QOS, QosEvents, QosSpec, Transport


def make_transport(kind: str, domain_id: int = 0, loopback: bool = False, types=None) -> Transport:
    """`dds` or `rclpy`; imported on demand so neither middleware is needed for the other. `types`:
    the profile's MessageTypes (dds derives its topic types from them; rclpy needs the message
    packages, custom ones included, built in its ROS 2 environment)."""
    if kind == "dds":
        from robot_bridge.transport.dds import LOOPBACK_XML, DdsTransport

        return DdsTransport(domain_id, LOOPBACK_XML if loopback else None, types)
    if kind == "rclpy":
        from robot_bridge.transport.rclpy_ import RclpyTransport

        return RclpyTransport(domain_id)
    raise TransportError(f"unknown transport {kind!r}; use dds or rclpy")


__all__ = ["RELIABLE_QOS", "SENSOR_QOS", "QosEvents", "QosSpec", "Transport", "make_transport"]
