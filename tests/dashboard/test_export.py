"""GET /api/episodes/{group}/{episode}/export.mcap: the episode as an MCAP file that the `mcap`
reader reads, 410 for a damaged episode, and a bounded queue (429 beyond it)."""

from __future__ import annotations

import json
import tempfile
import threading
import time

import httpx
import pytest

from services.dashboard import DashboardSettings, create_app
from services.dashboard.routes import export as export_route
from services.dashboard.server import BackgroundServer
from tests.dashboard.rundata import make_run
from tests.export.mcapread import read_mcap
from worldsample.store.layout import chunk_path

CAMS = ("/camera/front", "/camera/wrist")
VECTORS = ("/proprio", "/action", "/reward", "/done", "/success", "/intervention")


def test_download_is_an_mcap_of_the_episode(client, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the server writes the file
    detail = client.get("/api/episodes/real/2").json()
    r = client.get("/api/episodes/real/2/export.mcap")
    assert r.status_code == 200, r.text[:300]
    assert r.headers["content-type"] == "application/vnd.mcap"
    assert r.headers["content-disposition"] == 'attachment; filename="run-real-2.mcap"'
    assert int(r.headers["content-length"]) == len(r.content) and r.headers["cache-control"] == "no-store"
    got = read_mcap(r.content)
    for topic in (*CAMS, *VECTORS):
        assert got.counts[topic] == detail["length"] == len(got.messages[topic]), topic
        assert all(b > a for a, b in zip(got.times[topic], got.times[topic][1:])), topic
    assert {got.schemas[c] for c in CAMS} == {("foxglove.CompressedImage", "protobuf")}
    (first,) = got.messages["/worldsample/episode"]
    assert first["group"] == "real" and first["record"]["episode"] == 2
    assert first["record"]["checksums"] == json.loads(got.metadata["worldsample.episode"]["record"])["checksums"]
    raw = client.get("/api/episodes/real/2/export.mcap", params={"images": "raw"})
    assert read_mcap(raw.content).schemas["/camera/front"] == ("foxglove.RawImage", "protobuf")
    assert list(tmp_path.iterdir()) == []  # the temp directories are gone


def test_unknown_episode_is_404(client):
    r = client.get("/api/episodes/real/99/export.mcap")
    assert r.status_code == 404 and r.json()["error"] == "NotFound"
    assert client.get("/api/episodes/bogus/0/export.mcap").status_code == 422


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    run = make_run(tmp_path_factory.mktemp("export") / "run", episodes=3, length=12, size=16, metric_rows=5)

    def chunk(episode: int, key: str):
        rec = json.loads((run / "store" / "real" / "commits" / f"{episode:09d}.json").read_text())
        return chunk_path(run / "store" / "real", key, rec["start"] // 32).joinpath("0", "0", "0")

    chunk(0, "image_front").write_bytes(b"garbled" * 20)  # does not decode
    chunk(1, "image_wrist").unlink()  # reads as zeros: caught by the record's checksum
    app = create_app(run, DashboardSettings(token="export-token-0123456789", store_refresh_min_s=0.0))
    with BackgroundServer(app) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        yield app, c


@pytest.mark.parametrize("episode,why", [(0, "do not decode"), (1, "not on disk")])
def test_a_damaged_episode_is_410_and_set_aside(damaged, episode, why, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    _, c = damaged
    for _ in range(2):  # found while exporting, then known from the start
        r = c.get(f"/api/episodes/real/{episode}/export.mcap")
        assert r.status_code == 410, r.text[:300]
        assert r.headers["content-type"] == "application/json" and r.headers["cache-control"] == "no-store"
        assert r.json()["error"] == "EpisodeDamaged" and why in r.json()["detail"]
    assert ("real", episode) in {(d["group"], d["episode"]) for d in c.get("/api/run").json()["damaged"]}
    assert c.get("/api/episodes/real/2/export.mcap").status_code == 200
    assert list(tmp_path.iterdir()) == []


def test_exports_run_one_at_a_time_and_queue_boundedly(damaged, monkeypatch):
    app, c = damaged
    gate, inside, real = threading.Event(), [], export_route.write_episode

    def slow(*args, **kw):
        inside.append(time.monotonic())
        assert gate.wait(20)
        return real(*args, **kw)

    monkeypatch.setattr(export_route, "write_episode", slow)
    answers: list[int] = []
    threads = [threading.Thread(target=lambda: answers.append(c.get("/api/episodes/real/2/export.mcap").status_code))
               for _ in range(3)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    while getattr(app.state, "export_work", None) is None or app.state.export_work.admitted < 3:
        assert time.monotonic() < deadline, "three exports were not admitted"
        time.sleep(0.02)
    assert len(inside) == 1  # one runs, two wait
    busy = c.get("/api/episodes/real/2/export.mcap")
    assert busy.status_code == 429 and busy.headers["retry-after"] == "1"
    gate.set()
    for t in threads:
        t.join(30)
    assert answers == [200, 200, 200] and len(inside) == 3


def test_reads_behind_a_token_need_it_for_the_export_too(run_dir):
    token = "export-read-token-0123456789"
    app = create_app(run_dir, DashboardSettings(token=token, read_policy="token"))
    with BackgroundServer(app) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        assert c.get("/api/episodes/demo/0/export.mcap").status_code == 401
        r = c.get("/api/episodes/demo/0/export.mcap", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200 and read_mcap(r.content).counts["/reward"] == 40
