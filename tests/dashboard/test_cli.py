"""`worldsample dashboard RUN` serves with uvicorn in its own process."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import typer
from typer.testing import CliRunner

from services.cli.dashboard_cmd import dashboard
from services.dashboard.server import free_port

# the command is registered in services/cli/main.py; here it runs in an app of its own
SERVE = (
    "import sys, typer; from services.cli.dashboard_cmd import dashboard; "
    "app = typer.Typer(); app.command()(dashboard); app()"
)


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command()(dashboard)
    return app


def test_missing_run_and_bad_policy_are_errors(tmp_path):
    r = CliRunner().invoke(_app(), [str(tmp_path / "nope")])
    assert r.exit_code == 2 and "a run directory" in " ".join(r.output.split())
    r = CliRunner().invoke(_app(), [str(tmp_path), "--read-policy", "everyone"])
    assert r.exit_code == 2 and "read-policy" in " ".join(r.output.split())


def test_serves_a_run(run_dir):
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            SERVE,
            str(run_dir),
            "--port",
            str(port),
            "--token",
            "cli-token-0123456789",
            "--nice",
            "5",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                if httpx.get(url + "/api/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        assert httpx.get(url + "/api/episodes").json()["total"] >= 12
        r = httpx.post(url + "/api/control/resume", json={}, headers={"Authorization": "Bearer cli-token-0123456789"})
        assert r.status_code == 202
    finally:
        proc.terminate()
        out = proc.communicate(timeout=15)[0].decode()
    assert f"http://127.0.0.1:{port}/" in out
