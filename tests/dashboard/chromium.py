"""Headless Chromium for the dashboard's browser tests: Debian's chromium, driven by Playwright.

`launch()` opens one browser (conftest.py's `browser` fixture is one per test module); `Page` is a
fresh tab in it that records console errors. CI installs both (Makefile system-deps, the test
extra): there a missing one is a failure; elsewhere the test that needs it is skipped."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI") == "true"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
TOKEN_KEY = "worldsample-dashboard-token"  # where the page keeps the token (sessionStorage)


@contextmanager
def launch() -> Iterator:
    """A Playwright browser on CHROMIUM, closed on exit; skips the test where either is missing (not in CI)."""
    try:
        from playwright import sync_api
    except ImportError:
        if IN_CI:
            raise
        pytest.skip("pip install playwright")
    if not Path(CHROMIUM).exists() and not IN_CI:
        pytest.skip("apt-get install chromium")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


class Page:
    """A fresh tab (own sessionStorage and localStorage) that records console errors; `token` is
    set in its sessionStorage and `init` run before the page's own scripts."""

    def __init__(self, browser, width=1600, height=1000, token=None, init=None):
        self.ctx = browser.new_context(viewport={"width": width, "height": height})
        if token:
            self.ctx.add_init_script(f"sessionStorage.setItem({json.dumps(TOKEN_KEY)}, {json.dumps(token)})")
        if init:
            self.ctx.add_init_script(init)
        self.pg = self.ctx.new_page()
        self.errors: list[str] = []
        self.pg.on("pageerror", lambda e: self.errors.append(str(e)))
        self.pg.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.ctx.close()

    def unexpected(self, *expected_status: int) -> list[str]:
        """Console errors other than Chromium's note of an expected answer ("status of 410")."""
        return [e for e in self.errors if not any(f"status of {s}" in e for s in expected_status)]
