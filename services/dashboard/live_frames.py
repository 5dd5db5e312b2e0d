"""The bridge's live frames (RUN/live/<camera>.jpg, worldsample/live_frames.py) for the robot panel:
the listing with each frame's stamp and age, and one frame's bytes.

A frame whose stamp is older than `settings.live_frame_stale_s` (or that carries no stamp) is
served, flagged stale with its age. Files are read with `artifacts.read_under` (one level at a time
with O_NOFOLLOW): a linked `live/` folder or frame is refused, not followed.
"""

from __future__ import annotations

import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from services.dashboard.artifacts import Refused, read_under
from services.dashboard.errors import NotFound
from worldsample import live_frames
from worldsample.paths import LIVE_FRAME_SUFFIX, RunFiles

MAX_FRAME_BYTES = 16 << 20
MAX_CAMERAS = 64
FILE_RE = re.compile(r"^([A-Za-z0-9_-]{1,64})" + re.escape(LIVE_FRAME_SUFFIX) + "$")
LIVE_DIR = RunFiles.of(".").live_frames.name


class LiveFrameView(BaseModel):
    camera: str
    stamp_ns: int | None = Field(description="the frame's header stamp; null when the file carries none")
    written_ns: int | None = Field(description="when the bridge wrote it")
    age_s: float | None = Field(description="now - stamp, on this server's clock")
    stale: bool = Field(description="older than stale_after_s, or without a stamp")
    size_bytes: int
    error: str | None = Field(None, description="why this frame is not served (then the other fields are empty)")


class LiveFramesView(BaseModel):
    stale_after_s: float
    cameras: list[LiveFrameView]
    error: str | None = Field(None, description="why RUN/live/ is not listed (a symbolic link, not a folder)")


@dataclass(frozen=True)
class LiveFrame:
    camera: str
    data: bytes
    stamp: live_frames.LiveStamp | None
    age_s: float | None
    stale: bool


def _frame(run_dir: Path, camera: str, stale_after_s: float) -> LiveFrame:
    data = read_under(run_dir, (LIVE_DIR, camera + LIVE_FRAME_SUFFIX), MAX_FRAME_BYTES)
    stamp = live_frames.read_stamp(data)
    age = round((time.time_ns() - stamp.stamp_ns) / 1e9, 3) if stamp is not None else None
    return LiveFrame(camera, data, stamp, age, age is None or age > stale_after_s)


def read_frame(run_dir: Path, camera: str, stale_after_s: float) -> LiveFrame:
    """One camera's live frame; NotFound when there is none, Refused for a symbolic link."""
    try:
        return _frame(run_dir, camera, stale_after_s)
    except (FileNotFoundError, NotADirectoryError):
        raise NotFound(f"no live frame of camera {camera!r}: the bridge has written none to RUN/{LIVE_DIR}/ "
                       "(live_frames_hz in its robot profile)") from None


def listing(run_dir: Path, stale_after_s: float) -> LiveFramesView:
    out = LiveFramesView(stale_after_s=stale_after_s, cameras=[])
    where = RunFiles.of(run_dir).live_frames
    try:
        st = os.lstat(where)
    except OSError:
        return out  # no live frames yet
    if not stat.S_ISDIR(st.st_mode):
        what = "a symbolic link: not followed" if stat.S_ISLNK(st.st_mode) else "not a folder"
        out.error = f"RUN/{LIVE_DIR} is {what}"
        return out
    with os.scandir(where) as it:
        names = sorted(e.name for e in it if FILE_RE.match(e.name) and not e.is_symlink())
    for name in names[:MAX_CAMERAS]:
        camera = FILE_RE.match(name).group(1)
        try:
            f = _frame(run_dir, camera, stale_after_s)
        except (Refused, OSError) as e:
            if isinstance(e, FileNotFoundError):  # replaced or removed since the listing
                continue
            why = str(e) if isinstance(e, Refused) else f"cannot read it: {e.strerror or e}"
            out.cameras.append(LiveFrameView(camera=camera, stamp_ns=None, written_ns=None, age_s=None, stale=True,
                                             size_bytes=0, error=why))
            continue
        s = f.stamp
        out.cameras.append(LiveFrameView(camera=camera, stamp_ns=s and s.stamp_ns, written_ns=s and s.written_ns,
                                         age_s=f.age_s, stale=f.stale, size_bytes=len(f.data)))
    return out
