"""The page in headless Chromium (Debian's, driven by Playwright): the curves render, an
episode plays, a control goes through the token dialog, and screenshots are saved."""

from __future__ import annotations

import pytest

from tests.dashboard.conftest import TOKEN

# wait_for_function takes arrow functions: a bare expression would need eval, which the page's CSP forbids

# pixels of a canvas close to a colour: proof that the line itself was drawn (not just the axes)
INK = """([sel, r, g, b]) => {
  const c = document.querySelector(sel);
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) {
    if (Math.abs(d[i] - r) + Math.abs(d[i + 1] - g) + Math.abs(d[i + 2] - b) < 60) n++;
  }
  return n;
}"""
AMBER = [255, 181, 71]  # the colour of loss/* curves


@pytest.fixture(scope="module")
def page(server, browser):
    pg = browser.new_page(viewport={"width": 1600, "height": 1000})
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.goto(server.url + "/")
    return pg, errors


def test_curves_render(page, tmp_path):
    pg, errors = page
    pg.wait_for_selector('.chart[data-metric="loss/critic"][data-points]', timeout=10_000)
    assert int(pg.get_attribute('.chart[data-metric="loss/critic"]', "data-points")) > 100
    assert pg.evaluate(INK, ['.chart[data-metric="loss/critic"] canvas', *AMBER]) > 100
    pg.wait_for_selector('.chart[data-store="return"][data-points="12"]', timeout=10_000)
    assert pg.inner_text("#phase").lower() == "training"
    assert "connected" in pg.inner_text("#robot")
    pg.wait_for_selector("#live.on", timeout=10_000)
    pg.screenshot(path=str(tmp_path / "dashboard-run.png"), full_page=True)
    assert not errors, errors


def test_episode_plays(page, tmp_path):
    pg, errors = page
    pg.click('#tabs button[data-tab="episodes"]')
    pg.wait_for_selector("#episodes-table tbody tr[data-group]")
    pg.click('#episodes-table tbody tr[data-group="real"][data-episode="1"]')
    pg.wait_for_function("() => document.querySelector('#player-title').textContent === 'real / 1'")
    pg.wait_for_selector('.view[data-view="cam-wrist"] canvas', timeout=10_000)
    pg.wait_for_function(
        "() => [...document.querySelectorAll('.view .where')].every(e => e.textContent.startsWith('t '))",
        timeout=10_000,
    )
    first = pg.evaluate("() => document.querySelector('.view canvas').toDataURL()")
    pg.select_option("#speed", "40")
    pg.click("#play")
    pg.wait_for_function("() => +document.querySelector('#scrubber').value >= 20", timeout=10_000)
    pg.click("#play")  # pause
    t = int(pg.input_value("#scrubber"))
    assert 20 <= t <= 40
    assert pg.evaluate("() => document.querySelector('.view canvas').toDataURL()") != first
    assert f"t {t} / 40" == pg.inner_text("#step-label")
    assert "action [" in pg.inner_text("#readout")
    pg.keyboard.press("ArrowLeft")
    assert pg.input_value("#scrubber") == str(t - 1)
    pg.screenshot(path=str(tmp_path / "dashboard-episode.png"), full_page=True)
    assert not errors, errors


def test_imagine_says_there_is_no_world_model(page):
    pg, errors = page
    pg.check("#imagine-toggle")
    pg.wait_for_selector(".view.imagined .msg", timeout=10_000)
    assert "no world model checkpoint in RUN" in pg.inner_text(".view.imagined .msg")
    pg.uncheck("#imagine-toggle")
    errors[:] = [e for e in errors if "status of 404" not in e]  # the expected answer, logged by Chromium
    assert not errors, errors


def test_control_asks_for_the_token(page, run_dir, tmp_path):
    pg, errors = page
    before = set((run_dir / "control" / "requests").glob("*.json")) if (run_dir / "control").exists() else set()
    pg.click('button[data-control="pause"]')
    pg.wait_for_selector("#token-dialog[open]")
    pg.fill("#token-input", TOKEN)
    pg.click('#token-dialog button[value="ok"]')
    pg.wait_for_function(
        "() => document.querySelector('#toast').textContent.includes('pause requested')", timeout=10_000
    )
    after = set((run_dir / "control" / "requests").glob("*.json"))
    assert len(after - before) == 1
    pg.click('#tabs button[data-tab="policies"]')
    pg.wait_for_selector("#comparison-table tbody tr td")
    assert "report/eval_v2.json" in pg.inner_text("#comparison-table")
    pg.screenshot(path=str(tmp_path / "dashboard-policies.png"), full_page=True)
    assert not errors, errors
