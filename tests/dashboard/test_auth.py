"""Auth: every control endpoint needs the bearer token; never from the query string; the read
policy; the token file."""

from __future__ import annotations

import json
import stat

import httpx
import pytest
from starlette.requests import Request

from services.dashboard import DashboardSettings, create_app
from services.dashboard.auth import TokenGuard, resolve_token
from services.dashboard.errors import Unauthorized
from services.dashboard.server import BackgroundServer
from tests.dashboard.conftest import TOKEN

CONTROLS = {
    "/api/control/pause": {"reason": "test"},
    "/api/control/resume": {},
    "/api/control/estop": {"reason": "test"},
    "/api/control/episode/start": {},
    "/api/control/episode/stop": {},
    "/api/control/label": {"group": "demo", "episode": 1, "success": False},
}


# play in the world model posts with read access, as the imagine view reads: it moves no robot and
# writes nothing into the run (docs/dashboard.md, "Play in the world model")
PLAY = {"/api/play", "/api/play/{session}/step", "/api/play/{session}/reset"}


def test_the_list_covers_every_control_endpoint(server):
    schema = httpx.get(server.url + "/openapi.json").json()
    posts = {p for p, ops in schema["paths"].items() if "post" in ops}
    assert posts == set(CONTROLS) | PLAY


@pytest.mark.parametrize("path", sorted(CONTROLS))
def test_control_needs_the_bearer_token(client, run_dir, path):
    body = CONTROLS[path]
    before = set((run_dir / "control" / "requests").glob("*.json")) if (run_dir / "control").exists() else set()
    r = client.post(path, json=body)
    assert r.status_code == 401 and "Bearer" in r.headers["www-authenticate"]
    assert client.post(path, json=body, headers={"Authorization": "Bearer wrong-token"}).status_code == 403
    assert client.post(path, json=body, headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
    # a token in the query string is refused even with a good header, whatever the name
    for params in ({"token": TOKEN}, {"access_token": "x"}, {"t": TOKEN}):
        r = client.post(path, json=body, params=params, headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 400 and r.json()["error"] == "TokenInQuery"
    after = set((run_dir / "control" / "requests").glob("*.json")) if (run_dir / "control").exists() else set()
    assert after == before  # nothing was written by refused requests
    r = client.post(path, json=body, headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 202, r.text
    cmd = r.json()
    files = list((run_dir / "control" / "requests").glob(f"*-{cmd['id']}.json"))
    assert len(files) == 1 and files[0].resolve().is_relative_to(run_dir.resolve())
    assert json.loads(files[0].read_text())["kind"] == cmd["kind"]


def test_control_history_shows_requests(client, auth):
    client.post("/api/control/pause", json={"reason": "history probe"}, headers=auth)
    hist = client.get("/api/control/history", params={"limit": 3}).json()
    assert hist[0]["kind"] == "pause" and hist[0]["reason"] == "history probe" and hist[0]["acks"] == []


def test_token_in_query_refused_on_reads_too(client):
    r = client.get("/api/run", params={"token": "anything"})
    assert r.status_code == 400 and "never accepted in the query string" in r.json()["detail"]


def test_token_file_generated_0600_and_reused(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    t1 = resolve_token(run, DashboardSettings())
    path = run / "dashboard_token"
    assert len(t1) >= 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert resolve_token(run, DashboardSettings()) == t1
    path.chmod(0o644)
    assert resolve_token(run, DashboardSettings()) == t1 and stat.S_IMODE(path.stat().st_mode) == 0o600
    other = tmp_path / "run2"
    other.mkdir()
    assert resolve_token(other, DashboardSettings(token="configured-token-123456")) == "configured-token-123456"
    assert not (other / "dashboard_token").exists()


def _request(host: str, headers: dict[str, str] | None = None) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    return Request(
        {"type": "http", "method": "GET", "path": "/", "headers": raw, "client": (host, 5000), "query_string": b""}
    )


def test_read_policies():
    good = {"Authorization": f"Bearer {TOKEN}"}
    loop = TokenGuard(TOKEN, DashboardSettings(read_policy="loopback"))
    loop.read(_request("127.0.0.1"))
    loop.read(_request("::1"))
    with pytest.raises(Unauthorized):
        loop.read(_request("192.0.2.7"))
    loop.read(_request("192.0.2.7", good))
    TokenGuard(TOKEN, DashboardSettings(read_policy="open")).read(_request("192.0.2.7"))
    strict = TokenGuard(TOKEN, DashboardSettings(read_policy="token"))
    with pytest.raises(Unauthorized):
        strict.read(_request("127.0.0.1"))
    strict.read(_request("127.0.0.1", good))


def test_token_read_policy_over_http(run_dir):
    settings = DashboardSettings(token=TOKEN, read_policy="token")
    with BackgroundServer(create_app(run_dir, settings)) as srv, httpx.Client(base_url=srv.url) as c:
        assert c.get("/api/run").status_code == 401
        assert c.get("/api/episodes/demo/0/frames/front/0").status_code == 401
        assert c.get("/api/run", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        assert c.get("/").status_code == 200  # the page itself holds no data; it asks for the token
        assert c.get("/api/health").status_code == 200


def test_default_settings_bind_loopback():
    s = DashboardSettings()
    assert s.host == "127.0.0.1" and s.binds_loopback and s.read_policy == "loopback"
    assert not DashboardSettings(host="0.0.0.0").binds_loopback
