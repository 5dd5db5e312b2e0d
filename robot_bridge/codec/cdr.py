"""Plain CDR (XCDR1, the encoding ROS 2 uses) reader and writer.

Buffers carry the 4-byte encapsulation header (0x00 0x01 = little endian, 0x00 0x00 = big
endian); alignment is relative to the byte after it. Numeric sequences go through numpy, so a
640x480 image costs one memory copy, not a Python loop.
"""

from __future__ import annotations

import struct

import numpy as np

from robot_bridge.errors import DecodeError

HEADER_LE = b"\x00\x01\x00\x00"

# CDR primitive name -> (struct code, size); bool is one octet.
PRIMITIVES: dict[str, tuple[str, int]] = {
    "bool": ("?", 1),
    "int8": ("b", 1),
    "uint8": ("B", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "uint32": ("I", 4),
    "int64": ("q", 8),
    "uint64": ("Q", 8),
    "float32": ("f", 4),
    "float64": ("d", 8),
}
NUMPY = {name: np.dtype(code) for name, (code, _) in PRIMITIVES.items()}


class CdrWriter:
    """Always writes little endian."""

    def __init__(self) -> None:
        self.buf = bytearray(HEADER_LE)

    def align(self, n: int) -> None:
        pad = -(len(self.buf) - 4) % n
        if pad:
            self.buf += b"\x00" * pad

    def primitive(self, kind: str, value) -> None:
        code, size = PRIMITIVES[kind]
        self.align(size)
        try:
            self.buf += struct.pack("<" + code, value)
        except struct.error as e:
            raise ValueError(f"{value!r} does not fit CDR {kind}: {e}") from None

    def string(self, value: str) -> None:
        data = value.encode("utf-8")
        self.primitive("uint32", len(data) + 1)
        self.buf += data + b"\x00"

    def array(self, kind: str, values) -> None:
        arr = np.ascontiguousarray(values, dtype=NUMPY[kind].newbyteorder("<"))
        if arr.ndim != 1:
            arr = arr.reshape(-1)
        self.primitive("uint32", arr.size)
        if arr.size:
            self.align(PRIMITIVES[kind][1])
            self.buf += arr.tobytes() if kind != "uint8" else memoryview(arr).cast("B")

    def bytes(self) -> bytes:
        return bytes(self.buf)


class CdrReader:
    def __init__(self, raw: bytes | bytearray | memoryview) -> None:
        self.raw = bytes(raw) if not isinstance(raw, bytes) else raw
        if len(self.raw) < 4 or self.raw[0] != 0 or self.raw[1] not in (0, 1):
            raise DecodeError(f"not a plain CDR buffer (encapsulation header {self.raw[:4]!r})")
        self.end = "<" if self.raw[1] == 1 else ">"
        self.pos = 4

    def _need(self, n: int) -> None:
        if self.pos + n > len(self.raw):
            raise DecodeError(f"message truncated: needs {n} byte(s) at offset {self.pos}, has {len(self.raw)}")

    def align(self, n: int) -> None:
        self.pos += -(self.pos - 4) % n

    def primitive(self, kind: str):
        code, size = PRIMITIVES[kind]
        self.align(size)
        self._need(size)
        (v,) = struct.unpack_from(self.end + code, self.raw, self.pos)
        self.pos += size
        return v

    def count(self, item_size: int) -> int:
        n = self.primitive("uint32")
        if n * item_size > len(self.raw) - self.pos:
            raise DecodeError(f"sequence of {n} items at offset {self.pos} runs past the message end")
        return n

    def string(self) -> str:
        n = self.count(1)
        if n == 0:
            raise DecodeError("string without its terminating NUL")
        data = self.raw[self.pos : self.pos + n - 1]
        self.pos += n
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"string is not UTF-8: {e}") from None

    def array(self, kind: str) -> np.ndarray:
        size = PRIMITIVES[kind][1]
        n = self.count(size)
        if n:
            self.align(size)
            self._need(n * size)
        arr = np.frombuffer(self.raw, dtype=NUMPY[kind].newbyteorder(self.end), count=n, offset=self.pos)
        self.pos += n * size
        return arr if self.end == "<" or size == 1 else arr.astype(NUMPY[kind])
