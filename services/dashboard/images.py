"""Frames to bytes: single JPEG/PNG images, contact sheets, and an MJPEG stream."""

from __future__ import annotations

import io
import math
from collections.abc import AsyncIterator, Callable

import anyio
import numpy as np
from PIL import Image

MEDIA = {"jpeg": "image/jpeg", "png": "image/png"}
BOUNDARY = "wsframe"


def encode(frame: np.ndarray, fmt: str, quality: int = 85) -> bytes:
    if frame.ndim == 3 and frame.shape[2] == 1:
        frame = frame[:, :, 0]
    buf = io.BytesIO()
    img = Image.fromarray(np.ascontiguousarray(frame))
    if fmt == "jpeg":
        img.save(buf, "JPEG", quality=quality)
    else:
        img.save(buf, "PNG", compress_level=1)  # speed over size: frames are small
    return buf.getvalue()


MAX_SIDE = 65000  # JPEG images are at most 65535 px on a side


def sheet_layout(count: int, height: int, width: int, cols: int | None) -> int:
    """Columns of a contact sheet: as asked, else about 2048 px wide; raises ValueError when
    the sheet cannot fit in a JPEG."""
    if cols is None:
        cols = max(1, 2048 // max(1, width))
    cols = max(1, min(cols, count, MAX_SIDE // width))
    rows = math.ceil(count / cols)
    if rows * height > MAX_SIDE:
        cols = math.ceil(count / (MAX_SIDE // height))
        if cols * width > MAX_SIDE:
            raise ValueError(f"{count} frames of {height}x{width} do not fit in one JPEG; ask for fewer")
    return cols


def contact_sheet(frames: np.ndarray, cols: int) -> np.ndarray:
    """Tile (N, H, W, C) frames row-major into one (rows*H, cols*W, C) image."""
    n, h, w, c = frames.shape
    rows = math.ceil(n / cols)
    pad = rows * cols - n
    if pad:
        frames = np.concatenate([frames, np.zeros((pad, h, w, c), frames.dtype)])
    return frames.reshape(rows, cols, h, w, c).transpose(0, 2, 1, 3, 4).reshape(rows * h, cols * w, c)


async def mjpeg(
    frame_bytes: Callable[[int], bytes],
    cached: Callable[[int], bytes | None],
    start: int,
    stop: int,
    fps: float,
    loop: bool,
) -> AsyncIterator[bytes]:
    """multipart/x-mixed-replace parts, one JPEG each, paced at `fps` (played once unless `loop`).
    `cached(t)` answers from memory without blocking; `frame_bytes(t)` may decode (in a thread)."""
    period = 1.0 / fps
    nxt = anyio.current_time()
    while True:
        for t in range(start, stop):
            data = cached(t)
            if data is None:
                data = await anyio.to_thread.run_sync(frame_bytes, t)
            head = f"--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {len(data)}\r\nX-Step: {t}\r\n\r\n"
            yield head.encode() + data + b"\r\n"
            nxt += period
            await anyio.sleep(max(0.0, nxt - anyio.current_time()))
        if not loop:
            break
    yield f"--{BOUNDARY}--\r\n".encode()
