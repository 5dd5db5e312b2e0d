"""Hardening: symbolic links refused at every level, a minimum token length and back-off on
wrong tokens, per-client stream limits, bounded imagine work, cached report summaries, strict
control bodies and limits stated in the schema, /docs from this origin, run-scoped image caching."""

from __future__ import annotations

import concurrent.futures
import re
import shutil
import socket
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from services.dashboard import DashboardSettings, create_app
from services.dashboard.server import BackgroundServer, free_port
from tests.dashboard.rundata import make_run

TOKEN = "hardening-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _run(tmp_path: Path, name: str = "run", **kw) -> Path:
    return make_run(tmp_path / name, **{"episodes": 1, "length": 12, "size": 16, "metric_rows": 5, **kw})


def _serve(run: Path, **settings) -> BackgroundServer:
    port = settings.pop("port", None)
    return BackgroundServer(create_app(run, DashboardSettings(token=TOKEN, **settings)), port=port)


def _other_client(url: str) -> httpx.Client:
    """A client with another loopback address (127.0.0.2): another client to the server."""
    return httpx.Client(base_url=url, timeout=10, transport=httpx.HTTPTransport(local_address="127.0.0.2"))


# -- symbolic links ------------------------------------------------------------------------------


def test_symlinks_are_refused_at_every_level(tmp_path):
    run = _run(tmp_path)
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "meta.json").write_text('{"secret": "s3cr3t"}')
    (secret / "r.json").write_text('{"kind": "s3cr3t", "policies": [{"policy": "s3cr3t", "episodes": 1}]}')
    v3 = run / "policies" / "v0003"
    v3.mkdir()
    (v3 / "meta.json").symlink_to(secret / "meta.json")  # a linked file inside a real policy
    (v3 / "actor.bin").symlink_to(secret / "meta.json")
    (run / "policies" / "v0004").symlink_to(secret)  # a linked policy
    (run / "reports" / "linked.json").symlink_to(secret / "r.json")
    # another run whose policies/ and reports/ folders are links
    other = _run(tmp_path, "other")
    shutil.rmtree(other / "policies")
    shutil.rmtree(other / "reports")
    (other / "policies").symlink_to(secret, target_is_directory=True)
    (other / "reports").symlink_to(secret, target_is_directory=True)
    (secret / "v0005").mkdir()
    (secret / "v0005" / "meta.json").write_text('{"secret": "s3cr3t"}')
    with _serve(run) as a, _serve(other) as b, httpx.Client(timeout=10) as c:
        r = c.get(a.url + "/api/policies")
        assert r.status_code == 200 and "s3cr3t" not in r.text
        pols = {p["name"]: p for p in r.json()["policies"]}
        assert set(pols) == {"v0002", "v0003"}
        assert pols["v0003"]["files"] == [] and "symbolic link" in pols["v0003"]["meta"]["unreadable"]
        assert [x["name"] for x in r.json()["reports"]] == ["eval_v2.json"]
        r = c.get(a.url + "/api/reports/linked.json")
        assert r.status_code == 404 and "s3cr3t" not in r.text
        for path in ("/api/policies", "/api/reports", "/api/reports/r.json", "/api/run"):
            r = c.get(b.url + path)
            assert "s3cr3t" not in r.text and r.status_code in (200, 404), (path, r.status_code)
        assert c.get(b.url + "/api/policies").json()["policies"] == []
        assert c.get(b.url + "/api/reports").json() == []


# -- tokens --------------------------------------------------------------------------------------


def test_short_tokens_are_refused(tmp_path):
    with pytest.raises(ValidationError, match="at least 16 characters"):
        DashboardSettings(token="x")
    with pytest.raises(ValidationError, match="at least 16 characters"):
        DashboardSettings(token="fifteen-chars-x")
    assert DashboardSettings(token="sixteen-chars-xx").token.get_secret_value() == "sixteen-chars-xx"
    assert DashboardSettings(token="").token is None  # unset: the run's token file is used

    import typer

    from services.cli.dashboard_cmd import dashboard

    app = typer.Typer()
    app.command()(dashboard)
    res = CliRunner().invoke(app, [str(tmp_path), "--token", "x"])
    out = " ".join(res.output.split())
    assert res.exit_code != 0 and "at least 16 characters" in out, out


def _until_not_429(send, timeout_s: float = 30.0) -> httpx.Response:
    """Send until the answer is not 429 (each 429 says retry-after 1); fails if that takes over `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while (r := send()).status_code == 429:
        assert r.headers["retry-after"] == "1", r.headers
        assert time.monotonic() < deadline, f"still backing off after {timeout_s} s: {r.json()}"
        time.sleep(0.05)
    return r


def test_wrong_tokens_make_a_client_back_off(tmp_path):
    run = _run(tmp_path)
    with _serve(run, auth_free_failures=3) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        wrong = {"Authorization": "Bearer wrong-token-0123456789"}
        for _ in range(4):  # 3 free, the 4th starts a 1 s back-off
            assert c.post("/api/control/pause", json={}, headers=wrong).status_code == 403
        r = c.post("/api/control/pause", json={}, headers=AUTH)  # refused unchecked while backing off
        assert r.status_code == 429 and r.headers["retry-after"] == "1" and "wait" in r.json()["detail"]
        with _other_client(srv.url) as other:  # per client: another address is not held back
            assert other.post("/api/control/pause", json={}, headers=AUTH).status_code == 202
        # the back-off ends: wait for it (refused unchecked meanwhile), not for a fixed time
        assert _until_not_429(lambda: c.post("/api/control/pause", json={}, headers=AUTH)).status_code == 202
        assert c.post("/api/control/pause", json={}, headers=wrong).status_code == 403  # the count was cleared
        assert c.post("/api/control/pause", json={}, headers=AUTH).status_code == 202
    # the next wait doubles, up to the maximum; memory is bounded however many clients fail
    from services.dashboard.auth import Backoff

    b = Backoff(free=1, max_s=3.0, max_clients=50)
    for _ in range(4):
        b.failed("a")
    assert 1.5 < b.wait_s("a") <= 3.0
    for i in range(1000):
        b.failed(f"10.0.{i // 256}.{i % 256}")
    assert len(b) == 50


# -- streams and slow work -----------------------------------------------------------------------


def _open_stream(port: int, path: str, source: str = "127.0.0.1") -> tuple[socket.socket, int]:
    s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        got = s.recv(4096)
        assert got, head
        head += got
    return s, int(head.split(b" ", 2)[1])


def test_one_client_cannot_take_every_stream_slot(tmp_path):
    run = _run(tmp_path)
    socks = []
    with _serve(run, max_stream_clients=12, max_streams_per_client=3) as srv:
        try:
            video = "/api/episodes/demo/0/video/front?fps=0.01&loop=true"
            got = []
            for _ in range(20):  # a flood of slow streams from one address
                s, status = _open_stream(srv.port, video)
                socks.append(s)
                got.append(status)
            assert got.count(200) == 3 and got.count(429) == 17, got
            s, status = _open_stream(srv.port, video, source="127.0.0.2")  # another client still gets video
            socks.append(s)
            assert status == 200
            s, status = _open_stream(srv.port, "/api/stream")  # and the flooding address its live updates
            socks.append(s)
            assert status == 200
        finally:
            for s in socks:
                s.close()


class SlowImagination:
    """An imagination provider that runs one rollout at a time (as the world model's does), each held
    until the test sets `release`."""

    version = 3

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = 0
        self.inside = self.most_inside = 0  # threads in imagine() at once, waiting ones included
        self.entered = threading.Event()  # a rollout has started
        self.release = threading.Event()

    def imagine(self, group, episode, camera, start, horizon):
        self.inside += 1
        self.most_inside = max(self.most_inside, self.inside)
        try:
            with self.lock:
                self.entered.set()
                assert self.release.wait(timeout=60), "the test never released the rollouts"
                self.calls += 1
                return np.full((horizon, 16, 16, 3), 128, np.uint8)
        finally:
            self.inside -= 1


def test_imagine_work_is_bounded(tmp_path):
    run = _run(tmp_path)
    (run / "world_model").mkdir()
    provider = SlowImagination()
    settings = DashboardSettings(token=TOKEN, max_imagine_waiting=4)
    with BackgroundServer(create_app(run, settings, imagine=provider)) as srv:
        limits = httpx.Limits(max_connections=100)
        with (
            httpx.Client(base_url=srv.url, timeout=30, limits=limits) as c,
            httpx.Client(base_url=srv.url, timeout=3) as probe,
        ):
            assert probe.get("/api/run").status_code == 200
            with concurrent.futures.ThreadPoolExecutor(60) as pool:
                futs = [
                    pool.submit(c.get, "/api/episodes/demo/0/imagine/front", params={"horizon": 4}) for _ in range(60)
                ]
                try:
                    assert provider.entered.wait(timeout=30), "no imagine request reached the provider"
                    # while the one rollout is held, 4 more wait and the other 55 are answered 429 at once
                    deadline = time.monotonic() + 30
                    while (n := sum(f.done() for f in futs)) < 55:
                        assert time.monotonic() < deadline, f"only {n} of 60 imagine requests answered in 30 s"
                        time.sleep(0.02)
                    # the rest of the API answers while a rollout holds its thread and others wait
                    assert probe.get("/api/run").status_code == 200
                    assert provider.calls == 0 and provider.inside == 1
                finally:
                    provider.release.set()
                answers = [f.result() for f in futs]
    codes = [r.status_code for r in answers]
    # one rollout at a time holds a thread; a few wait without one; the rest are told to retry
    assert codes.count(200) == 5 and codes.count(429) == 55, codes
    assert provider.most_inside == 1
    busy = next(r for r in answers if r.status_code == 429)
    assert busy.headers["retry-after"] == "1" and "imagine" in busy.json()["detail"]
    assert provider.calls == codes.count(200)


# -- cached report summaries ---------------------------------------------------------------------


def test_report_summaries_are_parsed_once_per_change(tmp_path):
    from services.dashboard.artifacts import CACHE

    run = _run(tmp_path)
    report = run / "reports" / "eval_v2.json"
    key = str(report)
    with _serve(run, refresh_interval_s=0.05) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        with c.stream("GET", "/api/stream") as s:  # a listener: the live overview is built every tick
            assert s.status_code == 200
            assert c.get("/api/run").json()["reports"] == 1
            first = CACHE.parses[key]
            assert first >= 1
            for _ in range(10):
                c.get("/api/run")
                c.get("/api/policies")
            time.sleep(0.3)  # several live ticks
            assert CACHE.parses[key] == first
            report.write_text('{"kind": "changed", "policies": [{"policy": "v9", "success_rate": 0.5}]}')
            assert c.get("/api/reports").json()[0]["summary"] == {"kind": "changed"}
            rows = [r for r in c.get("/api/policies").json()["comparison"] if r["source"] == "report/eval_v2.json"]
            assert [r["policy"] for r in rows] == ["v9"]
            assert CACHE.parses[key] == first + 1


# -- schema --------------------------------------------------------------------------------------


def test_control_bodies_are_strict_and_the_schema_states_the_limits(tmp_path):
    run = _run(tmp_path)
    with _serve(run, max_sheet_frames=8, max_video_fps=30) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        for body in (
            {"group": "demo", "episode": False, "success": True},
            {"group": "demo", "episode": 0.0, "success": True},
            {"group": "demo", "episode": "0", "success": True},
            {"group": "demo", "episode": 0, "success": 1},
            {"group": "demo", "episode": 0, "success": "true"},
        ):
            r = c.post("/api/control/label", json=body, headers=AUTH)
            assert r.status_code == 422, (body, r.text)
        assert (
            c.post(
                "/api/control/label", json={"group": "demo", "episode": 0, "success": True}, headers=AUTH
            ).status_code
            == 202
        )
        schema = c.get("/openapi.json").json()
        params = {
            (path, p["name"]): p["schema"]
            for path, ops in schema["paths"].items()
            for p in ops.get("get", {}).get("parameters", [])
        }
        count = params[("/api/episodes/{group}/{episode}/sheet/{camera}", "count")]
        assert [s.get("maximum") for s in count["anyOf"] if s.get("type") == "integer"] == [8]
        assert params[("/api/episodes/{group}/{episode}/video/{camera}", "fps")]["maximum"] == 30
        steps = schema["paths"]["/api/episodes/{group}/{episode}/steps"]["get"]["description"]
        assert "At most 4096 steps per request" in steps
        label = schema["components"]["schemas"]["LabelBody"]["properties"]
        assert label["episode"]["type"] == "integer" and label["episode"]["maximum"] == 2**53
        assert label["success"]["type"] == "boolean"
        assert "429" in schema["paths"]["/api/control/pause"]["post"]["responses"]


# -- /docs ---------------------------------------------------------------------------------------


def test_docs_load_their_assets_from_this_origin(tmp_path):
    run = _run(tmp_path)
    with _serve(run) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        r = c.get("/docs")
        assert r.status_code == 200 and "default-src 'self'" in r.headers["content-security-policy"]
        refs = re.findall(r'(?:src|href)="([^"]+)"', r.text)
        assert len(refs) == 3 and all(u.startswith("/") and not u.startswith("//") for u in refs), refs
        assert "<script>" not in r.text  # no inline code, which the CSP would block
        for u in refs:
            got = c.get(u)
            assert got.status_code == 200 and len(got.content) > 100, u


def test_docs_render_in_a_browser_without_a_csp_error(tmp_path, browser):
    run = _run(tmp_path)
    with _serve(run) as srv:
        pg = browser.new_page()
        errors, foreign = [], []
        pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.on("request", lambda q: foreign.append(q.url) if not q.url.startswith(srv.url) else None)
        pg.goto(srv.url + "/docs")
        pg.wait_for_function("() => document.querySelectorAll('.opblock').length >= 15", timeout=30_000)
        assert "/api/control/pause" in pg.inner_text("#swagger-ui")
        assert not errors and not foreign, (errors, foreign)
        pg.close()


# -- run-scoped image caching --------------------------------------------------------------------


def test_images_are_cached_per_run(tmp_path):
    run_a = _run(tmp_path, "a", size=16)
    run_b = _run(tmp_path, "b", size=24)  # the same episode ids, other frames
    port = free_port()
    frame = "/api/episodes/demo/0/frames/front/3"
    with _serve(run_a, port=port) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        run_id = c.get("/api/run").json()["run_id"]
        r = c.get(frame)
        etag_a, body_a = r.headers["etag"], r.content
        assert r.headers["cache-control"] == "private, no-cache" and run_id in etag_a
        same = c.get(frame, headers={"If-None-Match": etag_a})
        assert same.status_code == 304 and same.content == b"" and same.headers["etag"] == etag_a
        named = c.get(frame, params={"run": run_id})
        assert named.headers["cache-control"] == "private, max-age=86400, immutable" and named.content == body_a
        assert c.get(frame, params={"run": "0" * 16}).headers["cache-control"] == "private, no-cache"
        sheet = c.get("/api/episodes/demo/0/sheet/front", params={"run": run_id})
        assert sheet.headers["etag"] != etag_a and "immutable" in sheet.headers["cache-control"]
    with _serve(run_b, port=port) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        assert c.get("/api/run").json()["run_id"] != run_id
        r = c.get(frame, headers={"If-None-Match": etag_a})  # run A's validator does not match run B's frame
        assert r.status_code == 200 and r.headers["etag"] != etag_a and r.content != body_a


def test_a_browser_never_shows_the_previous_runs_frames(tmp_path, browser):
    """Chromium fetches a frame from run A, then from run B served on the same port: it must get B's."""
    run_a, run_b = _run(tmp_path, "a", size=16), _run(tmp_path, "b", size=24)
    port = free_port()
    fetch = """async (url) => { const r = await fetch(url); const b = new Uint8Array(await r.arrayBuffer());
                 return [r.status, b.length, Array.from(b.slice(0, 64)).join(',')]; }"""
    url = "/api/episodes/demo/0/frames/front/3"
    pg = browser.new_page()
    with _serve(run_a, port=port) as srv:
        pg.goto(srv.url + "/api/health")
        first = pg.evaluate(fetch, url)
        assert pg.evaluate(fetch, url) == first  # from the cache or revalidated: the same frame
    with _serve(run_b, port=port) as srv:
        pg.goto(srv.url + "/api/health")
        second = pg.evaluate(fetch, url)
    pg.close()
    assert first[0] == second[0] == 200 and second != first, (first[1], second[1])
