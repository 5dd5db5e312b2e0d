"""Auth before validation: every route that takes the token refuses a request without it (401) or
with a wrong one (403) before it reads the body or validates a parameter, so an unauthenticated
client learns nothing about what a route accepts. The routes come from the app's OpenAPI schema
(each operation that declares the bearer scheme), not from a list kept by hand."""

from __future__ import annotations

import httpx
import pytest

from services.dashboard import DashboardSettings, create_app
from services.dashboard.server import BackgroundServer
from tests.dashboard.conftest import TOKEN

# every path parameter: matches each route (no path convertors) and fails the strictest pattern
# (a play session's id), so a route that validated its parameters first would answer 422
ANY = "0"
MALFORMED = {"content": b'{"group": ', "headers": {"Content-Type": "application/json"}}
SCHEMA_INVALID = {"json": {"no such field": [1, 2, 3]}}


@pytest.fixture(scope="module")
def strict(run_dir):
    # read_policy="token": every route with the auth dependency needs the token, reads included
    settings = DashboardSettings(token=TOKEN, read_policy="token", auth_free_failures=10_000)
    with BackgroundServer(create_app(run_dir, settings)) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        yield c


def _operations(client: httpx.Client) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(secured, all) as (METHOD, path with ANY for each parameter)."""
    schema = client.get("/openapi.json").json()
    secured, every = [], []
    for path, item in schema["paths"].items():
        for method, op in item.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            params = {p["name"]: ANY for p in op.get("parameters", []) if p["in"] == "path"}
            entry = (method.upper(), path.format(**params))
            every.append(entry)
            if op.get("security"):
                secured.append(entry)
    return secured, every


def test_every_state_changing_route_is_secured(strict):
    secured, every = _operations(strict)
    writes = {op for op in every if op[0] != "GET"}
    assert writes and writes <= set(secured), sorted(writes - set(secured))
    assert any(m == "GET" for m, _ in secured)  # the reads are in the discovered set too


@pytest.mark.parametrize("body", [MALFORMED, SCHEMA_INVALID], ids=["malformed-json", "schema-invalid"])
def test_auth_is_checked_before_the_body_and_the_parameters(strict, body):
    secured, _ = _operations(strict)
    assert len(secured) >= 20, secured
    wrong = []
    for method, url in secured:
        kw = {**body, "headers": dict(body.get("headers", {}))}
        r = strict.request(method, url, **kw)
        if r.status_code != 401 or "Bearer" not in r.headers.get("www-authenticate", ""):
            wrong.append((method, url, "no token", r.status_code, r.text[:120]))
        kw["headers"]["Authorization"] = "Bearer wrong-token-0123456789"
        r = strict.request(method, url, **kw)
        if r.status_code != 403:
            wrong.append((method, url, "wrong token", r.status_code, r.text[:120]))
        kw["headers"]["Authorization"] = f"Basic {TOKEN}"
        r = strict.request(method, url, **kw)
        if r.status_code != 401:
            wrong.append((method, url, "Basic scheme", r.status_code, r.text[:120]))
    assert not wrong, "\n".join(map(str, wrong))


def test_with_the_token_the_body_is_validated(strict):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    r = strict.post("/api/control/label", content=MALFORMED["content"], headers={**MALFORMED["headers"], **auth})
    assert r.status_code == 422, r.text
    r = strict.post("/api/play", json={"no such field": 1}, headers=auth)
    assert r.status_code == 422, r.text
    r = strict.post(f"/api/play/{ANY}/step", json={"action": [0.0]}, headers=auth)
    assert r.status_code == 422, r.text  # the session id fails its pattern
