"""Vectors to and from numeric fields of any message: the action topic and `vectors` streams.

A field path walks into a message: `twist.linear.x`, `pose.position.x`, `position[0:7]` (entries
0..6 of a numeric sequence), `position[2]`, `points[0].positions[0:7]` (an index into a
sequence of messages). A path ends at a number or a slice of numbers; the vector is the
concatenation of its paths. Paths are checked against the message definition when a profile
loads (`compile_path`), so a wrong name or a string field is a profile error, not a runtime one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from robot_bridge.codec.typestore import NUMERIC, STRINGS, MessageTypes, stamp_ns
from robot_bridge.errors import MessageRejected, MessageTypeError

_SEG = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[(\d+)(?::(\d+))?\])?")
BASE, NAME, ARRAY, SEQUENCE = 1, 2, 3, 4
MULTI_ARRAYS = ("std_msgs/msg/Float32MultiArray", "std_msgs/msg/Float64MultiArray")


@dataclass(frozen=True)
class Step:
    name: str
    index: int | None = None  # [i]
    stop: int | None = None  # [index:stop]
    seq_type: str | None = None  # message type of the items when `name` is a sequence/array of messages


@dataclass(frozen=True)
class FieldPath:
    text: str
    steps: tuple[Step, ...]
    base: str  # rosbags base type of the final number(s), or "string"
    node: int  # BASE, ARRAY or SEQUENCE: what the last step names
    length: int  # ARRAY size, SEQUENCE bound (0: unbounded)

    @property
    def dim(self) -> int:
        last = self.steps[-1]
        if last.stop is not None:
            return last.stop - last.index
        if last.index is not None or self.node == BASE:
            return 1
        return self.length  # a whole fixed-size array

    # -- reading -----------------------------------------------------------------------------------
    def _parent(self, msg):
        obj = msg
        for s in self.steps[:-1]:
            obj = getattr(obj, s.name)
            if s.index is not None:
                if s.index >= len(obj):
                    raise MessageRejected("wrong_size", f"{self.text}: {s.name} has {len(obj)} entries, the path "
                                                        f"needs entry {s.index}")
                obj = obj[s.index]
        return obj

    def read(self, msg) -> np.ndarray:
        """The path's values as float64 (MessageRejected wrong_size when a sequence is too short)."""
        last = self.steps[-1]
        v = getattr(self._parent(msg), last.name)
        if self.node == BASE:
            return np.array([float(v)])
        arr = np.asarray(v)
        stop = last.stop if last.stop is not None else (last.index + 1 if last.index is not None else arr.size)
        if arr.size < stop:
            raise MessageRejected("wrong_size", f"{self.text}: {last.name} has {arr.size} values, the path needs "
                                                f"{stop}")
        return arr[last.index or 0 : stop].astype(np.float64)

    # -- writing -----------------------------------------------------------------------------------
    def _parent_for_write(self, types: MessageTypes, msg):
        obj = msg
        for s in self.steps[:-1]:
            obj = getattr(obj, s.name)
            if s.index is not None:
                while len(obj) <= s.index:  # a sequence of messages grows to hold the entry
                    obj.append(types.new(s.seq_type))
                obj = obj[s.index]
        return obj

    def write(self, types: MessageTypes, msg, values) -> None:
        """Set the path's fields of `msg` (a fresh message) from `values` (numbers, or a string / list
        for a constant). Integers are rounded and clamped to their type; bool is value >= 0.5."""
        parent = self._parent_for_write(types, msg)
        last = self.steps[-1]
        if self.base in STRINGS:
            if self.node == BASE:
                setattr(parent, last.name, str(values))
            else:
                setattr(parent, last.name, [str(x) for x in values])
            return
        dtype = NUMERIC[self.base]
        vals = _cast(np.atleast_1d(np.asarray(values, dtype=np.float64)), dtype)
        if self.node == BASE:
            v = vals[0]
            setattr(parent, last.name, bool(v) if dtype is np.bool_ else v.item())
            return
        if last.index is None:  # the whole array / sequence
            setattr(parent, last.name, vals)
            return
        stop = last.stop if last.stop is not None else last.index + 1
        arr = np.asarray(getattr(parent, last.name))
        if arr.size < stop:  # a sequence grows (zeros) to hold the slice
            grown = np.zeros(stop, dtype)
            grown[: arr.size] = arr
            arr = grown
        else:
            arr = arr.copy()
        arr[last.index : stop] = vals
        setattr(parent, last.name, arr)


def _cast(x: np.ndarray, dtype) -> np.ndarray:
    if dtype is np.bool_:
        return x >= 0.5
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return np.clip(np.rint(np.nan_to_num(x)), info.min, info.max).astype(dtype)
    return x.astype(dtype)


def compile_path(types: MessageTypes, typename: str, text: str, numeric: bool = True,
                 whole_sequence: bool = False) -> FieldPath:
    """Check `text` against `typename`'s definition; MessageTypeError saying what is wrong.

    numeric: the path must end at numbers (else strings are allowed too, for constants).
    whole_sequence: a variable-length sequence may be named without a slice (constants)."""
    types.check(typename)
    cur, steps = typename, []
    segs = text.split(".")
    for i, seg in enumerate(segs):
        m = _SEG.fullmatch(seg)
        if not m:
            raise MessageTypeError(f"{text!r}: {seg!r} is not a field name, name[i] or name[i:j]")
        name, idx, stop = m.group(1), m.group(2), m.group(3)
        idx = int(idx) if idx is not None else None
        stop = int(stop) if stop is not None else None
        where = ".".join([*segs[:i], name])
        fields = dict(types.fields(cur))
        if name not in fields:
            near = ", ".join(fields)
            raise MessageTypeError(f"{typename} has no field {where!r}" + (f" ({cur} has: {near})" if near else ""))
        node, desc = fields[name]
        last = i == len(segs) - 1
        if stop is not None and stop <= idx:
            raise MessageTypeError(f"{text!r}: empty slice [{idx}:{stop}]")
        if node == NAME:
            if idx is not None:
                raise MessageTypeError(f"{typename}.{where} is a {desc}, not an array: no [..] after it")
            if last:
                sub = ", ".join(f for f, _ in types.fields(desc))
                raise MessageTypeError(f"{typename}.{where} is a {desc}, not a number; name one of its fields "
                                       f"({sub})")
            cur = desc
            steps.append(Step(name))
        elif node == BASE:
            base = desc[0]
            if not last:
                raise MessageTypeError(f"{typename}.{where} is a {base}: nothing below it")
            if idx is not None:
                raise MessageTypeError(f"{typename}.{where} is a single {base}, not an array: no [..] after it")
            _check_base(typename, where, base, numeric)
            steps.append(Step(name))
            return FieldPath(text, tuple(steps), base, BASE, 0)
        else:  # ARRAY / SEQUENCE
            (inner_node, inner), n = desc
            kind = f"{'an array' if node == ARRAY else 'a sequence'} of {n or ''}{' ' if n else ''}"
            if node == ARRAY and idx is not None and (stop or idx + 1) > n:
                raise MessageTypeError(f"{typename}.{where} is {kind}entries: [{idx}{':' + str(stop) if stop else ''}]"
                                       " is out of range")
            if node == SEQUENCE and n and idx is not None and (stop or idx + 1) > n:
                raise MessageTypeError(f"{typename}.{where} holds at most {n} entries: [{idx}"
                                       f"{':' + str(stop) if stop else ''}] is out of range")
            if inner_node == NAME:
                if idx is None or stop is not None or last:
                    raise MessageTypeError(f"{typename}.{where} is {kind}{inner} messages: pick one with "
                                           f"{name}[i] and name a field below it, e.g. {name}[0].<field>")
                cur = inner
                steps.append(Step(name, idx, None, inner))
                continue
            base = inner[0]
            if not last:
                raise MessageTypeError(f"{typename}.{where} is {kind}{base}: nothing below it")
            _check_base(typename, where, base, numeric)
            if node == SEQUENCE and idx is None and not whole_sequence:
                raise MessageTypeError(f"{typename}.{where} is a sequence of {base} whose length varies: give the "
                                       f"entries, e.g. {name}[0:7] or {name}[0]")
            steps.append(Step(name, idx, stop))
            return FieldPath(text, tuple(steps), base, node, n)
    raise MessageTypeError(f"{text!r}: empty field path")  # pragma: no cover - split never yields nothing


def _check_base(typename: str, where: str, base: str, numeric: bool) -> None:
    if base in NUMERIC:
        return
    if base in STRINGS and not numeric:
        return
    raise MessageTypeError(f"{typename}.{where} is a {base}, not a number")


class FieldMapping:
    """A vector <-> one message type: entry i of the vector is the i-th value of the paths.

    Without paths the type must be a Float32/Float64MultiArray whose `data` is the vector.
    `constants` set other fields of every message built (e.g. header.frame_id, joint_names);
    `stamp` sets header.stamp (when the message has a std_msgs/Header `header`) to the send time."""

    def __init__(self, types: MessageTypes, typename: str, paths: list[str] | None, dim: int | None = None,
                 constants: dict[str, Any] | None = None, stamp: bool = True, label: str = ""):
        types.check(typename)
        self.types, self.typename, self.label = types, typename, label
        self.paths = [compile_path(types, typename, p) for p in paths] if paths else None
        if self.paths is None and typename not in MULTI_ARRAYS:
            raise MessageTypeError(f"{typename} is not a Float32/Float64MultiArray: name the message fields of "
                                   "the vector entries in `fields` (e.g. twist.linear.x or position[0:7])")
        self.dim = sum(p.dim for p in self.paths) if self.paths else dim
        self.constants = []
        for path, value in (constants or {}).items():
            fp = compile_path(types, typename, path, numeric=False, whole_sequence=True)
            self.constants.append((fp, _constant(typename, fp, value)))
        fields = dict(types.fields(typename))
        self.has_header = fields.get("header") == (NAME, "std_msgs/msg/Header")
        self.stamp = stamp and self.has_header

    def build(self, values: np.ndarray, stamp: int | None = None):
        """The message (rosbags object) holding `values`."""
        if self.paths is None:
            from robot_bridge.codec.arrays import array_msg

            msg = self.types.from_dataclass(array_msg(self.typename, values, self.label))
        else:
            msg = self.types.new(self.typename)
            for fp, value in self.constants:
                fp.write(self.types, msg, value)
            i = 0
            for fp in self.paths:
                fp.write(self.types, msg, values[i : i + fp.dim])
                i += fp.dim
        if self.stamp and stamp is not None:
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(stamp), 1_000_000_000)
        return msg

    def encode(self, values, stamp: int | None = None) -> bytes:
        return self.types.encode(self.build(np.asarray(values, np.float64), stamp), self.typename)

    def read(self, msg, finite: bool = True) -> tuple[int | None, np.ndarray]:
        """(header stamp or None, the vector as float32); MessageRejected wrong_size, and non_finite
        unless `finite` is False (the caller handles NaN itself, e.g. the action limiter)."""
        if self.paths is None:
            data = np.asarray(msg.data)
            if self.dim is not None and data.size != self.dim:
                raise MessageRejected("wrong_size", f"{data.size} values, profile says {self.dim}")
            out = data.astype(np.float32)
        else:
            out = np.concatenate([fp.read(msg) for fp in self.paths]).astype(np.float32)
        if finite and not np.isfinite(out).all():
            raise MessageRejected("non_finite", "NaN or inf values")
        stamp = stamp_ns(msg.header) if self.has_header else 0
        return (stamp or None), out

    def decode(self, raw, finite: bool = True) -> np.ndarray:
        """The vector in CDR bytes of this type (DecodeError / MessageRejected)."""
        return self.read(self.types.decode(raw, self.typename), finite)[1]


def _constant(typename: str, fp: FieldPath, value):
    """Check a constant's value against its field; returns it in the form FieldPath.write takes."""
    where = f"{typename}.{fp.text}"
    many = (fp.node != BASE and fp.steps[-1].index is None) or fp.steps[-1].stop is not None
    if many:
        if not isinstance(value, list):
            raise MessageTypeError(f"constant {where} is a list field: give a list, got {value!r}")
        items = value
        if fp.node == ARRAY and fp.steps[-1].index is None and len(items) != fp.length:
            raise MessageTypeError(f"constant {where} holds {fp.length} values, got {len(items)}")
        if fp.steps[-1].stop is not None and len(items) != fp.dim:
            raise MessageTypeError(f"constant {where} names {fp.dim} values, got {len(items)}")
    else:
        items = [value]
    for x in items:
        if fp.base in STRINGS:
            if not isinstance(x, str):
                raise MessageTypeError(f"constant {where} is a string field, got {x!r}")
        elif isinstance(x, str) or not isinstance(x, int | float | bool):
            raise MessageTypeError(f"constant {where} is a {fp.base} field, got {x!r}")
    return value
