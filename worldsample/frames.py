"""Camera frame geometry: the frame a camera publishes -> a crop box -> an area-averaged resize -> the
frame the store keeps and the policy sees.

`FrameGeometry.apply` is the one function every path uses to turn a camera frame into a stored
frame: the bridge's decoders (raw `Image` and `CompressedImage`) and bag import (through the same
decoders). The simulated arm (`worldsample sim-robot`) publishes each camera at its native size, as
a real camera does, so its frames take the same path. numpy only.

The resize is exact area averaging (what OpenCV calls INTER_AREA): each output pixel is the mean of
the native pixels under it, fractional pixels at its edges weighted by the part it covers. It is
anti-aliased on downscales, deterministic (integer sums, then fixed float32 steps), and uint8 in
and out, rounded half up. The aspect ratio may change (a 640x480 frame straight to 64x64 squeezes
the picture horizontally); a crop box with the output's aspect ratio avoids that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np


class FrameSizeError(ValueError):
    """A frame whose size is not the native size of its geometry."""


@dataclass(frozen=True)
class CropBox:
    """A box in native pixels: rows top..top+height, columns left..left+width."""

    top: int
    left: int
    height: int
    width: int


@dataclass(frozen=True)
class FrameGeometry:
    """native (height, width) -> optional crop box -> output (height, width).

    Raises ValueError on construction when a size is not positive or the box is not inside the
    native frame, so a bad camera config fails where it is loaded, not at the first frame.
    """

    native: tuple[int, int]
    output: tuple[int, int]
    crop: CropBox | None = None

    def __post_init__(self) -> None:
        for what, (h, w) in (("native", self.native), ("output", self.output)):
            if not (_is_int(h) and _is_int(w) and h > 0 and w > 0):
                raise ValueError(f"{what} size must be positive whole pixels, got height {h}, width {w}")
        c = self.crop
        if c is None:
            return
        if not all(_is_int(v) for v in (c.top, c.left, c.height, c.width)):
            raise ValueError(f"crop box must be whole pixels, got {c}")
        if c.height <= 0 or c.width <= 0:
            raise ValueError(f"crop box height and width must be positive, got height {c.height}, width {c.width}")
        if c.top < 0 or c.left < 0:
            raise ValueError(f"crop box top and left must be >= 0, got top {c.top}, left {c.left}")
        nh, nw = self.native
        if c.top + c.height > nh or c.left + c.width > nw:
            raise ValueError(
                f"crop box rows {c.top}..{c.top + c.height} x columns {c.left}..{c.left + c.width} leaves the "
                f"native {nw}x{nh} frame (rows 0..{nh}, columns 0..{nw})"
            )

    @classmethod
    def identity(cls, height: int, width: int) -> FrameGeometry:
        return cls((height, width), (height, width))

    @property
    def box(self) -> CropBox:
        """The crop box, or the whole native frame."""
        return self.crop or CropBox(0, 0, *self.native)

    @property
    def is_identity(self) -> bool:
        b = self.box
        return (b.top, b.left, b.height, b.width) == (0, 0, *self.native) and self.output == self.native

    @property
    def aspect_change(self) -> float:
        """Output aspect ratio / crop box aspect ratio (1.0: no distortion; > 1: stretched wide)."""
        b = self.box
        return (self.output[1] / self.output[0]) / (b.width / b.height)

    def describe(self) -> str:
        """e.g. '640x480 -> crop 480x480 at (80, 0) -> 64x64' (sizes as width x height, box at (left, top))."""
        parts = [f"{self.native[1]}x{self.native[0]}"]
        b = self.box
        if self.crop is not None and (b.height, b.width) != self.native:
            parts.append(f"crop {b.width}x{b.height} at ({b.left}, {b.top})")
        if self.output != (b.height, b.width):
            parts.append(f"{self.output[1]}x{self.output[0]}")
        s = " -> ".join(parts)
        if abs(self.aspect_change - 1) > 0.01:
            s += f" (aspect ratio x{self.aspect_change:.2f})"
        return s

    def check(self, frame: np.ndarray) -> None:
        if frame.ndim not in (2, 3):
            raise FrameSizeError(f"a frame is HxW or HxWxC, got shape {frame.shape}")
        if frame.shape[:2] != self.native:
            h, w = frame.shape[:2]
            raise FrameSizeError(f"{w}x{h} frame, native size is {self.native[1]}x{self.native[0]}")

    def apply(self, frame: np.ndarray) -> np.ndarray:
        """A native uint8 frame (HxW or HxWxC) -> the output frame (same layout, uint8, C-contiguous).

        The identity geometry returns `frame` itself, any other a new array. Raises FrameSizeError for
        a frame whose size is not the native size and ValueError for a frame that is not uint8."""
        self.check(frame)
        if frame.dtype != np.uint8:
            raise ValueError(f"frames are uint8, got {frame.dtype}")
        if self.is_identity:
            return frame
        b = self.box
        view = frame[b.top : b.top + b.height, b.left : b.left + b.width]
        return area_resize(view, *self.output)

    def to_output(self, y: float, x: float) -> tuple[float, float]:
        """Continuous native pixel coordinates (0 = the top/left edge) -> output coordinates."""
        b = self.box
        return (y - b.top) * self.output[0] / b.height, (x - b.left) * self.output[1] / b.width


def _is_int(v) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool)


# -- area resize ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _AxisPlan:
    """How n native pixels along one axis become m output pixels.

    Output j covers native [j*n/m, (j+1)*n/m). Weights are whole multiples of 1/q (q = m/g,
    g = gcd(n, m)), so the big pass sums exact integers in units of 1/q: a pixel wholly inside
    weighs q. The first k such pixels of each output are `full` (k is the same for every output),
    the one more some outputs have is `extra` (where `has_extra`). At most two pixels are cut by
    the output's edges (`left`/`right`, weighted by the part covered; 0 when there is none). The
    pattern repeats every p = n/g native and q output pixels: `period` is that q x p block of
    weights (in pixels)."""

    n: int
    m: int
    q: int
    full: np.ndarray  # (m, k) indices of whole pixels under each output
    extra: np.ndarray  # (m,) index of one more whole pixel, where has_extra
    has_extra: np.ndarray  # (m,) bool
    left: np.ndarray
    left_q: np.ndarray  # (m,) int weight in units of 1/q
    right: np.ndarray
    right_q: np.ndarray
    period: np.ndarray  # (q, p) float32 weights of one period, in pixels

    @property
    def p(self) -> int:
        return self.n * self.q // self.m


@lru_cache(maxsize=256)
def _plan(n: int, m: int) -> _AxisPlan:
    g = math.gcd(n, m)
    # boundaries in units of 1/m pixel are exact integers; weights in units of 1/q are those / g
    runs, left, left_q, right, right_q = [], [], [], [], []
    for j in range(m):
        a, b = j * n, (j + 1) * n  # output j covers native [a/m, b/m)
        first_full, end_full = -(-a // m), b // m  # ceil(a/m), floor(b/m)
        runs.append(range(first_full, max(first_full, end_full)))
        if first_full > end_full:  # inside one native pixel (upscaling)
            left.append(a // m), left_q.append((b - a) // g)
            right.append(0), right_q.append(0)
            continue
        left.append(a // m if a % m else 0), left_q.append((first_full * m - a) // g)
        right.append(end_full if b % m else 0), right_q.append((b - end_full * m) // g)
    k = min(len(r) for r in runs)  # run lengths differ by at most one
    full = np.asarray([list(r)[:k] for r in runs], np.intp).reshape(m, k)
    has_extra = np.asarray([len(r) > k for r in runs])
    extra = np.asarray([r[-1] if len(r) > k else 0 for r in runs], np.intp)
    q = m // g
    period = np.zeros((q, n // g), np.float32)
    for j in range(q):
        period[j, list(runs[j])] = 1
        for idx, w in ((left, left_q), (right, right_q)):
            if w[j]:
                period[j, idx[j]] += w[j] / q
    return _AxisPlan(n, m, q, full, extra, has_extra, np.asarray(left, np.intp), np.asarray(left_q, np.int64),
                     np.asarray(right, np.intp), np.asarray(right_q, np.int64), period)


def _reduce_rows(x: np.ndarray, p: _AxisPlan) -> np.ndarray:
    """q times the sums of the native rows under each output row, as exact integers (then float32).

    Gathers whole rows (contiguous runs of uint8) and adds them in uint16 (uint32 for long runs):
    this pass reads every native pixel, so it stays in narrow integers."""
    acc = np.uint16 if p.p * 255 < 2**16 else np.uint32
    k = p.full.shape[1]
    if p.n % p.m == 0:  # q = 1, no cut pixels
        return x.reshape(p.m, k, *x.shape[1:]).sum(axis=1, dtype=acc).astype(np.float32)
    out = x[p.full].sum(axis=1, dtype=acc) if k else np.zeros((p.m, *x.shape[1:]), acc)
    if p.has_extra.any():
        _add_rows(out, x, p.extra, p.has_extra.astype(np.int64))
    out *= acc(p.q)
    _add_rows(out, x, p.left, p.left_q)
    _add_rows(out, x, p.right, p.right_q)
    return out.astype(np.float32)


def _add_rows(out: np.ndarray, x: np.ndarray, idx: np.ndarray, w: np.ndarray) -> None:
    """out[j] += w[j] * x[idx[j]] for every j with w[j] > 0, in out's integer type."""
    sel = w > 0
    if not sel.any():
        return
    rows = x[idx[sel]]
    if (w[sel] != 1).any():
        rows = np.multiply(rows, w[sel].astype(out.dtype).reshape((-1,) + (1,) * (x.ndim - 1)), dtype=out.dtype)
    if sel.all():
        out += rows
    else:
        out[sel] += rows


_BLOCK_MAX = 1 << 20  # entries (4 MiB) of the column pass's block matrix; larger ones go tap by tap (slower)


@lru_cache(maxsize=256)
def _block(n: int, m: int, channels: int) -> np.ndarray:
    """(p * channels, q * channels): one period's weights, each channel to itself."""
    return np.kron(_plan(n, m).period.T, np.eye(channels, dtype=np.float32))


def _reduce_cols(y: np.ndarray, p: _AxisPlan) -> np.ndarray:
    """The same along the columns of the row-reduced float32 array (rows x n x channels).

    One matrix product when the period is small: every q output columns take the same weights
    from p native columns, so (rows * m/q, p * channels) @ (p * channels, q * channels) does all
    of them. Otherwise one gather per tap."""
    rows, c = y.shape[0], (y.shape[2] if y.ndim == 3 else 1)
    q, pn = p.period.shape
    if (pn * c) * (q * c) <= _BLOCK_MAX:
        out = np.ascontiguousarray(y).reshape(rows * (p.m // q), pn * c) @ _block(p.n, p.m, c)
        return out.reshape((rows, p.m) + y.shape[2:])
    out = np.zeros((rows, p.m, *y.shape[2:]), np.float32)
    for t in range(p.full.shape[1]):
        out += y[:, p.full[:, t]]
    if p.has_extra.any():
        out[:, p.has_extra] += y[:, p.extra[p.has_extra]]
    out *= np.float32(p.q)
    shape = (1, p.m) + (1,) * (y.ndim - 2)
    for idx, w in ((p.left, p.left_q), (p.right, p.right_q)):
        if w.any():
            out += w.astype(np.float32).reshape(shape) * y[:, idx]
    return out / np.float32(p.q)


def area_resize(frame: np.ndarray, height: int, width: int) -> np.ndarray:
    """Area-averaged resize of a uint8 HxW or HxWxC frame (any strides) to height x width, uint8."""
    if frame.dtype != np.uint8:
        raise ValueError(f"frames are uint8, got {frame.dtype}")
    h, w = frame.shape[:2]
    if (h, w) == (height, width):
        return np.array(frame, order="C")
    rows, cols = _plan(h, height), _plan(w, width)
    z = _reduce_cols(_reduce_rows(frame, rows), cols)  # rows first: the big pass, on uint8
    z *= np.float32(1 / rows.p * width / w)  # the row sums are in units of 1/q: q * n/m = p per output row
    z += np.float32(0.5)
    np.minimum(z, np.float32(255), out=z)
    return z.astype(np.uint8)
