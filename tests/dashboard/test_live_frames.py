"""The bridge's live camera frames over a real server: GET /api/live/frames (each camera's stamp,
age, stale flag) and GET /api/live/frames/{camera} (the JPEG, its ETag and age headers), read
without a token from loopback like the other frame routes, stale frames served and flagged,
symbolic links refused; and the frame format (worldsample/live_frames.py)."""

from __future__ import annotations

import io
import os
import time

import httpx
import numpy as np
import pytest
from PIL import Image

from services.dashboard import DashboardSettings, create_app
from services.dashboard.server import BackgroundServer
from tests.dashboard.conftest import TOKEN
from worldsample import live_frames
from worldsample.atomic import atomic_write_bytes
from worldsample.paths import RunFiles


def write_live(run, camera: str, frame: np.ndarray, age_s: float = 0.0) -> int:
    """A live frame as the bridge writes it, stamped `age_s` ago; returns the stamp."""
    stamp = time.time_ns() - int(age_s * 1e9)
    atomic_write_bytes(RunFiles.of(run).live_frame(camera), live_frames.encode(frame, stamp))
    return stamp


@pytest.fixture()
def live(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    settings = DashboardSettings(token=TOKEN, live_frame_stale_s=3.0)
    with BackgroundServer(create_app(run, settings)) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        yield run, c


def test_no_live_frames(live):
    run, c = live
    got = c.get("/api/live/frames")
    assert got.status_code == 200 and got.json() == {"stale_after_s": 3.0, "cameras": [], "error": None}
    r = c.get("/api/live/frames/front")
    assert r.status_code == 404 and "has written none" in r.json()["detail"], r.text


def test_a_fresh_frame_is_served_with_its_stamp(live):
    run, c = live
    frame = np.zeros((40, 56, 3), np.uint8)
    frame[:, :, 0] = 200
    stamp = write_live(run, "front", frame, age_s=0.2)
    listing = c.get("/api/live/frames").json()  # no Authorization header: loopback reads are open
    [cam] = listing["cameras"]
    assert cam["camera"] == "front" and cam["stamp_ns"] == stamp and not cam["stale"] and cam["error"] is None
    assert 0.1 < cam["age_s"] < 2.0 and cam["written_ns"] >= stamp and cam["size_bytes"] > 100
    r = c.get("/api/live/frames/front")
    assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg"
    assert r.headers["x-frame-stale"] == "false" and r.headers["x-frame-stamp-ns"] == str(stamp)
    assert 0.1 < float(r.headers["x-frame-age-s"]) < 2.0
    img = np.asarray(Image.open(io.BytesIO(r.content)))
    assert img.shape == (40, 56, 3) and abs(int(img[..., 0].mean()) - 200) < 4
    run_id = c.get("/api/run").json()["run_id"]
    assert r.headers["etag"].startswith(f'"{run_id}-live-') and r.headers["cache-control"] == "private, no-cache"
    again = c.get("/api/live/frames/front", headers={"If-None-Match": r.headers["etag"]})
    assert again.status_code == 304
    write_live(run, "front", frame)  # a new frame: a new ETag
    assert c.get("/api/live/frames/front", headers={"If-None-Match": r.headers["etag"]}).status_code == 200


def test_a_stale_frame_is_flagged_with_its_age(live):
    run, c = live
    write_live(run, "front", np.full((16, 16, 3), 90, np.uint8), age_s=0.0)
    write_live(run, "wrist", np.full((16, 16, 1), 90, np.uint8), age_s=12.0)  # mono, 12 s old
    Image.new("RGB", (8, 8)).save(RunFiles.of(run).live_frame("side"), "JPEG")  # no stamp
    cams = {x["camera"]: x for x in c.get("/api/live/frames").json()["cameras"]}
    assert not cams["front"]["stale"]
    assert cams["wrist"]["stale"] and 11.5 < cams["wrist"]["age_s"] < 14
    assert cams["side"]["stale"] and cams["side"]["stamp_ns"] is None and cams["side"]["age_s"] is None
    r = c.get("/api/live/frames/wrist")
    assert r.status_code == 200 and r.headers["x-frame-stale"] == "true"
    assert 11.5 < float(r.headers["x-frame-age-s"]) < 14 and r.headers["x-frame-stale-after-s"] == "3"
    r = c.get("/api/live/frames/side")
    assert r.status_code == 200 and r.headers["x-frame-stale"] == "true" and "x-frame-age-s" not in r.headers


def test_symbolic_links_are_refused(live, tmp_path):
    run, c = live
    outside = tmp_path / "outside.jpg"
    outside.write_bytes(live_frames.encode(np.zeros((8, 8, 3), np.uint8), time.time_ns()))
    files = RunFiles.of(run)
    files.live_frames.mkdir()
    os.symlink(outside, files.live_frame("front"))
    assert c.get("/api/live/frames").json()["cameras"] == []  # a linked frame is not listed
    r = c.get("/api/live/frames/front")
    assert r.status_code == 400 and "symbolic link" in r.json()["detail"], r.text
    files.live_frame("front").unlink()
    files.live_frames.rmdir()
    os.symlink(tmp_path, files.live_frames)  # the whole folder a link
    (tmp_path / "front.jpg").write_bytes(outside.read_bytes())
    got = c.get("/api/live/frames").json()
    assert got["cameras"] == [] and "symbolic link" in got["error"], got
    r = c.get("/api/live/frames/front")
    assert r.status_code == 400 and "symbolic link" in r.json()["detail"], r.text


def test_the_stamp_travels_in_the_jpeg():
    frame = np.arange(48, dtype=np.uint8).reshape(4, 4, 3)
    data = live_frames.encode(frame, 123456789, written_ns=987654321)
    assert live_frames.read_stamp(data) == live_frames.LiveStamp(123456789, 987654321)
    assert np.asarray(Image.open(io.BytesIO(data))).shape == (4, 4, 3)
    assert live_frames.read_stamp(b"not a jpeg") is None
    assert live_frames.read_stamp(data[:10]) is None  # cut before the comment ends
    plain = io.BytesIO()
    Image.new("L", (4, 4)).save(plain, "JPEG", comment=b'{"stamp_ns": "soon"}')
    assert live_frames.read_stamp(plain.getvalue()) is None
