"""The imagine endpoint backed by a real world-model checkpoint in the run."""

from __future__ import annotations

import io

import httpx
import numpy as np
from PIL import Image

from services.dashboard import DashboardSettings, create_app
from services.dashboard.server import BackgroundServer
from services.dashboard.wm_imagine import WorldModelImagination
from tests.dashboard.rundata import make_run
from worldsample.versioned import VersionedDir
from worldsample.world_model import WorldModel, WorldModelConfig, checkpoint
from worldsample.world_model.modes import checkpoint_dir


def test_imagination_of_a_stored_episode(tmp_path):
    run = make_run(tmp_path / "run", episodes=2, length=20, size=16, metric_rows=5)
    provider = WorldModelImagination(run)
    with BackgroundServer(create_app(run, DashboardSettings(token="t" * 24), imagine=provider)) as srv, httpx.Client(
        base_url=srv.url, timeout=30
    ) as c:
        r = c.get("/api/episodes/demo/0/imagine/front", params={"start": 3, "horizon": 4})
        assert r.status_code == 404 and "no world model checkpoint" in r.text
        cfg = WorldModelConfig(image_keys=["image_front"], vector_keys={"proprio": 4}, image_size=16, action_dim=4)
        checkpoint.save(checkpoint_dir(run), WorldModel(cfg), {"note": "untrained"})
        r = c.get("/api/episodes/demo/0/imagine/front", params={"start": 3, "horizon": 4})
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "image/jpeg" and r.headers["x-wm-version"] == "1"
        assert Image.open(io.BytesIO(r.content)).size[0] > 0
        r = c.get("/api/episodes/demo/0/imagine/wrist", params={"start": 0, "horizon": 2})
        assert r.status_code == 404 and "does not model camera 'wrist'" in r.text
        # a torn new version: the page keeps imagining with the model it has
        VersionedDir(checkpoint_dir(run)).publish(lambda tmp: (tmp / "model.json").write_text("{torn"))
        r = c.get("/api/episodes/demo/0/imagine/front", params={"start": 3, "horizon": 4})
        assert r.status_code == 200 and r.headers["x-wm-version"] == "1"
        checkpoint.save(checkpoint_dir(run), WorldModel(cfg), {"note": "next"})
        r = c.get("/api/episodes/demo/0/imagine/front", params={"start": 3, "horizon": 4})
        assert r.status_code == 200 and r.headers["x-wm-version"] == "3"
    frames = provider.imagine("demo", 1, "front", 0, 5)
    assert frames.shape == (5, 16, 16, 3) and frames.dtype == np.uint8
