"""Damaged files in the run directory: each costs its own item, with a clear JSON error, and the
rest of the dashboard works. A truncated commit record, chunks that do not decode, a deleted
chunk (caught by the record's checksums, not shown as black frames), and JSON nested past the
parser in reports/ and a policy's meta.json (the live poller still delivers the metric rows)."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from services.dashboard import DashboardSettings, create_app
from services.dashboard.server import BackgroundServer
from tests.dashboard.rundata import make_run
from worldsample.runlog import MetricsWriter
from worldsample.store.layout import chunk_path

TOKEN = "damaged-token-0123456789"
CHUNK = 32  # rundata's chunk length


def _chunk(run, group: str, episode: int, key: str, index: int):
    rec = json.loads((run / "store" / group / "commits" / f"{episode:09d}.json").read_text())
    inner = ("0",) * (3 if key.startswith("image_") else 1)
    return chunk_path(run / "store" / group, key, rec["start"] // CHUNK + index).joinpath(*inner)


def _serve(run):
    settings = DashboardSettings(token=TOKEN, refresh_interval_s=0.1, store_refresh_min_s=0.0)
    return BackgroundServer(create_app(run, settings))


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    run = make_run(tmp_path_factory.mktemp("damaged") / "run", episodes=6, length=40, size=16, metric_rows=20)
    rec = run / "store" / "demo" / "commits" / "000000001.json"
    rec.write_bytes(rec.read_bytes()[:57])  # a truncated commit record
    _chunk(run, "real", 0, "image_front", 0).write_bytes(b"garbled" * 20)  # frames
    _chunk(run, "real", 1, "proprio", 1).write_bytes(b"garbled" * 20)  # steps
    _chunk(run, "real", 2, "image_wrist", 1).unlink()  # a deleted chunk
    _chunk(run, "real", 3, "image_front", 1).write_bytes(b"garbled" * 20)  # video (its first chunk decodes)
    _chunk(run, "real", 4, "image_wrist", 0).write_bytes(b"\0" * 300)  # sheet
    _chunk(run, "demo", 4, "image_front", 0).write_bytes(b"garbled" * 20)  # found while a page listens
    with _serve(run) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        yield c


def _damaged(c: httpx.Client, path: str, *words: str) -> dict:
    r = c.get(path)
    assert r.status_code == 410, (path, r.status_code, r.text[:300])
    assert r.headers["content-type"] == "application/json" and r.headers["cache-control"] == "no-store"
    body = r.json()
    assert body["error"] == "EpisodeDamaged", body
    for w in words:
        assert w in body["detail"], (w, body["detail"])
    return body


def test_a_truncated_record_costs_one_episode_not_the_dashboard(broken):
    run = broken.get("/api/run").json()
    assert {"group": "demo", "episode": 1} in [{k: d[k] for k in ("group", "episode")} for d in run["damaged"]]
    page = broken.get("/api/episodes", params={"group": "demo"}).json()
    ids = {e["episode"] for e in page["items"]}
    assert 1 not in ids and {0, 2, 3, 5} <= ids
    demo = next(g for g in run["groups"] if g["name"] == "demo")
    assert demo["episodes"] == len(ids)
    _damaged(broken, "/api/episodes/demo/1", "set aside", "commit record")
    assert broken.get("/api/episodes/demo/2/frames/front/5").status_code == 200


def test_a_chunk_that_does_not_decode_is_a_clear_error_for_that_episode(broken):
    _damaged(broken, "/api/episodes/real/0/frames/front/3", "real/episode 0", "image_front", "do not decode")
    _damaged(broken, "/api/episodes/real/1/steps", "proprio", "do not decode")
    _damaged(broken, "/api/episodes/real/4/sheet/wrist", "image_wrist")
    # set aside from then on: listed as damaged, no longer among the episodes
    run = broken.get("/api/run").json()
    aside = {(d["group"], d["episode"]) for d in run["damaged"]}
    assert {("real", 0), ("real", 1), ("real", 4)} <= aside
    _damaged(broken, "/api/episodes/real/0", "set aside")
    ids = [e["episode"] for e in broken.get("/api/episodes", params={"group": "real"}).json()["items"]]
    assert 0 not in ids and 5 in ids
    ok = broken.get("/api/episodes/real/5/sheet/front")
    assert ok.status_code == 200 and ok.headers["content-type"] == "image/jpeg"


def test_damage_found_while_reading_tells_listening_pages(broken):
    with broken.stream("GET", "/api/stream") as s:
        assert s.status_code == 200
        lines = s.iter_lines()
        version = None
        for line in lines:  # the hello event carries the episode-set version
            if line.startswith("data:"):
                version = json.loads(line[5:])["episodes_version"]
                break
        _damaged(broken, "/api/episodes/demo/4/frames/front/0", "do not decode")
        deadline = time.monotonic() + 8
        for line in lines:
            if line.startswith("event: episodes"):
                got = json.loads(next(lines)[5:])["version"]
                assert got > version
                break
            assert time.monotonic() < deadline, "no episodes event after the episode was set aside"
    ids = [e["episode"] for e in broken.get("/api/episodes", params={"group": "demo"}).json()["items"]]
    assert 4 not in ids


def test_video_of_a_damaged_episode_is_an_error_not_an_empty_200(broken):
    body = _damaged(broken, "/api/episodes/real/3/video/front?fps=60", "image_front")
    assert "do not decode" in body["detail"] or "checksum" in body["detail"]
    with broken.stream("GET", "/api/episodes/real/5/video/front", params={"fps": 60}) as r:
        assert r.status_code == 200
        assert sum(len(b) for b in r.iter_bytes()) > 40 * 100


def test_a_deleted_chunk_is_detected_by_the_checksum_not_shown_black(broken):
    # the chunk holding steps 32-39 is gone: zarr would read zeros; the commit record's crc32 says otherwise
    _damaged(broken, "/api/episodes/real/2/frames/wrist/35", "image_wrist", "checksum", "not on disk")
    _damaged(broken, "/api/episodes/real/2/frames/wrist/0")  # the whole episode is set aside
    assert broken.get("/api/episodes/real/2/frames/front/0").status_code == 410


@pytest.fixture(scope="module")
def deep(tmp_path_factory):
    run = make_run(tmp_path_factory.mktemp("deep") / "run", episodes=2, length=12, size=16, metric_rows=5)
    nest = "[" * 100_000 + "]" * 100_000
    (run / "reports" / "deep.json").write_text('{"kind": "eval", "x": ' + nest + "}")
    (run / "reports" / "deep40.json").write_text('{"kind": "eval", "x": ' + "[" * 40 + "]" * 40 + "}")
    for name, body in (("v0008", nest), ("v0009", "[" * 40 + "]" * 40)):
        (run / "policies" / name).mkdir()
        (run / "policies" / name / "meta.json").write_text('{"version": 1, "x": ' + body + "}")
    (run / "status.json").write_text(nest)
    with _serve(run) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        yield run, c


def test_deep_json_is_an_error_for_that_file_only(deep):
    run, c = deep
    r = c.get("/api/run")
    assert r.status_code == 200 and r.json()["reports"] == 3 and r.json()["policies"] == 3
    assert r.json()["status_source"] == "derived"  # the unreadable status.json is skipped (and logged)
    pol = c.get("/api/policies").json()
    metas = {p["name"]: p["meta"] for p in pol["policies"]}
    assert metas["v0002"] == {"version": 2, "step": 12000}
    assert "nested deeper than 32 levels" in metas["v0008"]["unreadable"]
    assert "nested deeper than 32 levels" in metas["v0009"]["unreadable"]
    reps = {x["name"]: x["summary"] for x in pol["reports"]}
    assert "nested deeper" in reps["deep.json"]["unreadable"] and reps["eval_v2.json"]["kind"] == "policy_eval"
    assert [row["policy"] for row in pol["comparison"] if row["source"].startswith("report/")] == ["v1", "v2"]
    for name in ("deep.json", "deep40.json"):
        r = c.get(f"/api/reports/{name}")
        assert r.status_code == 400 and "nested deeper than 32 levels" in r.json()["detail"], r.text[:200]
    assert c.get("/api/reports/eval_v2.json").json()["kind"] == "policy_eval"


def test_the_live_poller_keeps_the_rows_it_read(deep):
    run, c = deep
    with c.stream("GET", "/api/stream") as s:
        assert s.status_code == 200
        before = c.get("/api/metrics").json()["malformed"]
        with open(run / "metrics.jsonl", "a") as f:  # a line nested past the parser, then a good row
            f.write("[" * 100_000 + "]" * 100_000 + "\n")
        with MetricsWriter(run) as m:
            m.log(987654, {"loss/after_deep": 1.5})
        deadline = time.monotonic() + 8
        seen = False
        for line in s.iter_lines():
            if "987654" in line and "loss/after_deep" in line:
                seen = True
                break
            assert time.monotonic() < deadline, "the metric row never arrived"
    assert seen
    got = c.get("/api/metrics").json()
    assert got["latest"]["loss/after_deep"]["value"] == 1.5 and got["malformed"] == before + 1
