"""The ROS 2 messages the bridge speaks, declared once as dataclasses.

Each field's CDR kind lives in its dataclass metadata: a primitive name, "string", "T[]" for a
sequence of primitives or strings, or a message class (nested, or in a list for a sequence).
Field order is the `.msg` order. `encode`/`decode` in `codec/__init__.py` walk these fields, and
the DDS transport derives its topic types from them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

REGISTRY: dict[str, type] = {}


def ros_message(typename: str):
    """Register a dataclass as the ROS message `pkg/msg/Name`."""

    def wrap(cls):
        cls = dataclasses.dataclass(cls)
        cls.__typename__ = typename
        REGISTRY[typename] = cls
        return cls

    return wrap


def cdr(kind: str, default: Any = None) -> Any:
    if kind.endswith("[]"):
        if kind[:-2] == "string":
            return dataclasses.field(default_factory=list, metadata={"cdr": kind})
        return dataclasses.field(default_factory=lambda: np.zeros(0, kind[:-2]), metadata={"cdr": kind})
    if default is None:
        default = "" if kind == "string" else (False if kind == "bool" else 0)
    return dataclasses.field(default=default, metadata={"cdr": kind})


def nested(cls: type, many: bool = False) -> Any:
    kind = [cls] if many else cls
    return dataclasses.field(default_factory=list if many else cls, metadata={"cdr": kind})


@ros_message("builtin_interfaces/msg/Time")
class Time:
    sec: int = cdr("int32")
    nanosec: int = cdr("uint32")

    @classmethod
    def from_ns(cls, ns: int) -> Time:
        return cls(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)

    def to_ns(self) -> int:
        return self.sec * 1_000_000_000 + self.nanosec


@ros_message("std_msgs/msg/Header")
class Header:
    stamp: Time = nested(Time)
    frame_id: str = cdr("string")


@ros_message("sensor_msgs/msg/Image")
class Image:
    header: Header = nested(Header)
    height: int = cdr("uint32")
    width: int = cdr("uint32")
    encoding: str = cdr("string")
    is_bigendian: int = cdr("uint8")
    step: int = cdr("uint32")
    data: np.ndarray = cdr("uint8[]")


@ros_message("sensor_msgs/msg/CompressedImage")
class CompressedImage:
    header: Header = nested(Header)
    format: str = cdr("string")
    data: np.ndarray = cdr("uint8[]")


@ros_message("sensor_msgs/msg/JointState")
class JointState:
    header: Header = nested(Header)
    name: list = cdr("string[]")
    position: np.ndarray = cdr("float64[]")
    velocity: np.ndarray = cdr("float64[]")
    effort: np.ndarray = cdr("float64[]")


@ros_message("geometry_msgs/msg/Vector3")
class Vector3:
    x: float = cdr("float64", 0.0)
    y: float = cdr("float64", 0.0)
    z: float = cdr("float64", 0.0)


@ros_message("geometry_msgs/msg/Wrench")
class Wrench:
    force: Vector3 = nested(Vector3)
    torque: Vector3 = nested(Vector3)


@ros_message("geometry_msgs/msg/WrenchStamped")
class WrenchStamped:
    header: Header = nested(Header)
    wrench: Wrench = nested(Wrench)


@ros_message("std_msgs/msg/MultiArrayDimension")
class MultiArrayDimension:
    label: str = cdr("string")
    size: int = cdr("uint32")
    stride: int = cdr("uint32")


@ros_message("std_msgs/msg/MultiArrayLayout")
class MultiArrayLayout:
    dim: list = nested(MultiArrayDimension, many=True)
    data_offset: int = cdr("uint32")


@ros_message("std_msgs/msg/Float32MultiArray")
class Float32MultiArray:
    layout: MultiArrayLayout = nested(MultiArrayLayout)
    data: np.ndarray = cdr("float32[]")


@ros_message("std_msgs/msg/Float64MultiArray")
class Float64MultiArray:
    layout: MultiArrayLayout = nested(MultiArrayLayout)
    data: np.ndarray = cdr("float64[]")


@ros_message("std_msgs/msg/String")
class String:
    data: str = cdr("string")


@ros_message("std_msgs/msg/Bool")
class Bool:
    data: bool = cdr("bool")
