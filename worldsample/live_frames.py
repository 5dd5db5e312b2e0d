"""The bridge's live frames: `RUN/live/<camera>.jpg`, the newest frame of each camera, rewritten a
few times a second (robot_bridge/live_frames.py) and served by the dashboard's robot panel.

Each file is one JPEG that carries its own stamp in a comment segment (COM, JSON:
`{"stamp_ns": ..., "written_ns": ...}`): the frame's header stamp and when it was written. One
file per camera, replaced atomically (temp + rename), so a reader sees a whole frame and the stamp
that belongs to it, never a torn pair.
"""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass

import numpy as np

_SOI, _COM, _SOS, _EOI = 0xD8, 0xFE, 0xDA, 0xD9
_STANDALONE = {0x01, _SOI, *range(0xD0, 0xD8)}  # markers without a length


@dataclass(frozen=True)
class LiveStamp:
    stamp_ns: int  # the frame's header stamp (the camera's time)
    written_ns: int  # when the bridge wrote it


def encode(frame: np.ndarray, stamp_ns: int, quality: int = 80, written_ns: int | None = None) -> bytes:
    """An (H, W, C) uint8 frame (C 1 or 3) -> JPEG bytes with its stamp in a comment."""
    from PIL import Image

    if frame.ndim == 3 and frame.shape[2] == 1:
        frame = frame[:, :, 0]
    meta = {"stamp_ns": int(stamp_ns), "written_ns": int(written_ns if written_ns is not None else time.time_ns())}
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(frame)).save(buf, "JPEG", quality=quality,
                                                      comment=json.dumps(meta).encode())
    return buf.getvalue()


def comment(data: bytes) -> bytes | None:
    """The first COM segment of a JPEG (read up to the image data), or None when there is none."""
    if data[:2] != b"\xff\xd8":
        return None
    i, n = 2, len(data)
    while i + 4 <= n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in _STANDALONE:
            i += 2
            continue
        if marker in (_SOS, _EOI):
            return None
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if length < 2 or i + 2 + length > n:
            return None
        if marker == _COM:
            return data[i + 4 : i + 2 + length]
        i += 2 + length
    return None


def read_stamp(data: bytes) -> LiveStamp | None:
    """The stamp a live frame carries, or None when it carries none (not written by the bridge)."""
    raw = comment(data)
    if raw is None:
        return None
    try:
        meta = json.loads(raw)
        stamp, written = meta["stamp_ns"], meta["written_ns"]
    except (ValueError, TypeError, KeyError):
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (stamp, written)):
        return None
    return LiveStamp(stamp, written)
