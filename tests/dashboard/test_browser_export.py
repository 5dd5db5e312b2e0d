"""The player's "Download for Foxglove (.mcap)" link in headless Chromium: it appears for the
selected episode and downloads a file the `mcap` reader reads, without a token and with one."""

from __future__ import annotations

from pathlib import Path

from tests.dashboard.conftest import TOKEN
from tests.export.mcapread import read_mcap


def test_the_player_links_the_episode_as_mcap(server, browser):
    pg = browser.new_page(accept_downloads=True)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(server.url + "/")
    pg.click('#tabs button[data-tab="episodes"]')
    pg.wait_for_selector("#episodes-table tbody tr[data-group]")
    pg.click('#episodes-table tbody tr[data-group="real"][data-episode="1"]')
    href = "/api/episodes/real/1/export.mcap"
    pg.wait_for_function("(h) => document.querySelector('#export-mcap').getAttribute('href') === h", arg=href,
                         timeout=10_000)
    assert pg.is_visible("#export-mcap")
    assert pg.inner_text("#export-mcap") == "Download for Foxglove (.mcap)"
    with pg.expect_download(timeout=20_000) as plain:
        pg.click("#export-mcap")
    assert plain.value.suggested_filename == "run-real-1.mcap"
    assert read_mcap(Path(plain.value.path()).read_bytes()).counts["/camera/front"] == 41
    # with a token set (reads may need it) the file is fetched with it and saved from a blob
    pg.evaluate("(t) => sessionStorage.setItem('worldsample-dashboard-token', t)", TOKEN)
    with pg.expect_download(timeout=20_000) as blob:
        pg.click("#export-mcap")
    assert blob.value.suggested_filename == "real-1.mcap"
    assert read_mcap(Path(blob.value.path()).read_bytes()).counts["/action"] == 41
    assert not errors, errors
