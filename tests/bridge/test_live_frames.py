"""The bridge writes its newest frame per camera to RUN/live/<camera>.jpg (robot_bridge/live_frames.py)
at the profile's low rate, off the control loop, atomically, as JPEG carrying its stamp."""

from __future__ import annotations

import io
import threading
import time

import numpy as np
from PIL import Image

from robot_bridge.core.streams import Sample, StreamBuffer
from robot_bridge.live_frames import LiveFrameWriter
from tests.bridge.helpers import Rig, small_profile
from worldsample import live_frames
from worldsample.paths import RunFiles
from worldsample.runlog import StatusFile


def test_the_bridge_writes_fresh_live_frames_over_dds(tmp_path):
    """The real bridge against the simulated arm (32x32 camera `corner` at 20 Hz, live frames at 2 Hz):
    the file appears, its stamp is fresh and moves on about twice a second, and it decodes."""
    run = tmp_path / "run"
    path = RunFiles.of(run).live_frame("corner")
    with Rig(tmp_path, small_profile(tmp_path), run) as rig:
        rig.op.wait_ready()
        deadline = time.monotonic() + 20
        while not path.exists():
            assert time.monotonic() < deadline, "no live frame written"
            time.sleep(0.05)
        camera_before = rig.op.status["topics"]["image_corner"]["accepted"]
        stamps: list[int] = []
        deadline = time.monotonic() + 30
        while len(stamps) < 4:  # wait for the stamp to move on three times while the camera publishes
            assert time.monotonic() < deadline, f"the live frame's stamp moved on {len(stamps) - 1} times in 30 s"
            data = path.read_bytes()  # replaced atomically: always a whole frame
            st = live_frames.read_stamp(data)
            assert st is not None, "a live frame without its stamp"
            assert st.written_ns >= st.stamp_ns
            if not stamps or st.stamp_ns != stamps[-1]:
                assert not stamps or st.stamp_ns > stamps[-1], "a live frame older than the one before"
                stamps.append(st.stamp_ns)
            time.sleep(0.05)
        camera_frames = rig.op.status["topics"]["image_corner"]["accepted"] - camera_before
        img = np.asarray(Image.open(io.BytesIO(data)))
        assert img.shape == (32, 32, 3)
        # at the live rate (2 Hz), not the camera's (20 Hz): far fewer live frames than camera frames
        assert 2 * (len(stamps) - 1) < camera_frames, (stamps, camera_frames)
        robot = StatusFile(run).read().robot
        assert robot.control_hz is not None and robot.control_hz > 0  # the loop runs (its rate is not bounded)
    assert sorted(p.name for p in path.parent.iterdir()) == ["corner.jpg"]  # no temporary files left


class _Input:
    def __init__(self):
        self.buffer = StreamBuffer()


def test_the_writer_writes_new_stamps_only(tmp_path):
    cams = {"image_front": _Input(), "image_wrist": _Input(), "proprio": _Input()}
    w = LiveFrameWriter(tmp_path, cams, rate_hz=2.0)
    assert set(w.cameras) == {"front", "wrist"}
    assert w.write_once() == 0  # nothing received yet
    front = np.zeros((24, 32, 3), np.uint8)
    front[:, 16:] = 250
    cams["image_front"].buffer.push(Sample(1_000, 1_100, front))
    cams["image_wrist"].buffer.push(Sample(2_000, 2_100, np.full((8, 8, 1), 77, np.uint8)))
    assert w.write_once() == 2
    assert w.write_once() == 0  # the same stamps: not written again
    files = RunFiles.of(tmp_path)
    data = files.live_frame("front").read_bytes()
    assert live_frames.read_stamp(data).stamp_ns == 1_000
    got = np.asarray(Image.open(io.BytesIO(data))).astype(int)
    assert got.shape == (24, 32, 3) and np.abs(got - front).mean() < 6
    assert np.asarray(Image.open(files.live_frame("wrist"))).shape == (8, 8)
    cams["image_front"].buffer.push(Sample(3_000, 3_100, front))
    assert w.write_once() == 1 and live_frames.read_stamp(files.live_frame("front").read_bytes()).stamp_ns == 3_000
    idle = LiveFrameWriter(tmp_path, {"proprio": _Input()}, rate_hz=2.0)
    idle.start(threading.Event())
    assert idle._thread is None  # no camera: no thread
