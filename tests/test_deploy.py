"""No Docker engine runs here: the deploy files are checked by parsing them."""

from pathlib import Path

import yaml
from typer.testing import CliRunner

from services.cli.main import app

ROOT = Path(__file__).resolve().parents[1]


def test_compose_services_build_from_existing_dockerfile_and_run_real_commands():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"ray-head", "worldsample"} <= set(services)
    for name, svc in services.items():
        dockerfile = ROOT / svc["build"]["context"] / svc["build"]["dockerfile"]
        assert dockerfile.exists(), name
        for port in svc.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"
    cmd = services["worldsample"]["command"]
    res = CliRunner().invoke(app, [cmd[0], "--help"])
    assert res.exit_code == 0, res.output


def test_dockerfile_installs_the_package_and_headless_gl():
    text = (ROOT / "deploy" / "Dockerfile").read_text()
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert lines[0].startswith("FROM python:3.11")
    assert "libegl1" in text and "MUJOCO_GL=egl" in text
    assert any(line.startswith("ENTRYPOINT") and "worldsample" in line for line in lines)
