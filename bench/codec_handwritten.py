"""The hand-written CDR codec over the dataclasses of robot_bridge/codec/messages.py: the
reference bench/codec.py times rosbags against.

Nothing in the bridge uses it: bench/codec.py found it not 2x faster than rosbags for any type, so
every message goes through rosbags (robot_bridge/codec/typestore.py, `MessageTypes`). It stays for
the benchmark, and tests/bridge/test_codec.py holds its encoder and decoder to rosbags' bytes
(Humble and Jazzy) so the comparison stays a fair one.
"""

from __future__ import annotations

import dataclasses

from robot_bridge.codec.cdr import CdrReader, CdrWriter
from robot_bridge.codec.messages import REGISTRY
from robot_bridge.errors import DecodeError


def message_class(typename: str) -> type:
    try:
        return REGISTRY[typename]
    except KeyError:
        raise DecodeError(f"message type {typename!r} has no hand-written codec; known: {sorted(REGISTRY)}") from None


def _write(w: CdrWriter, msg) -> None:
    for f in dataclasses.fields(msg):
        kind, value = f.metadata["cdr"], getattr(msg, f.name)
        if isinstance(kind, list):
            w.primitive("uint32", len(value))
            for item in value:
                _write(w, item)
        elif isinstance(kind, type):
            _write(w, value)
        elif kind == "string":
            w.string(value)
        elif kind == "string[]":
            w.primitive("uint32", len(value))
            for s in value:
                w.string(s)
        elif kind.endswith("[]"):
            w.array(kind[:-2], value)
        else:
            w.primitive(kind, value)


def _read(r: CdrReader, cls: type):
    values = {}
    for f in dataclasses.fields(cls):
        kind = f.metadata["cdr"]
        if isinstance(kind, list):
            values[f.name] = [_read(r, kind[0]) for _ in range(r.count(1))]
        elif isinstance(kind, type):
            values[f.name] = _read(r, kind)
        elif kind == "string":
            values[f.name] = r.string()
        elif kind == "string[]":
            values[f.name] = [r.string() for _ in range(r.count(5))]
        elif kind.endswith("[]"):
            values[f.name] = r.array(kind[:-2])
        else:
            values[f.name] = r.primitive(kind)
    return cls(**values)


def encode_handwritten(msg) -> bytes:
    """CDR bytes (little endian, with the encapsulation header) of a message dataclass."""
    w = CdrWriter()
    _write(w, msg)
    return w.bytes()


def decode_handwritten(raw: bytes | bytearray | memoryview, typename: str):
    """Decode CDR bytes as `typename` (a messages.py dataclass); DecodeError on anything malformed.
    Numeric arrays are read-only numpy views of `raw`."""
    cls = message_class(typename)
    try:
        return _read(CdrReader(raw), cls)
    except (ValueError, OverflowError) as e:  # a corrupt length can still trip numpy
        raise DecodeError(f"{typename}: {e}") from None
