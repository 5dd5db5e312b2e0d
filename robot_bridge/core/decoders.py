"""Decoded ROS messages -> observation arrays, with the checks that keep bad data out.

Each function returns `(stamp_ns or None, array)` or raises MessageRejected with a short reason
(`wrong_encoding`, `wrong_size`, `non_finite`, `missing_joint`) that becomes a per-topic counter.
A zero header stamp means "not stamped": the caller uses the receive time instead.
"""

from __future__ import annotations

import io

import numpy as np

from robot_bridge.codec import CompressedImage, Image, JointState
from robot_bridge.errors import MessageRejected

# encoding -> (channels on the wire, channel order to get RGB, or None for mono)
_RAW = {
    "rgb8": (3, [0, 1, 2]),
    "bgr8": (3, [2, 1, 0]),
    "rgba8": (4, [0, 1, 2]),
    "bgra8": (4, [2, 1, 0]),
    "mono8": (1, None),
}


def _stamp(header) -> int | None:
    ns = header.stamp.to_ns()
    return ns or None


def _to_channels(img: np.ndarray, wire_order, channels: int, what: str) -> np.ndarray:
    if wire_order is None:  # mono
        return img if channels == 1 else np.repeat(img, 3, axis=2)
    if channels == 1:
        raise MessageRejected("wrong_encoding", f"{what}: colour image for a mono camera")
    return img[:, :, wire_order]


def image_array(msg: Image, height: int, width: int, channels: int) -> tuple[int | None, np.ndarray]:
    if msg.encoding not in _RAW:
        raise MessageRejected("wrong_encoding", f"encoding {msg.encoding!r} (supported: {', '.join(_RAW)})")
    if (msg.height, msg.width) != (height, width):
        raise MessageRejected("wrong_size", f"{msg.width}x{msg.height}, profile says {width}x{height}")
    wire_ch, order = _RAW[msg.encoding]
    row = width * wire_ch
    if msg.step < row or msg.data.size != msg.step * height:
        raise MessageRejected(
            "wrong_size", f"step {msg.step} and {msg.data.size} bytes do not hold {width}x{height} {msg.encoding}"
        )
    img = msg.data.reshape(height, msg.step)[:, :row].reshape(height, width, wire_ch)
    return _stamp(msg.header), np.ascontiguousarray(_to_channels(img, order, channels, msg.encoding))


def compressed_array(msg: CompressedImage, height: int, width: int, channels: int) -> tuple[int | None, np.ndarray]:
    from PIL import Image as PILImage

    fmt = msg.format.split(";")[0].strip().lower()
    if fmt not in ("jpeg", "jpg", "png", "rgb8", "bgr8", "mono8"):
        raise MessageRejected("wrong_encoding", f"compressed format {msg.format!r} (supported: jpeg, png)")
    try:
        with PILImage.open(io.BytesIO(msg.data.tobytes())) as im:
            im = im.convert("L" if channels == 1 else "RGB")
            img = np.asarray(im)
    except (OSError, ValueError, PILImage.DecompressionBombError) as e:
        raise MessageRejected("undecodable_image", str(e)) from None
    if img.shape[:2] != (height, width):
        raise MessageRejected("wrong_size", f"{img.shape[1]}x{img.shape[0]}, profile says {width}x{height}")
    return _stamp(msg.header), img.reshape(height, width, channels)


def joint_array(msg: JointState, names: list[str], fields: list[str]) -> tuple[int | None, np.ndarray]:
    index = {n: i for i, n in enumerate(msg.name)}
    missing = [n for n in names if n not in index]
    if missing:
        raise MessageRejected("missing_joint", f"joints {missing} not in {msg.name}")
    parts = []
    for f in fields:
        values = getattr(msg, f)
        if values.size != len(msg.name):
            raise MessageRejected("wrong_size", f"{f} has {values.size} values for {len(msg.name)} names")
        parts.append(values[[index[n] for n in names]])
    out = np.concatenate(parts).astype(np.float32)
    if not np.isfinite(out).all():
        raise MessageRejected("non_finite", "NaN or inf joint values")
    return _stamp(msg.header), out


def vector_array(msg, dim: int) -> tuple[None, np.ndarray]:
    if msg.data.size != dim:
        raise MessageRejected("wrong_size", f"{msg.data.size} values, profile says {dim}")
    out = msg.data.astype(np.float32)
    if not np.isfinite(out).all():
        raise MessageRejected("non_finite", "NaN or inf values")
    return None, out


def wrench_array(msg) -> tuple[int | None, np.ndarray]:
    f, t = msg.wrench.force, msg.wrench.torque
    out = np.array([f.x, f.y, f.z, t.x, t.y, t.z], dtype=np.float32)
    if not np.isfinite(out).all():
        raise MessageRejected("non_finite", "NaN or inf wrench")
    return _stamp(msg.header), out
