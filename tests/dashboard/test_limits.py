"""Limits of a dashboard configured small: huge ranges, too many streams, too-fast video."""

from __future__ import annotations

import httpx
import pytest

from services.dashboard import DashboardSettings, create_app
from services.dashboard.server import BackgroundServer


@pytest.fixture(scope="module")
def small(run_dir):
    settings = DashboardSettings(
        token="limits-token-0123456789",
        max_steps_per_request=10,
        max_sheet_frames=8,
        max_stream_clients=1,
        max_video_fps=30,
    )
    with BackgroundServer(create_app(run_dir, settings)) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        yield c


def test_huge_ranges_are_refused(small):
    r = small.get("/api/episodes/demo/0/steps", params={"start": 0, "stop": 11})
    assert r.status_code == 400 and "at most 10" in r.json()["detail"]
    assert small.get("/api/episodes/demo/0/steps", params={"start": 30, "stop": 40}).status_code == 200
    r = small.get("/api/episodes/demo/0/sheet/front", params={"count": 9})
    assert r.status_code == 400 and "at most 8" in r.json()["detail"]
    assert small.get("/api/episodes/demo/0/sheet/front").headers["x-frame-count"] == "8"
    r = small.get("/api/episodes/demo/0/video/front", params={"fps": 31})
    assert r.status_code == 400 and "fps" in r.json()["detail"]


def test_stream_slots_are_bounded(small):
    with small.stream("GET", "/api/stream") as first:
        assert first.status_code == 200
        r = small.get("/api/episodes/demo/0/video/front", params={"fps": 30})
        assert r.status_code == 429 and "too many" in r.json()["detail"]
    # the slot is released when the first stream closes
    for _ in range(50):
        r = small.get("/api/episodes/demo/0/video/front", params={"fps": 30, "start": 38})
        if r.status_code == 200:
            break
    assert r.status_code == 200


def test_oversized_and_malformed_bodies(small):
    h = {"Authorization": "Bearer limits-token-0123456789"}
    r = small.post("/api/control/pause", content=b"x" * (70 * 1024), headers={**h, "content-type": "application/json"})
    assert r.status_code == 413
    r = small.post("/api/control/pause", content=b"{not json", headers={**h, "content-type": "application/json"})
    assert r.status_code == 422 and r.json()["error"] == "InvalidRequest"
    r = small.post("/api/control/pause", json={"reason": "x", "surprise": 1}, headers=h)
    assert r.status_code == 422
    r = small.post("/api/control/pause", json={"reason": "x" * 501}, headers=h)
    assert r.status_code == 422
    r = small.post("/api/control/label", json={"group": "demo", "episode": 12345, "success": True}, headers=h)
    assert r.status_code == 404
    r = small.post("/api/control/label", json={"group": "../etc", "episode": 1, "success": True}, headers=h)
    assert r.status_code == 422
