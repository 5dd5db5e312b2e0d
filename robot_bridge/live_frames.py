"""The bridge's live frames: the newest frame of each camera, written to RUN/live/<camera>.jpg at a
low rate (the profile's `live_frames_hz`) for the dashboard's robot panel (worldsample/live_frames.py
has the format).

It runs in its own thread: the control loop never waits for it. Each pass takes every camera
input's newest decoded sample (the stored frame, after crop and resize) and, when its stamp is new,
encodes it as JPEG and replaces the file atomically. A camera that stops delivering leaves its last
frame, whose stamp then ages: the dashboard calls it stale.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from worldsample import live_frames
from worldsample.atomic import atomic_write_bytes
from worldsample.paths import RunFiles

log = logging.getLogger(__name__)
CAMERA_PREFIX = "image_"


class LiveFrameWriter:
    def __init__(self, run_dir: Path, inputs: dict, rate_hz: float, quality: int = 80):
        self.files = RunFiles.of(run_dir)
        self.cameras = {k.removeprefix(CAMERA_PREFIX): inp for k, inp in inputs.items() if k.startswith(CAMERA_PREFIX)}
        self.period_s = 1.0 / rate_hz
        self.quality = quality
        self._written: dict[str, int] = {}  # camera -> stamp of the frame in its file
        self.writes = 0
        self._thread: threading.Thread | None = None

    def write_once(self) -> int:
        """Write each camera's newest frame whose stamp is new; returns how many were written."""
        n = 0
        for camera, inp in self.cameras.items():
            s = inp.buffer.latest()
            if s is None or self._written.get(camera) == s.stamp_ns:
                continue
            data = live_frames.encode(s.value, s.stamp_ns, self.quality, written_ns=time.time_ns())
            atomic_write_bytes(self.files.live_frame(camera), data)
            self._written[camera] = s.stamp_ns
            n += 1
        self.writes += n
        return n

    def start(self, stop: threading.Event) -> None:
        if not self.cameras:
            return

        def loop() -> None:
            failing = False
            while not stop.is_set():
                try:
                    self.write_once()
                    failing = False
                except Exception:  # a full disk must not take the bridge down; said once until it works again
                    if not failing:
                        log.exception("writing the live frames to %s failed; retrying", self.files.live_frames)
                    failing = True
                stop.wait(self.period_s)

        self._thread = threading.Thread(target=loop, name="live-frames", daemon=True)
        self._thread.start()
