"""cyclonedds topic types derived from the message definitions (rosbags' field definitions).

They only name the type on the wire (`pkg::msg::dds_::Name_`) and describe its layout to Cyclone
(which checks incoming samples against it); the bytes themselves always come from the codec.
Plain "final" structs, so Cyclone speaks XCDR1 like ROS 2. Any type of a profile's typestore or
custom `.msg` files works: sequences, fixed arrays, bounded strings and sequences map to the IDL
rosidl generates for them. This module must not use `from __future__ import annotations`: the
binding resolves the hints when a class is made.
"""

import dataclasses
import types

from cyclonedds.idl import IdlStruct
from cyclonedds.idl import types as t

from robot_bridge.codec.typestore import MessageTypes, default_types
from robot_bridge.errors import TransportError

# rosidl: byte -> octet, char -> uint8
_PRIMS = {
    "bool": bool, "byte": t.byte, "octet": t.byte, "char": t.uint8, "int8": t.int8, "uint8": t.uint8,
    "int16": t.int16, "uint16": t.uint16, "int32": t.int32, "uint32": t.uint32, "int64": t.int64,
    "uint64": t.uint64, "float32": t.float32, "float64": t.float64,
}


def dds_type_name(typename: str) -> str:
    """`sensor_msgs/msg/Image` -> `sensor_msgs::msg::dds_::Image_`."""
    pkg, kind, name = typename.split("/")
    return f"{pkg}::{kind}::dds_::{name}_"


def _base(desc, mt: MessageTypes):
    node, d = desc
    if node == 2:  # a message
        return idl_type(d, mt)
    name, bound = d
    if name in ("string", "wstring"):
        return t.bounded_str[bound] if bound else str
    return _PRIMS[name]


def _hint(desc, mt: MessageTypes):
    node, d = desc
    if node in (1, 2):
        return _base(desc, mt)
    inner, n = d
    if node == 3:
        return t.array[_base(inner, mt), n]
    return t.sequence[_base(inner, mt), n] if n else t.sequence[_base(inner, mt)]


def idl_type(typename: str, mt: MessageTypes | None = None) -> type:
    """The cyclonedds struct of `typename` in `mt` (Jazzy's stock messages by default), made once."""
    mt = mt or default_types()
    made = mt.idl_cache.get(typename)
    if made is not None:
        return made
    if not mt.has(typename):
        raise TransportError(f"message type {typename!r} is not in the {mt.distro} typestore nor in the profile's "
                             "`types`")
    hints = {name: _hint(desc, mt) for name, desc in mt.fields(typename)}

    def body(ns):
        ns["__annotations__"] = hints
        ns["__module__"] = __name__

    cls_name = "Dds_" + typename.replace("/", "_")
    made = dataclasses.dataclass(types.new_class(cls_name, (IdlStruct,), {"typename": dds_type_name(typename)}, body))
    mt.idl_cache[typename] = made
    return made
