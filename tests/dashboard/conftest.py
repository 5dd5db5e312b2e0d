"""One run directory and one real uvicorn server (in a thread) shared by the dashboard tests, and
headless Chromium for the browser tests (one per test module)."""

from __future__ import annotations

import httpx
import pytest

from services.dashboard import DashboardSettings, create_app
from services.dashboard.server import BackgroundServer
from tests.dashboard.chromium import launch
from tests.dashboard.rundata import make_run

TOKEN = "test-token-0123456789abcdef"


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("dash") / "run")


@pytest.fixture(scope="session")
def server(run_dir):
    settings = DashboardSettings(token=TOKEN, refresh_interval_s=0.2, store_refresh_min_s=0.0)
    with BackgroundServer(create_app(run_dir, settings)) as srv:
        yield srv


@pytest.fixture()
def client(server):
    with httpx.Client(base_url=server.url, timeout=10) as c:
        yield c


@pytest.fixture()
def auth():
    return {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def browser():
    with launch() as b:
        yield b
