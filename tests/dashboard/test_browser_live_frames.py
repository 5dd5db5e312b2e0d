"""The robot panel in headless Chromium with the bridge's live frames (RUN/live/, written here as the
bridge writes them): without any it shows the newest stored episode and says the bridge writes none;
while they are fresh it shows them, says so and refreshes them about twice a second; once they are
stale it falls back to the newest stored episode and says why."""

from __future__ import annotations

import threading
import time

import httpx
import numpy as np

from services.dashboard import create_app
from services.dashboard.server import BackgroundServer
from tests.dashboard.chromium import Page
from tests.dashboard.rundata import make_run
from tests.dashboard.test_browser_panels import _settings
from tests.dashboard.test_live_frames import write_live

LIVE = 40  # live frames 40x40, stored ones 24x24: the image's size says which is shown
CAMS = """() => [...document.querySelectorAll('#robot-cams figure.cam')].map(f => {
  const img = f.querySelector('img');
  return {camera: f.dataset.camera, src: img.getAttribute('src'), width: img.complete ? img.naturalWidth : 0,
          caption: f.querySelector('figcaption').textContent, stale: f.dataset.stale};
})"""
RED = """(cam) => {  // the red channel in the middle of a camera's image, as drawn
  const img = document.querySelector(`#robot-cams figure[data-camera="${cam}"] img`);
  const c = document.createElement('canvas');
  c.width = img.naturalWidth; c.height = img.naturalHeight;
  const g = c.getContext('2d');
  g.drawImage(img, 0, 0);
  return g.getImageData(c.width >> 1, c.height >> 1, 1, 1).data[0];
}"""


class Camera:
    """Rewrites both cameras' live frames every 0.2 s (the shade of red moves) until stopped."""

    def __init__(self, run):
        self.run, self.stop, self.shade = run, threading.Event(), 0
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self.stop.is_set():
            self.shade = (self.shade + 37) % 200
            for cam in ("front", "wrist"):
                frame = np.zeros((LIVE, LIVE, 3), np.uint8)
                frame[..., 0] = 40 + self.shade
                write_live(self.run, cam, frame)
            self.stop.wait(0.2)


def test_live_frames_and_the_stored_fallback(browser, tmp_path):
    run = make_run(tmp_path / "run", episodes=2, length=16, size=24, metric_rows=10)
    cam = Camera(run)
    try:
        with BackgroundServer(create_app(run, _settings(live_frame_stale_s=2.0))) as srv, Page(browser) as t:
            run_id = httpx.get(srv.url + "/api/run").json()["run_id"]
            t.pg.goto(srv.url + "/#robot")
            # no live frames yet: the newest stored episode, and the note says the bridge writes none
            t.pg.wait_for_selector('#robot-cams[data-source="stored"]', timeout=10_000)
            assert "writes no live frames" in t.pg.inner_text("#robot-cam-note")
            cam.thread.start()  # the bridge starts writing
            t.pg.wait_for_selector('#robot-cams[data-source="live"]', timeout=10_000)
            t.pg.wait_for_function(f"() => ({CAMS})().length === 2 && ({CAMS})().every(c => c.width === {LIVE})",
                                   timeout=10_000)
            shown = t.pg.evaluate(CAMS)
            assert [c["camera"] for c in shown] == ["front", "wrist"]
            assert all(c["src"].startswith(f"/api/live/frames/{c['camera']}?t=") for c in shown), shown
            assert all(" · live · " in c["caption"] and c["stale"] == "false" for c in shown), shown
            assert "Live frames from the bridge" in t.pg.inner_text("#robot-cam-note")
            # refreshed: new frames (new URLs, another shade drawn) come in while the files change
            first_src, first_red = shown[0]["src"], t.pg.evaluate(RED, "front")
            srcs, reds, deadline = {first_src}, {first_red}, time.monotonic() + 30
            while len(srcs) < 3 or len(reds) < 3:  # wait for two more frames, each with its own URL and shade
                assert time.monotonic() < deadline, f"the live frames did not refresh twice in 30 s: {srcs}, {reds}"
                time.sleep(0.1)
                now = t.pg.evaluate(CAMS)[0]
                if now["width"] == LIVE:
                    srcs.add(now["src"])
                    reds.add(t.pg.evaluate(RED, "front"))
            # the bridge stops: its frames age past 2 s, the panel falls back to the newest stored episode
            cam.stop.set()
            cam.thread.join()
            t.pg.wait_for_selector('#robot-cams[data-source="stored"]', timeout=10_000)
            t.pg.wait_for_function(f"() => ({CAMS})().length === 2 && ({CAMS})().every(c => c.width === 24)",
                                   timeout=10_000)
            shown = t.pg.evaluate(CAMS)
            assert all(c["src"] == f"/api/episodes/real/1/frames/{c['camera']}/16?run={run_id}" for c in shown), shown
            assert all("newest recorded frame" in c["caption"] for c in shown), shown
            note = t.pg.inner_text("#robot-cam-note")
            assert "Recorded frames of the newest stored episode" in note and "live frames are stale" in note, note
            assert "stale after 2 s" in note, note
            # a frame comes in again: live again
            write_live(run, "front", np.full((LIVE, LIVE, 3), 120, np.uint8))
            t.pg.wait_for_selector('#robot-cams[data-source="live"]', timeout=10_000)
            t.pg.wait_for_function(f"() => ({CAMS})().length === 2 && ({CAMS})()[0].width === {LIVE}",
                                   timeout=10_000)
            shown = t.pg.evaluate(CAMS)  # the other camera's frame is still stale: shown, and said so
            assert shown[0]["stale"] == "false" and shown[1]["stale"] == "true" and "stale" in shown[1]["caption"]
            assert not t.errors, t.errors
    finally:
        cam.stop.set()
