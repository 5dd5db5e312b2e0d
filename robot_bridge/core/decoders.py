"""Decoded ROS messages -> observation arrays, with the checks that keep bad data out.

Each function returns `(stamp_ns or None, array)` or raises MessageRejected with a short reason
(`wrong_encoding`, `wrong_size`, `non_finite`, `missing_joint`) that becomes a per-topic counter.
A zero header stamp means "not stamped": the caller uses the receive time instead.
"""

from __future__ import annotations

import io

import numpy as np

from robot_bridge.codec import CompressedImage, Image, JointState, stamp_ns
from robot_bridge.errors import MessageRejected
from worldsample.frames import FrameGeometry

# encoding -> (channels on the wire, channel order to get RGB, or None for mono)
_RAW = {
    "rgb8": (3, [0, 1, 2]),
    "bgr8": (3, [2, 1, 0]),
    "rgba8": (4, [0, 1, 2]),
    "bgra8": (4, [2, 1, 0]),
    "mono8": (1, None),
}


def _stamp(header) -> int | None:
    return stamp_ns(header) or None


def _to_channels(img: np.ndarray, wire_order, channels: int, what: str) -> np.ndarray:
    """A view of the wire pixels in RGB order (alpha dropped), or the mono pixels as they are."""
    if wire_order is None:  # mono
        return img
    if channels == 1:
        raise MessageRejected("wrong_encoding", f"{what}: colour image for a mono camera")
    return img[:, :, 2::-1] if wire_order[0] == 2 else img[:, :, :3]


def _size_rejected(w: int, h: int, height: int, width: int, geometry: FrameGeometry | None) -> MessageRejected:
    said = f"{width}x{height}"
    if geometry is not None and not geometry.is_identity:
        said = f"native {said} (stored as {geometry.output[1]}x{geometry.output[0]})"
    return MessageRejected("wrong_size", f"{w}x{h}, profile says {said}")


def _stored(img: np.ndarray, channels: int, geometry: FrameGeometry | None) -> np.ndarray:
    """The decoded native frame (a view) -> the stored frame: crop and resize (per channel, so before
    the mono -> RGB copy), then a contiguous array of its own."""
    if geometry is None or geometry.is_identity:
        out = np.array(img, order="C")  # a copy: the stored frame does not hold on to the message
    else:
        out = geometry.apply(img)
    if out.ndim == 2:
        out = out[:, :, None]
    if out.shape[2] != channels:  # a mono frame for an RGB camera
        out = np.repeat(out, channels, axis=2)
    return out


def image_array(msg: Image, height: int, width: int, channels: int,
                geometry: FrameGeometry | None = None) -> tuple[int | None, np.ndarray]:
    """A raw image of `height` x `width` (the camera's native size) -> the stored frame: `geometry`
    (worldsample.frames) crops and resizes it; without one the frame is stored as it comes."""
    if msg.encoding not in _RAW:
        raise MessageRejected("wrong_encoding", f"encoding {msg.encoding!r} (supported: {', '.join(_RAW)})")
    if (msg.height, msg.width) != (height, width):
        raise _size_rejected(msg.width, msg.height, height, width, geometry)
    wire_ch, order = _RAW[msg.encoding]
    row = width * wire_ch
    if msg.step < row or msg.data.size != msg.step * height:
        raise MessageRejected(
            "wrong_size", f"step {msg.step} and {msg.data.size} bytes do not hold {width}x{height} {msg.encoding}"
        )
    img = msg.data.reshape(height, msg.step)[:, :row].reshape(height, width, wire_ch)
    return _stamp(msg.header), _stored(_to_channels(img, order, channels, msg.encoding), channels, geometry)


def compressed_array(msg: CompressedImage, height: int, width: int, channels: int,
                     geometry: FrameGeometry | None = None) -> tuple[int | None, np.ndarray]:
    """A jpeg/png image of `height` x `width` once decoded -> the stored frame (as image_array)."""
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
        raise _size_rejected(img.shape[1], img.shape[0], height, width, geometry)
    return _stamp(msg.header), _stored(img, channels, geometry)


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


def wrench_array(msg) -> tuple[int | None, np.ndarray]:
    f, t = msg.wrench.force, msg.wrench.torque
    out = np.array([f.x, f.y, f.z, t.x, t.y, t.z], dtype=np.float32)
    if not np.isfinite(out).all():
        raise MessageRejected("non_finite", "NaN or inf wrench")
    return _stamp(msg.header), out
