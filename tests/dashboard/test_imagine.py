"""The imagination hook: 404 without RUN/world_model/, 501 without a provider, frames with one."""

from __future__ import annotations

import io

import httpx
import numpy as np
from PIL import Image

from services.dashboard import DashboardSettings, create_app
from services.dashboard.server import BackgroundServer
from tests.dashboard.rundata import make_run


class FakeProvider:
    version = 7

    def __init__(self):
        self.calls = []

    def imagine(self, group, episode, camera, start, horizon):
        self.calls.append((group, episode, camera, start, horizon))
        return np.full((horizon, 16, 16, 3), 200, np.uint8)


def test_imagine_hook(tmp_path):
    run = make_run(tmp_path / "run", episodes=1, length=12, size=16, metric_rows=5)
    provider = FakeProvider()
    settings = DashboardSettings(token="imagine-token-0123456789")
    with BackgroundServer(create_app(run, settings, imagine=provider)) as srv, httpx.Client(base_url=srv.url) as c:
        r = c.get("/api/episodes/demo/0/imagine/front")
        assert r.status_code == 404 and "no world model checkpoint in RUN" in r.json()["detail"]
        (run / "world_model").mkdir()
        r = c.get("/api/episodes/demo/0/imagine/front", params={"start": 4, "horizon": 100})
        assert r.status_code == 200 and r.headers["x-wm-version"] == "7"
        assert r.headers["x-start"] == "4" and r.headers["x-frame-count"] == "8"  # clipped to the episode
        assert provider.calls == [("demo", 0, "front", 4, 8)]
        assert np.asarray(Image.open(io.BytesIO(r.content))).mean() > 150
        assert c.get("/api/episodes/demo/0/imagine/nocam").status_code == 404
    with BackgroundServer(create_app(run, settings)) as srv:
        r = httpx.get(srv.url + "/api/episodes/demo/0/imagine/front")
        assert r.status_code == 501 and "no imagination provider" in r.json()["detail"]
