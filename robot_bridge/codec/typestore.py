"""Any ROS 2 message type: rosbags' typestores (Humble, Jazzy) plus custom `.msg` definitions.

`MessageTypes` is the one place messages are (de)serialised: rosbags' `serialize_cdr` /
`deserialize_cdr`, fed a memoryview so numeric arrays (image pixels included) are read-only
views of the received bytes, not copies. bench/codec.py measured that path against a
hand-written codec and found the hand-written one not 2x faster for any type, so the package
has none any more: it lives on in bench/ as the benchmark's reference (docs/bridge.md, "Message types").

The dataclasses of messages.py stay as a convenient way to build the common messages; `encode`
turns them into rosbags' classes. The DDS transport derives its topic types from the same field
definitions (transport/dds_types.py), so whatever a profile names can be published and subscribed.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import struct
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import numpy as np
from rosbags.serde import SerdeError

from robot_bridge.codec.cdr import NUMPY
from robot_bridge.errors import DecodeError, MessageTypeError

DISTROS = ("humble", "jazzy")
# rosbags' base type names (after its .msg parser) that hold a number; bool counts as 0/1
NUMERIC = {
    "bool": np.bool_, "byte": np.uint8, "char": np.uint8, "octet": np.uint8,
    "int8": np.int8, "uint8": np.uint8, "int16": np.int16, "uint16": np.uint16, "int32": np.int32,
    "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64, "float32": np.float32, "float64": np.float64,
}
STRINGS = ("string", "wstring")


def stamp_ns(header) -> int:
    """Nanoseconds of a std_msgs/Header's stamp (0: not stamped)."""
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


class MessageTypes:
    """The message definitions of one ROS 2 distro plus a profile's custom `.msg` files."""

    def __init__(self, distro: str = "jazzy", custom: Iterable[tuple[str, str]] = ()):
        from rosbags.typesys import Stores, TypesysError, get_types_from_msg, get_typestore

        if distro not in DISTROS:
            raise MessageTypeError(f"typestore {distro!r}: use one of {', '.join(DISTROS)}")
        self.distro = distro
        self.custom = dict(custom)
        self.store = get_typestore(Stores.ROS2_HUMBLE if distro == "humble" else Stores.ROS2_JAZZY)
        self.idl_cache: dict[str, type] = {}  # transport/dds_types.py's topic types
        for name, path in self.custom.items():
            try:
                text = Path(path).read_text()
            except FileNotFoundError:
                raise MessageTypeError(f"types: {name}: .msg file {path} does not exist") from None
            except (OSError, UnicodeDecodeError) as e:
                raise MessageTypeError(f"types: {name}: cannot read {path}: {e}") from None
            try:
                defs = get_types_from_msg(text, name)
            except TypesysError as e:
                first = str(e).strip().splitlines()
                raise MessageTypeError(f"types: {name}: {path} is not a valid .msg definition "
                                       f"({first[0] if first else 'parse error'}; see the lines after it)") from None
            if not defs[name][1]:
                raise MessageTypeError(f"types: {name}: {path} defines no field")
            try:
                self.store.register(defs)
            except TypesysError as e:
                raise MessageTypeError(f"types: {name}: {e} (a {distro} type of that name exists with "
                                       "another definition; rename the custom type)") from None
        for name, path in self.custom.items():
            for field, ref in self._refs(name):
                if ref not in self.store.fielddefs:
                    raise MessageTypeError(f"types: {name} ({path}): field {field!r} is of type {ref}, which is "
                                           f"neither a {distro} message nor one of the profile's types")

    def _refs(self, typename: str):
        for field, (node, desc) in self.store.fielddefs[typename][1]:
            if node == 2:  # NAME
                yield field, desc
            elif node in (3, 4) and desc[0][0] == 2:  # ARRAY / SEQUENCE of NAME
                yield field, desc[0][1]

    # -- names -------------------------------------------------------------------------------------
    def has(self, typename: str) -> bool:
        return typename in self.store.fielddefs

    def check(self, typename: str) -> None:
        """MessageTypeError naming close matches when `typename` is unknown."""
        if self.has(typename):
            return
        near = difflib.get_close_matches(typename, list(self.store.fielddefs), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise MessageTypeError(f"unknown message type {typename!r}: not in the {self.distro} typestore nor in the "
                               f"profile's `types` (add `types: {{{typename}: path/to/{typename.rsplit('/', 1)[-1]}"
                               f".msg}}` for a custom one){hint}")

    def fields(self, typename: str) -> list[tuple[str, tuple]]:
        return self.store.fielddefs[typename][1]

    # -- bytes ---------------------------------------------------------------------------------------
    def decode(self, raw: bytes | bytearray | memoryview, typename: str):
        """rosbags' message object for CDR bytes; DecodeError on anything malformed. Numeric arrays
        are read-only numpy views of `raw`."""
        if typename not in self.store.fielddefs:
            raise DecodeError(f"message type {typename!r} is not supported by the {self.distro} typestore "
                              "or the profile's `types`")
        view = memoryview(raw if isinstance(raw, bytes) else bytes(raw))
        try:
            return self.store.deserialize_cdr(view, typename)
        except SerdeError as e:
            cause = e.__cause__
            if isinstance(cause, UnicodeDecodeError):
                why = f"a string is not UTF-8 ({cause})"
            elif cause is not None:
                why = f"message truncated or a length runs past the message end ({cause})"
            else:
                why = str(e)
            raise DecodeError(f"{typename}: {why}") from None
        except (IndexError, struct.error, ValueError, OverflowError) as e:
            raise DecodeError(f"{typename}: message truncated or a length runs past the message end ({e})") from None

    def encode(self, msg, typename: str | None = None) -> bytes:
        """CDR bytes (little endian, with the encapsulation header) of a messages.py dataclass or a
        rosbags message object."""
        if hasattr(msg, "__typename__"):
            typename = typename or msg.__typename__
            msg = self.from_dataclass(msg)
        typename = typename or msg.__msgtype__
        try:
            return bytes(self.store.serialize_cdr(msg, typename))
        except (struct.error, OverflowError) as e:
            raise ValueError(f"{typename}: a value does not fit its CDR type: {e}") from None
        except (AttributeError, TypeError, ValueError) as e:
            raise ValueError(f"{typename}: a field holds the wrong kind of value: {e}") from None

    def from_dataclass(self, msg):
        """The rosbags object of a messages.py dataclass (numeric sequences cast to their CDR type)."""
        values = {}
        for f in dataclasses.fields(msg):
            kind, v = f.metadata["cdr"], getattr(msg, f.name)
            if isinstance(kind, list):
                v = [self.from_dataclass(x) for x in v]
            elif isinstance(kind, type):
                v = self.from_dataclass(v)
            elif kind == "string[]":
                v = list(v)
            elif kind.endswith("[]"):
                v = np.ascontiguousarray(v, dtype=NUMPY[kind[:-2]]).reshape(-1)
            values[f.name] = v
        return self.store.types[msg.__typename__](**values)

    # -- building messages -------------------------------------------------------------------------
    def new(self, typename: str):
        """A message with every field at its zero value (numbers 0, strings empty, sequences empty)."""
        cls = self.store.types[typename]
        return cls(**{name: self.zero(desc) for name, desc in self.fields(typename)})

    def zero(self, desc):
        node, d = desc
        if node == 1:  # BASE
            base = d[0]
            return "" if base in STRINGS else (False if base == "bool" else (0.0 if base.startswith("float") else 0))
        if node == 2:  # NAME
            return self.new(d)
        (inner_node, inner), n = d
        if inner_node == 1 and inner[0] in NUMERIC:
            return np.zeros(n if node == 3 else 0, NUMERIC[inner[0]])
        if node == 4:
            return []
        return [self.zero((inner_node, inner)) for _ in range(n)]

    def key(self) -> tuple:
        return (self.distro, tuple(sorted(self.custom.items())))


@cache
def _types(distro: str, custom: tuple[tuple[str, str], ...], _digest: str) -> MessageTypes:
    return MessageTypes(distro, custom)


def message_types(distro: str = "jazzy", custom: dict[str, str] | Iterable[tuple[str, str]] = ()) -> MessageTypes:
    """The (cached) MessageTypes of a distro and custom `.msg` files; a changed file makes a new one."""
    items = tuple(sorted(dict(custom).items()))
    h = hashlib.sha256()
    for _, path in items:
        try:
            h.update(Path(path).read_bytes())
        except OSError:
            h.update(b"<unreadable>")  # MessageTypes raises the error with the path
    return _types(distro, items, h.hexdigest())


def default_types() -> MessageTypes:
    """Jazzy's messages, without custom types: the stock messages every profile can use."""
    return message_types("jazzy")
