"""cyclonedds topic types derived from the codec's message dataclasses.

They only name the type on the wire (`pkg::msg::dds_::Name_`) and describe its layout to Cyclone
(which checks incoming samples against it); the bytes themselves always come from the codec.
Plain "final" structs, so Cyclone speaks XCDR1 like ROS 2. This module must not use
`from __future__ import annotations`: the binding resolves the hints when a class is made.
"""

import dataclasses
import types
from functools import cache

from cyclonedds.idl import IdlStruct
from cyclonedds.idl import types as t

from robot_bridge.codec import message_class

_PRIMS = {
    "bool": bool, "int8": t.int8, "uint8": t.uint8, "int16": t.int16, "uint16": t.uint16,
    "int32": t.int32, "uint32": t.uint32, "int64": t.int64, "uint64": t.uint64,
    "float32": t.float32, "float64": t.float64, "string": str,
}


def dds_type_name(typename: str) -> str:
    """`sensor_msgs/msg/Image` -> `sensor_msgs::msg::dds_::Image_`."""
    pkg, kind, name = typename.split("/")
    return f"{pkg}::{kind}::dds_::{name}_"


def _hint(kind):
    if isinstance(kind, list):
        return t.sequence[idl_type(kind[0].__typename__)]
    if isinstance(kind, type):
        return idl_type(kind.__typename__)
    if kind.endswith("[]"):
        return t.sequence[_PRIMS[kind[:-2]]]
    return _PRIMS[kind]


@cache
def idl_type(typename: str) -> type:
    cls = message_class(typename)
    hints = {f.name: _hint(f.metadata["cdr"]) for f in dataclasses.fields(cls)}

    def body(ns):
        ns["__annotations__"] = hints
        ns["__module__"] = __name__

    made = types.new_class(f"Dds{cls.__name__}", (IdlStruct,), {"typename": dds_type_name(typename)}, body)
    return dataclasses.dataclass(made)
