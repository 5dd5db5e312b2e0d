"""One CDR codec for every transport: `encode(msg) -> bytes`, `decode(raw, typename) -> msg`.

Both go through rosbags (typestore.py): `decode` returns rosbags' message objects (same field
names as the .msg), `encode` takes those or the dataclasses of messages.py. These module-level
functions know Jazzy's stock messages; a profile's own typestore and custom `.msg` types come
from `RobotProfile.msg_types` (a MessageTypes with the same two methods), and fields.py maps
vectors to and from any numeric fields of any of them.
"""

from __future__ import annotations

from robot_bridge.codec.arrays import array_msg
from robot_bridge.codec.messages import (
    REGISTRY,
    Bool,
    CompressedImage,
    Float32MultiArray,
    Float64MultiArray,
    Header,
    Image,
    JointState,
    MultiArrayDimension,
    MultiArrayLayout,
    String,
    Time,
    Vector3,
    Wrench,
    WrenchStamped,
)
from robot_bridge.codec.typestore import MessageTypes, default_types, message_types, stamp_ns

__all__ = [
    "REGISTRY", "Bool", "CompressedImage", "Float32MultiArray", "Float64MultiArray", "Header", "Image",
    "JointState", "MessageTypes", "MultiArrayDimension", "MultiArrayLayout", "String", "Time", "Vector3", "Wrench",
    "WrenchStamped", "array_msg", "decode", "default_types", "encode", "message_types", "stamp_ns",
]


def encode(msg) -> bytes:
    """CDR bytes (little endian, with the encapsulation header) of a message (dataclass or rosbags')."""
    return default_types().encode(msg)


def decode(raw: bytes | bytearray | memoryview, typename: str):
    """Decode CDR bytes as the stock message `typename`; raises DecodeError on anything malformed.
    Numeric arrays are read-only numpy views of `raw`."""
    return default_types().decode(raw, typename)
