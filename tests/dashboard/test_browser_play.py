"""Play in the world model, in headless Chromium: from the player's episode and step, a key and a
slider each drive one step of the run's real world model, the predicted frame is drawn, reset
returns to the real start, and the page logs no console error."""

from __future__ import annotations

import httpx

from tests.dashboard.chromium import launch
from tests.dashboard.test_play import play_run, serve

PIXELS = "() => document.querySelector('#play-frame').toDataURL()"


def _step_is(pg, n: int) -> None:
    pg.wait_for_function(f"() => document.querySelector('#play-panel').dataset.step === '{n}'", timeout=15_000)


def test_play_drives_the_world_model_from_the_player(tmp_path):
    run = play_run(tmp_path / "run", episodes=2, length=20, size=16)
    with serve(run) as srv, launch() as browser:  # the browser closes before the server stops
        pg = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        pg.goto(srv.url + "/#episodes")
        pg.click('#episodes-table tr[data-group="demo"][data-episode="0"]')
        pg.wait_for_function(
            "() => { const w = [...document.querySelectorAll('.view:not(.imagined) .where')];"
            " return w.length === 2 && w.every(e => e.textContent === 't 0'); }",
            timeout=15_000,
        )
        for _ in range(5):
            pg.click("#step-fwd")
        assert pg.inner_text("#step-label") == "t 5 / 19"
        pg.click("#play-open")  # the real start: the episode in the player at its current step
        _step_is(pg, 0)
        assert pg.inner_text("#play-caption") == "real start · demo/0 t 5"
        assert pg.eval_on_selector_all("#play-sliders input[type=range]", "els => els.length") == 4
        start = pg.evaluate(PIXELS)
        pg.click("#play-frame")  # focus off the buttons; keys drive the arm
        pg.keyboard.press("d")  # the first action dimension at its upper bound
        _step_is(pg, 1)
        first = pg.evaluate(PIXELS)
        assert first != start
        readout = pg.inner_text("#play-readout")
        assert "reward" in readout and "success" in readout and "action [1.00, 0.00, 0.00, 0.00]" in readout
        # a slider, then Step
        pg.eval_on_selector(
            '#play-sliders input[data-dim="1"]', "el => { el.value = '-1'; el.dispatchEvent(new Event('input')); }"
        )
        pg.click("#play-step")
        _step_is(pg, 2)
        assert pg.evaluate(PIXELS) not in (start, first)
        assert "action [1.00, -1.00, 0.00, 0.00]" in pg.inner_text("#play-readout")
        # reset: the real start again, and the same key gives the same frame as before
        pg.click("#play-reset")
        _step_is(pg, 0)
        assert pg.evaluate(PIXELS) == start
        pg.click("#play-frame")
        pg.keyboard.press("d")
        _step_is(pg, 1)
        assert pg.evaluate(PIXELS) == first
        shot = tmp_path / "dashboard-play.png"  # never into the checkout
        pg.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 0
        session = pg.get_attribute("#play-panel", "data-session")
        pg.click("#play-close")  # closes the server's session
        pg.wait_for_selector("#play-panel", state="hidden")
        r = httpx.post(f"{srv.url}/api/play/{session}/step", json={"action": [0, 0, 0, 0]}, timeout=10)
        assert r.status_code == 404
    assert not errors, errors
