"""The page in headless Chromium, on the server's newer fields and the panels built on them:
image URLs that name the run, the operator's labels beside the recorded outcome, damaged episodes
shown and a 410 as a per-item message, a 429 shown and retried, the token length checked in the
dialog, the live robot panel (its figures, its alarms, camera stills and the MJPEG replay), the
config view, the curves of the runs beside this one overlaid (with the new endpoints' limits
and symbolic-link refusals), and the Ray cluster table (the node each part of the trainer runs on)."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from services.dashboard import DashboardSettings, create_app
from services.dashboard.server import BackgroundServer
from tests.dashboard.chromium import TOKEN_KEY, Page
from tests.dashboard.conftest import TOKEN
from tests.dashboard.rundata import make_run
from tests.dashboard.test_cluster_view import WORKER, nodes_doc
from tests.dashboard.test_damaged import _chunk
from worldsample.atomic import atomic_write_json
from worldsample.runlog import MetricsWriter
from worldsample.runlog.status import RobotState, ServiceState, StatusFile
from worldsample.store.labels import LabelLog

OLD_RUNS = 40  # more runs beside this one than the listing's limit (32)


class SlowImagination:
    """A world model stand-in: one rollout at a time, 1 s each (long enough to fill the queue)."""

    version = 3

    def __init__(self):
        self.lock = threading.Lock()
        self.inside = 0

    def imagine(self, group, episode, camera, start, horizon):
        self.inside += 1
        try:
            with self.lock:
                time.sleep(1.0)
                return np.full((horizon, 24, 24, 3), 128, np.uint8)
        finally:
            self.inside -= 1


class Side:
    def __init__(self, run: Path, url: str, provider: SlowImagination):
        self.run, self.url, self.provider = run, url, provider


def _settings(**kw) -> DashboardSettings:
    return DashboardSettings(token=TOKEN, refresh_interval_s=0.2, store_refresh_min_s=0.0, **kw)


@pytest.fixture(scope="module")
def side(tmp_path_factory):
    """RUN (run-b) in a folder of runs: run-a beside it with its own curves, a linked run, a run
    whose metrics.jsonl is a link, a folder without metrics, and 40 old runs."""
    parent = tmp_path_factory.mktemp("runs")
    run = make_run(parent / "run-b", episodes=4, length=32, size=24, metric_rows=60)
    # the operator marks real/0 (recorded a success) a failure
    LabelLog(run / "store" / "real").append(0, False, source="dashboard", reason="the cube slipped")
    rec = run / "store" / "real" / "commits" / "000000003.json"
    rec.write_bytes(rec.read_bytes()[:57])  # a truncated commit record: set aside when the store opens
    _chunk(run, "demo", 2, "image_front", 0).write_bytes(b"garbled" * 20)  # found when its frames are read
    (run / "world_model").mkdir()
    (run / "config.yaml").write_text("seed: 7\nloop:\n  rounds: 40\n  utd: 2\n")
    (run / "config_history.jsonl").write_text(
        json.dumps({"time": 1.7e9, "action": "start", "command": "worldsample run", "overrides": []}) + "\n"
        + "not json\n"
        + json.dumps({"time": 1.7e9 + 60, "action": "resume", "command": "worldsample run --resume",
                      "overrides": ["loop.utd=2"], "profile": "sim"}) + "\n"
    )  # fmt: skip
    for i in range(OLD_RUNS):
        old = parent / f"old-{i:02d}"
        old.mkdir()
        (old / "metrics.jsonl").write_text('{"step": 0, "time": 1, "loss/critic": 1}\n')
        os.utime(old / "metrics.jsonl", (1e9, 1e9 + i))
    a = parent / "run-a"
    a.mkdir()
    with MetricsWriter(a) as m:
        for k in range(80):
            m.log(k * 40, {"loss/critic": 4.0 + np.sin(k / 5), "loss/actor": -1.0}, time=time.time() - 4000 + k)
    os.symlink(a, parent / "run-link")
    (parent / "run-c").mkdir()
    os.symlink(a / "metrics.jsonl", parent / "run-c" / "metrics.jsonl")
    (parent / "notes").mkdir()
    provider = SlowImagination()
    with BackgroundServer(create_app(run, _settings(max_imagine_waiting=0), imagine=provider)) as srv:
        yield Side(run, srv.url, provider)


# pixels of a chart's canvas close to a colour (#rrggbb)
INK = """([sel, hex]) => {
  const c = document.querySelector(sel);
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) {
    if (Math.abs(d[i] - r) + Math.abs(d[i + 1] - g) + Math.abs(d[i + 2] - b) < 60) n++;
  }
  return n;
}"""
VIEWS_LOADED = (  # both cameras' views built and showing a frame
    "() => { const w = [...document.querySelectorAll('.view:not(.imagined) .where')];"
    " return w.length === 2 && w.every(e => e.textContent.startsWith('t ')); }"
)


def _open(t: Page, side: Side, group: str, episode: int) -> None:
    t.pg.click(f'#episodes-table tr[data-group="{group}"][data-episode="{episode}"]')
    t.pg.wait_for_function(f"() => document.querySelector('#player-title').textContent === '{group} / {episode}'")


def test_images_name_the_run_labels_and_damaged_episodes(browser, side):
    run_id = httpx.get(side.url + "/api/run").json()["run_id"]
    with Page(browser) as t:
        sheets: list[str] = []
        t.pg.on("request", lambda r: sheets.append(r.url) if "/sheet/" in r.url else None)
        t.pg.goto(side.url + "/#episodes")
        row = '#episodes-table tr[data-group="real"][data-episode="0"]'
        t.pg.wait_for_selector(row)
        # the operator's mark beside the recorded outcome, in the list and in the player
        assert t.pg.get_attribute(f"{row} .label-mark", "data-label") == "false"
        assert t.pg.inner_text(f"{row} .label-mark") == "✗ marked"
        assert t.pg.query_selector('#episodes-table tr[data-group="real"][data-episode="1"] .label-mark') is None
        _open(t, side, "real", 0)
        t.pg.wait_for_function(VIEWS_LOADED, timeout=10_000)
        meta = t.pg.inner_text("#player-meta")
        assert "recorded success" in meta and "operator: failure" in meta, meta
        # every contact sheet is asked for under the run's id (cached for this run only)
        assert sheets and all(f"run={run_id}" in u for u in sheets), sheets
        # a damaged episode (truncated record) is listed apart, marked, with why; opening it says so
        aside = '#damaged-list tr[data-damaged="real/3"]'
        t.pg.wait_for_selector(aside)
        assert "commit record" in t.pg.inner_text(aside)
        assert t.pg.query_selector('#episodes-table tr[data-group="real"][data-episode="3"]') is None
        t.pg.click(aside)
        t.pg.wait_for_selector('#views .msg.damaged[data-status="410"]', timeout=10_000)
        assert "set aside" in t.pg.inner_text("#views .msg.damaged")
        assert t.pg.inner_text("#player-title") == "real / 3 (damaged)"
        # frames found damaged while playing: that camera's view says so, the other one plays
        _open(t, side, "demo", 2)
        t.pg.wait_for_selector('.view[data-view="cam-front"] .msg.damaged', timeout=10_000)
        assert "do not decode" in t.pg.inner_text('.view[data-view="cam-front"] .msg')
        t.pg.wait_for_selector('#damaged-list tr[data-damaged="demo/2"]', timeout=10_000)
        t.pg.wait_for_selector('#groups-table [data-damaged-count]', state="attached")
        _open(t, side, "real", 1)  # the rest of the page goes on
        t.pg.wait_for_function(VIEWS_LOADED, timeout=10_000)
        assert not t.unexpected(410), t.errors


def test_a_full_imagine_queue_is_shown_and_retried(browser, side):
    """The server runs one rollout and queues none (max_imagine_waiting=0): while another client's
    rollout runs, the page's request is answered 429 with Retry-After; it says so and asks again."""
    with Page(browser) as t:
        t.pg.goto(side.url + "/#episodes")
        t.pg.wait_for_selector('#episodes-table tr[data-group="real"][data-episode="1"]')
        _open(t, side, "real", 1)
        t.pg.wait_for_function(VIEWS_LOADED, timeout=10_000)
        holder = threading.Thread(
            target=httpx.get, args=(side.url + "/api/episodes/real/1/imagine/front",), kwargs={"timeout": 30}
        )
        holder.start()
        deadline = time.monotonic() + 5
        while side.provider.inside == 0:
            assert time.monotonic() < deadline, "the other client's rollout did not start"
            time.sleep(0.02)
        t.pg.check("#imagine-toggle")
        t.pg.wait_for_selector('.view.imagined[data-view="imagine-front"][data-retried]', timeout=10_000)
        t.pg.wait_for_function(  # both predictions arrived and are drawn
            "() => { const v = [...document.querySelectorAll('.view.imagined')]; return v.length === 2"
            " && v.every(x => x.querySelector('canvas') && x.querySelector('.where').textContent.startsWith('t ')); }",
            timeout=20_000,
        )
        holder.join()
        assert t.pg.query_selector(".view.imagined .msg") is None
        t.pg.uncheck("#imagine-toggle")
        assert not t.unexpected(429), t.errors


def test_the_token_dialog_checks_the_length(browser, side):
    with Page(browser) as t:
        t.pg.goto(side.url + "/")
        t.pg.click("#token-btn")
        t.pg.fill("#token-input", "short-token")
        t.pg.click('#token-dialog button[value="ok"]')
        t.pg.wait_for_selector("#token-error:not(.hidden)")
        assert "at least 16 characters (this has 11)" in t.pg.inner_text("#token-error")
        assert t.pg.is_visible("#token-dialog")
        assert t.pg.evaluate(f"() => sessionStorage.getItem('{TOKEN_KEY}')") is None
        t.pg.fill("#token-input", TOKEN)
        t.pg.press("#token-input", "Enter")  # Enter saves
        t.pg.wait_for_function("() => document.querySelector('#token-btn').textContent === 'Token ✓'")
        assert not t.pg.is_visible("#token-dialog")
        assert t.pg.evaluate(f"() => sessionStorage.getItem('{TOKEN_KEY}')") == TOKEN
        assert not t.errors, t.errors


def _fig(t: Page, key: str) -> tuple[str, str]:
    sel = f'#robot-figures [data-fig="{key}"]'
    return t.pg.inner_text(f"{sel} span"), t.pg.get_attribute(sel, "title")


SNAP = """() => {
  const img = document.querySelector('#robot-cams img');
  const c = document.createElement('canvas');
  c.width = img.naturalWidth; c.height = img.naturalHeight;
  c.getContext('2d').drawImage(img, 0, 0);
  return c.toDataURL();
}"""


def test_the_robot_panel(browser, side):
    """The bridge's figures, '-' and the field it would need where it publishes none, the alarms
    (stale observations, a stale bridge, this page's live updates stopped), and the newest episode's
    cameras: stills under the run's id, and a replay over the MJPEG endpoint."""
    status = StatusFile(side.run)
    status.heartbeat("bridge", detail="test bridge")
    cause = "no valid frame on /cam/front: 48x48, profile says 32x32"
    robot = RobotState(connected=True, mode="intervened", episode=7, control_hz=50.0, obs_age_s=5.5, transport="dds",
                       jitter_p99_ms=3.25, fault=f"stale:image_front: {cause}", stale_causes={"image_front": cause})
    status.update(lambda s: s.model_copy(update={"robot": robot}))
    app = create_app(side.run, _settings())
    srv = BackgroundServer(app).start()
    try:
        run_id = httpx.get(srv.url + "/api/run").json()["run_id"]
        with Page(browser) as t:
            t.pg.goto(srv.url + "/#robot")
            t.pg.wait_for_function(
                "() => document.querySelector('#robot-figures [data-fig=\"obs-age\"] span')?.textContent === '5.5 s'",
                timeout=10_000,
            )
            assert _fig(t, "intervention")[0] == "human driving"
            assert _fig(t, "mode")[0] == "intervened · episode 7"
            assert _fig(t, "rate")[0] == "50 Hz"
            assert _fig(t, "policy")[0] == "v2"
            assert _fig(t, "robot")[0] == "connected · dds"
            assert _fig(t, "jitter")[0] == "3.25 ms"
            assert _fig(t, "fault")[0] == f"stale:image_front: {cause}"
            value, title = _fig(t, "policy-robot")  # a bridge that does not say which policy it runs
            assert value == "–" and "robot.policy_version" in title and "not published" in title, (value, title)
            t.pg.wait_for_selector('#robot-alarms [data-robot-alarm="obs"]')
            assert "newest is 5.5 s old" in t.pg.inner_text("#robot-alarms")
            # the bridge's fault in its own words; the stale stream's cause is in it, so it is not repeated
            assert cause in t.pg.inner_text('#robot-alarms [data-robot-alarm="fault"]')
            assert not t.pg.query_selector('#robot-alarms [data-robot-alarm="streams"]')
            assert "alarmed" in t.pg.get_attribute("#robot-tab", "class")
            # the newest episode's cameras (real/2: real/3 is damaged): stills named by the run's id
            t.pg.wait_for_function(
                "() => { const i = [...document.querySelectorAll('#robot-cams img')];"
                " return i.length === 2 && i.every(x => x.complete && x.naturalWidth === 24); }",
                timeout=10_000,
            )
            srcs = [e.get_attribute("src") for e in t.pg.query_selector_all("#robot-cams img")]
            assert all("/api/episodes/real/2/frames/" in s and s.endswith(f"/33?run={run_id}") for s in srcs), srcs
            assert "newest is" in t.pg.inner_text("#robot-alarms")
            # replay: one MJPEG stream per camera, whose frames move
            t.pg.wait_for_selector("#live.on", timeout=10_000)
            streams = app.state.ctx.streams.open  # this page's live updates
            t.pg.click("#robot-play")
            deadline = time.monotonic() + 10
            while app.state.ctx.streams.open < streams + 2:
                assert time.monotonic() < deadline, "no MJPEG streams were opened"
                time.sleep(0.05)
            assert all("/video/" in e.get_attribute("src") for e in t.pg.query_selector_all("#robot-cams img"))
            first, moved = t.pg.evaluate(SNAP), False
            deadline = time.monotonic() + 10
            while not moved and time.monotonic() < deadline:
                time.sleep(0.3)
                moved = t.pg.evaluate(SNAP) != first
            assert moved, "the replayed frames did not change"
            t.pg.click("#robot-play")  # stop: the streams close
            deadline = time.monotonic() + 10
            while app.state.ctx.streams.open > streams:
                assert time.monotonic() < deadline, "the MJPEG streams were not closed"
                time.sleep(0.05)
            # a bridge whose heartbeat is a minute old
            status.update(lambda s: s.services.__setitem__("bridge", ServiceState(heartbeat=time.time() - 60)))
            t.pg.wait_for_selector('#robot-alarms [data-robot-alarm="bridge"]', timeout=10_000)
            assert "the bridge is stale" in t.pg.inner_text("#robot-alarms").lower()
            assert not t.errors, t.errors
            # the server goes away: the page's own updates stop, and the panel says its figures are old
            srv.stop()
            t.pg.wait_for_selector('#robot-alarms [data-robot-alarm="live"]', timeout=20_000)
            assert "live updates" in t.pg.inner_text('#robot-alarms [data-robot-alarm="live"]')
    finally:
        srv.stop()


def test_the_config_view(browser, side, tmp_path):
    with Page(browser) as t:
        t.pg.goto(side.url + "/#config")
        t.pg.wait_for_selector("#tab-config[data-history]", timeout=10_000)
        assert "rounds: 40" in t.pg.inner_text("#config-text")
        rows = [r.inner_text() for r in t.pg.query_selector_all("#config-history tbody tr")]
        assert len(rows) == 2 and "resume" in rows[0] and "loop.utd=2" in rows[0] and "start" in rows[1], rows
        assert "1 malformed" in t.pg.inner_text("#config-history-note")
        assert not t.errors, t.errors
    # a config.yaml that is a symbolic link is not followed: said, not served
    linked = tmp_path / "linked"
    linked.mkdir()
    (tmp_path / "elsewhere.yaml").write_text("secret: 1\n")
    os.symlink(tmp_path / "elsewhere.yaml", linked / "config.yaml")
    with BackgroundServer(create_app(linked, _settings())) as srv:
        got = httpx.get(srv.url + "/api/config").json()
    assert got["config"] is None and "symbolic link" in got["config_error"], got


def test_runs_side_by_side(browser, side):
    with httpx.Client(base_url=side.url) as c:
        listing = c.get("/api/runs").json()
        names = [r["name"] for r in listing["runs"]]
        assert listing["current"] == "run-b" and names[0] == "run-a", names
        assert len(names) == listing["limit"] == 32 and listing["truncated"]
        assert not {"run-b", "run-link", "run-c", "notes"} & set(names)
        for bad, code, words in (
            ("run-link", 400, "symbolic link"),
            ("run-c", 400, "symbolic link"),
            ("run-b", 400, "this run"),
            ("nope", 404, "no run"),
        ):
            r = c.get(f"/api/runs/{bad}/series")
            assert r.status_code == code and words in r.json()["detail"], (bad, r.status_code, r.text)
        got = c.get("/api/runs/run-a/series", params={"name": ["loss/critic", "never/logged"], "max_points": 20}).json()
        assert list(got["series"]) == ["loss/critic"] and len(got["series"]["loss/critic"]["step"]) <= 20
        paths = c.get("/openapi.json").json()["paths"]
        assert "At most 32 runs" in paths["/api/runs"]["get"]["description"]
        op = paths["/api/runs/{run}/series"]["get"]
        assert "64 MiB" in op["description"]
        assert {p["name"]: p for p in op["parameters"]}["max_points"]["schema"]["maximum"] == 20000
        assert "1024 KiB" in paths["/api/config"]["get"]["description"]
    with Page(browser) as t:
        t.pg.goto(side.url + "/")
        box = '.chart[data-metric="loss/critic"]'
        t.pg.wait_for_selector(f'{box}[data-drawn="1"]', timeout=10_000)
        t.pg.click("#compare > summary")
        pick = '#compare-list input[data-run="run-a"]'
        t.pg.wait_for_selector(pick)
        color = t.pg.get_attribute(pick, "data-color")
        before = t.pg.evaluate(INK, [f"{box} canvas", color])
        t.pg.check(pick)
        t.pg.wait_for_selector(f'{box}[data-overlays="1"]', timeout=10_000)
        assert "run-a" in t.pg.inner_text(f"{box} .legend") and "this run" in t.pg.inner_text(f"{box} .legend")
        after = t.pg.evaluate(INK, [f"{box} canvas", color])
        assert before < 5 and after > 20, (before, after)
        assert t.pg.get_attribute('.chart[data-metric="wm/psnr"]', "data-overlays") == "0"  # run-a has none
        t.pg.select_option("#x-axis", "time")  # on wall time, run-a is shifted to start with this run
        t.pg.wait_for_selector(f'{box}[data-x="time"][data-overlays="1"]')
        assert t.pg.evaluate(INK, [f"{box} canvas", color]) > 20
        t.pg.uncheck(pick)
        t.pg.wait_for_selector(f'{box}[data-overlays="0"]')
        assert not t.errors, t.errors


def test_the_ray_cluster_table(browser, side):
    """Hidden without RUN/nodes.json; once the trainer writes it, each part's node, its state and
    restarts, with a part not ALIVE and a lost node marked."""
    nodes = side.run / "nodes.json"
    nodes.unlink(missing_ok=True)
    try:
        with Page(browser) as t:
            t.pg.goto(side.url + "/")
            t.pg.wait_for_function("() => document.querySelector('#run-name').textContent === 'run-b'")
            assert t.pg.get_attribute("#cluster-panel", "data-state") == "none"
            assert t.pg.is_hidden("#cluster-panel")
            atomic_write_json(nodes, nodes_doc(time.time(), worker_alive=False, wm_state="RESTARTING"))
            wm = '#cluster-parts tr[data-part="world_model"]'
            t.pg.wait_for_selector(wm, timeout=10_000)
            assert t.pg.is_visible("#cluster-panel")
            assert t.pg.inner_text(f"{wm} td[data-node]").split() == ["gpu-two", "10.0.0.6", "node", "lost"]
            assert t.pg.get_attribute(wm, "data-alive") == "false"
            assert "bad" in t.pg.get_attribute(f'{wm} [data-state="RESTARTING"]', "class")
            assert t.pg.inner_text(f"{wm} td.num") == "1"
            learner = '#cluster-parts tr[data-part="learner"]'
            assert t.pg.inner_text(f"{learner} td[data-node]").split() == ["gpu-box", "10.0.0.5"]
            assert "ok" in t.pg.get_attribute(f'{learner} [data-state="ALIVE"]', "class")
            lost = f'#cluster-nodes tr[data-node-id="{WORKER}"]'
            assert t.pg.get_attribute(lost, "data-alive") == "false" and "lost" in t.pg.inner_text(lost)
            # a torn file: the panel says why and shows no parts
            nodes.write_text('{"nodes": [')
            t.pg.wait_for_selector('#cluster-panel[data-state="error"]', timeout=10_000)
            assert "not valid JSON" in t.pg.inner_text("#cluster-note")
            assert t.pg.query_selector(wm) is None
            # gone again: hidden
            nodes.unlink()
            t.pg.wait_for_selector('#cluster-panel[data-state="none"]', state="attached", timeout=10_000)
            assert t.pg.is_hidden("#cluster-panel")
            assert not t.errors, t.errors
    finally:
        nodes.unlink(missing_ok=True)
