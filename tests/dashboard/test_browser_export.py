"""The player's "Download for Foxglove (.mcap)" link in headless Chromium: it appears for the
selected episode and downloads a file the `mcap` reader reads, without a token and with one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI") == "true"
if not IN_CI:
    pytest.importorskip("playwright.sync_api", reason="pip install playwright")
from playwright import sync_api  # noqa: E402

from tests.dashboard.conftest import TOKEN  # noqa: E402
from tests.dashboard.test_browser import ARGS, CHROMIUM  # noqa: E402
from tests.export.mcapread import read_mcap  # noqa: E402

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists() and not IN_CI, reason="apt-get install chromium")


def test_the_player_links_the_episode_as_mcap(server):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
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
        finally:
            browser.close()
