"""The read API against a real uvicorn server: overview, metrics, episodes, steps, policies."""

from __future__ import annotations

import numpy as np

from worldsample.store import EpisodeStore


def test_health_and_overview(client):
    assert client.get("/api/health").json()["status"] == "ok"
    ov = client.get("/api/run").json()
    assert ov["status_source"] == "status.json" and ov["phase"] == "training"
    assert ov["robot"]["connected"] is True and ov["policy_version"] == 2
    groups = {g["name"]: g for g in ov["groups"]}
    assert groups["demo"]["episodes"] == 6 and groups["demo"]["cameras"] == ["front", "wrist"]
    assert groups["real"]["interventions"] == 6
    assert [s["name"] for s in ov["services"]] == ["trainer"]
    assert "loss/critic" in ov["metrics"]["names"] and ov["policies"] == 1 and ov["reports"] == 1


def test_overview_shows_which_group_has_an_active_writer(client, run_dir):
    def active():
        return {g["name"]: g["writer_active"] for g in client.get("/api/run").json()["groups"]}

    assert active() == {"demo": False, "real": False}
    with EpisodeStore(run_dir).writer("real"):
        assert active() == {"demo": False, "real": True}
    assert active() == {"demo": False, "real": False}


def test_metric_series_thinned_and_incremental(client):
    latest = client.get("/api/metrics").json()
    assert set(latest["names"]) >= {"loss/critic", "eval/success", "wm/psnr"}
    s = client.get("/api/metrics/series", params={"name": ["loss/critic", "wm/psnr"], "max_points": 50}).json()[
        "series"
    ]
    assert set(s) == {"loss/critic", "wm/psnr"}
    crit = s["loss/critic"]
    assert 2 <= len(crit["step"]) <= 50 and crit["step"][-1] == latest["latest"]["loss/critic"]["step"]
    assert crit["step"] == sorted(crit["step"]) and len(crit["value"]) == len(crit["time"]) == len(crit["step"])
    tail = client.get("/api/metrics/series", params={"name": "loss/critic", "since_step": 14000}).json()["series"][
        "loss/critic"
    ]
    assert all(x > 14000 for x in tail["step"]) and tail["step"]
    r = client.get("/api/metrics/series", params={"name": "nope"})
    assert r.status_code == 404 and "nope" in r.json()["detail"]


def test_episode_list_filters_and_pages(client):
    page = client.get("/api/episodes", params={"limit": 5}).json()
    assert page["total"] == 12 and len(page["items"]) == 5
    starts = [e["wall_time_start"] for e in page["items"]]
    assert starts == sorted(starts, reverse=True)
    rest = client.get("/api/episodes", params={"limit": 5, "offset": 10}).json()
    assert len(rest["items"]) == 2
    real = client.get("/api/episodes", params={"group": "real", "policy_version": 1}).json()
    assert real["total"] == 3 and {e["policy_version"] for e in real["items"]} == {1}
    ok = client.get("/api/episodes", params={"group": "demo", "success": "true"}).json()
    assert ok["total"] == 4 and all(e["success"] for e in ok["items"])
    assert client.get("/api/episodes", params={"domain": "mars"}).json()["total"] == 0
    assert client.get("/api/episodes", params={"group": "synthetic"}).json()["total"] == 0


def test_episode_detail_and_steps_match_store(client, run_dir):
    d = client.get("/api/episodes/real/1").json()
    assert d["length"] == 41 and d["interventions"] == 6 and d["policy_version"] == 1
    assert {k["name"] for k in d["keys"]} >= {"image_front", "action", "reward"}
    ref = EpisodeStore(run_dir).reader("real", cache=False).episode(1)
    steps = client.get("/api/episodes/real/1/steps", params={"start": 5, "stop": 20}).json()
    assert steps["start"] == 5 and steps["stop"] == 20 and steps["length"] == 41
    np.testing.assert_allclose(steps["data"]["action"], ref["action"][5:20], rtol=1e-6)
    assert steps["data"]["intervention"] == ref["intervention"][5:20].tolist()
    only = client.get("/api/episodes/real/1/steps", params={"keys": ["reward"], "stop": 1000}).json()
    assert list(only["data"]) == ["reward"] and only["stop"] == 41


def test_bad_input_gets_clear_4xx(client):
    cases = {
        "/api/episodes/demo/999": (404, "no such committed episode"),
        "/api/episodes/nogroup/0": (422, "group"),
        "/api/episodes/demo/-1": (422, "episode"),
        "/api/episodes/demo/0/steps?start=500": (416, "past the last step"),
        "/api/episodes/demo/0/steps?start=5&stop=5": (400, "greater than start"),
        "/api/episodes/demo/0/steps?keys=image_front": (400, "image key"),
        "/api/episodes/demo/0/steps?keys=bogus": (400, "no key"),
        "/api/episodes?limit=100000": (422, "limit"),
        "/api/episodes/demo/0/frames/front/40": (416, "past the last step"),
        "/api/episodes/demo/0/frames/nocam/0": (404, "no camera"),
        "/api/episodes/demo/0/frames/..%2F..%2Fetc/0": (404, ""),
        "/api/episodes/demo/0/sheet/front?count=100000": (400, "at most"),
        "/api/reports/..%2Fstatus.json": (404, ""),
        "/api/reports/.hidden.json": (400, "bad name"),
        "/api/reports/missing.json": (404, "no report"),
        "/api/metrics/series?max_points=0": (422, "max_points"),
    }
    for path, (status, text) in cases.items():
        r = client.get(path)
        assert r.status_code == status, (path, r.status_code, r.text)
        body = r.json()
        assert "detail" in body and text in str(body["detail"]), (path, body)


def test_unknown_host_header_is_refused(client):
    r = client.get("/api/run", headers={"Host": "evil.example:8765"})
    assert r.status_code == 400 and r.json()["error"] == "BadHost"
    assert client.get("/api/health", headers={"Host": "localhost:1"}).status_code == 200


def test_policies_reports_and_comparison(client):
    p = client.get("/api/policies").json()
    assert [x["name"] for x in p["policies"]] == ["v0002"] and p["policies"][0]["meta"]["version"] == 2
    assert [r["name"] for r in p["reports"]] == ["eval_v2.json"]
    rows = {(r["policy"], r["source"]): r for r in p["comparison"]}
    assert rows[("expert", "store/demo")]["episodes"] == 6
    assert rows[("v1", "store/real")]["episodes"] == 3
    assert rows[("v2", "report/eval_v2.json")]["success_rate"] == 0.7
    assert client.get("/api/reports/eval_v2.json").json()["kind"] == "policy_eval"


def test_page_and_static_files(client):
    r = client.get("/")
    assert r.status_code == 200 and "WorldSample" in r.text
    assert "default-src 'self'" in r.headers["content-security-policy"]
    for path in ("/static/app.css", "/static/js/app.js", "/static/js/chart.js", "/static/js/player.js"):
        assert client.get(path).status_code == 200, path
    assert client.get("/static/../auth.py").status_code == 404
    assert "http" not in client.get("/").text.replace("http-equiv", "")  # no CDN or external asset
