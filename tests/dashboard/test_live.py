"""Live updates by server-sent events: new metric rows, events and episodes reach the page."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from services.dashboard import DashboardSettings, create_app
from services.dashboard.server import BackgroundServer
from tests.dashboard.rundata import episode, make_run
from worldsample.runlog import EventLog, MetricsWriter
from worldsample.store import EpisodeStore


def _read_events(url: str, want: set[str], found: dict, stop: threading.Event) -> None:
    with httpx.Client(timeout=10) as c, c.stream("GET", url + "/api/stream") as r:
        event = None
        for line in r.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event:
                found.setdefault(event, []).append(json.loads(line[5:]))
            if want <= set(found) or stop.is_set():
                return


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A run of its own: this test appends to it."""
    run_dir = make_run(tmp_path_factory.mktemp("live") / "run", episodes=2, metric_rows=20)
    settings = DashboardSettings(token="live-token-0123456789", refresh_interval_s=0.1, store_refresh_min_s=0.0)
    with BackgroundServer(create_app(run_dir, settings)) as srv:
        yield srv, run_dir


def test_stream_carries_new_rows_events_and_episodes(live):
    server, run_dir = live
    found: dict = {}
    stop = threading.Event()
    want = {"hello", "overview", "metrics", "events", "episodes"}
    t = threading.Thread(target=_read_events, args=(server.url, want, found, stop), daemon=True)
    t.start()
    deadline = time.time() + 5
    while "hello" not in found and time.time() < deadline:
        time.sleep(0.05)
    with MetricsWriter(run_dir) as m:
        m.log(10**6, {"loss/critic": 0.01, "live/probe": float("nan")})
    EventLog(run_dir, source="test").emit("probe", "live probe")
    with EpisodeStore(run_dir).writer("demo") as w:
        w.append_episode(episode(999, 12, 48, success=True))
    t.join(timeout=10)
    stop.set()
    assert want <= set(found), sorted(found)
    rows = [r for m in found["metrics"] for r in m["rows"]]
    assert {"step": 10**6, "loss/critic": 0.01, "live/probe": None}.items() <= rows[-1].items()
    assert any(e["kind"] == "probe" for m in found["events"] for e in m["items"])
    assert found["overview"][-1]["run"] == "run"
