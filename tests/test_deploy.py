"""No Docker engine runs here: docker-compose.yml and the image are checked without one.

The compose file against the Compose specification's JSON schema (compose-spec.json as vendored by
the check-jsonschema package, from github.com/compose-spec/compose-spec, Apache-2.0; pinned in the
test extra), then what the schema cannot say: the services the deployment needs, loopback-only
ports, one shared run volume, health checks, the token, `.env.example` naming every variable, and
every command and option named in it parsed by the real command-line programs of the images
(tests/deploy/commands.py). The health checks' own programs are run for real where they can be.
"""

from __future__ import annotations

import importlib.resources
import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.deploy.commands import check_command, check_script_commands

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
MAIN_IMAGE = "deploy/Dockerfile"
BRIDGE_IMAGE = "deploy/bridge/Dockerfile"
VAR = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)(?::?[-?]([^}]*))?\}")


def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def interpolate(value: str) -> str:
    """Compose's ${VAR:-default} with the defaults (what an empty .env gives)."""
    return VAR.sub(lambda m: m.group(2) if m.group(2) is not None else "", value)


def dockerfile(svc: dict) -> str:
    return svc["build"]["dockerfile"]


def argv(svc: dict) -> list[str]:
    """The command line a service runs: its entrypoint, or the image's, then its command."""
    if "entrypoint" in svc:
        return [interpolate(a) for a in svc["entrypoint"]] + [interpolate(a) for a in svc.get("command", [])]
    image = {MAIN_IMAGE: ["worldsample"], BRIDGE_IMAGE: ["robot_bridge"]}[dockerfile(svc)]
    return image + [interpolate(a) for a in svc["command"]]


def test_compose_file_follows_the_compose_specification():
    schema = json.loads(
        (importlib.resources.files("check_jsonschema") / "builtin_schemas/vendor/compose-spec.json").read_text()
    )
    validator = jsonschema.Draft202012Validator(schema)
    problems = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(compose())]
    assert problems == []
    # and the schema does catch mistakes: a misspelt key and a wrong type
    bad = compose()
    bad["services"]["trainer"]["healthcheck"]["retry"] = 3
    bad["services"]["ray-gpu-worker"]["deploy"]["resources"]["reservations"]["devices"][0]["count"] = [1]
    assert len(list(validator.iter_errors(bad))) >= 2


def test_compose_has_the_deployment_services():
    services = compose()["services"]
    assert {"ray-head", "ray-gpu-worker", "trainer", "dashboard", "bridge"} <= set(services)
    for name, svc in services.items():
        assert (ROOT / svc["build"]["context"] / dockerfile(svc)).is_file(), name
        for port in svc.get("ports", []):
            assert interpolate(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"
        if "profiles" not in svc:
            assert svc["healthcheck"]["test"][0] == "CMD", f"{name} has no health check"
    # a GPU reserved for the GPU worker
    devices = services["ray-gpu-worker"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]
    # the bridge: the ROS 2 Jazzy image, on the host's network for DDS discovery
    bridge = services["bridge"]
    assert bridge["network_mode"] == "host"
    lines = [x for x in (ROOT / dockerfile(bridge)).read_text().splitlines() if x.strip() and not x.startswith("#")]
    assert lines[0] == "FROM ros:jazzy"
    # one run directory for all: the shared volume at /runs
    for name in ("ray-head", "ray-gpu-worker", "trainer", "dashboard", "bridge"):
        assert "runs:/runs" in services[name]["volumes"], name
    assert "runs" in compose()["volumes"]
    # Ray's token: required (compose refuses to start without it) and given to every Ray node and driver
    for name in ("ray-head", "ray-gpu-worker", "trainer"):
        env = services[name]["environment"]
        assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN"].startswith("${RAY_AUTH_TOKEN:?"), name


def test_env_example_names_every_variable_the_compose_file_reads():
    used = set(VAR.findall(COMPOSE.read_text()))
    names = {name for name, _ in used}
    example = ROOT / ".env.example"
    given = {line.split("=", 1)[0] for line in example.read_text().splitlines() if "=" in line and line[0] != "#"}
    assert names <= given, f".env.example lacks {sorted(names - given)}"
    # the example holds no secret: the token is left empty
    assert re.search(r"^RAY_AUTH_TOKEN=$", example.read_text(), re.M)


def test_every_command_in_the_compose_file_is_one_the_cli_accepts():
    services = compose()["services"]
    named = {
        name: check_command(argv(svc))
        for name, svc in services.items()
        if svc.get("entrypoint", ["x"])[0] != "/app/deploy/trainer.sh"
    }
    assert named == {
        "ray-head": "ray start",
        "ray-gpu-worker": "ray start",
        "dashboard": "worldsample dashboard",
        "bridge": "robot_bridge bridge",
        "sim-robot": "worldsample sim-robot",
    }
    # the checker does fail on a command or an option that does not exist
    with pytest.raises(AssertionError, match="no command"):
        check_command(["worldsample", "trian", "/runs/main"])
    with pytest.raises(AssertionError, match="--gpus"):
        check_command(["worldsample", "train", "/runs/main", "--gpus", "on"])
    with pytest.raises(AssertionError):
        check_command(["ray", "start", "--head", "--num-gpu=1"])


def test_the_trainer_entry_script_runs_commands_the_cli_accepts():
    svc = compose()["services"]["trainer"]
    assert svc["entrypoint"] == ["/app/deploy/trainer.sh"]
    env = {k: interpolate(str(v)) for k, v in svc["environment"].items()}
    env["WS_TRAIN_ARGS"] = "--place world_model=wm_node --set loop.real_steps=20000"  # what .env.example shows
    fresh, again = check_script_commands(ROOT / "deploy" / "trainer.sh", env)
    assert [c[:2] for c in fresh] == [["ray", "start"], ["worldsample", "demos"], ["worldsample", "train"]]
    assert fresh[0][fresh[0].index("start") + 1] == "--address=ray-head:6379"  # joins the cluster as a node
    train = fresh[-1]
    assert train[train.index("--address") + 1] == "ray-head:6379" and train[train.index("--robot") + 1] == "bridge"
    assert [c[:2] for c in again] == [["ray", "start"], ["worldsample", "train"]] and "--resume" in again[1]


def test_health_checks_name_real_programs():
    services = compose()["services"]
    head = services["ray-head"]["healthcheck"]["test"][1:]
    assert check_command(head) == "ray health-check"  # run against a real head in tests/deploy/test_multinode.py
    worker = services["ray-gpu-worker"]["healthcheck"]["test"]
    compile(worker[3], "healthcheck", "exec")
    # the dashboard's probe asks for a route the app serves without a token
    probe = services["dashboard"]["healthcheck"]["test"][3]
    compile(probe, "healthcheck", "exec")
    from services.dashboard.routes.run import router

    path = re.search(r"http://127\.0\.0\.1:8765(/[^']+)'", probe).group(1)
    assert path in {r.path for r in router.routes}
    assert argv(services["dashboard"])[argv(services["dashboard"]).index("--port") + 1] == "8765"
    trainer = [interpolate(a) for a in services["trainer"]["healthcheck"]["test"][1:]]
    assert trainer[:3] == ["python", "-m", "services.trainer.health"]


def test_trainer_health_check_reads_the_drivers_heartbeat(tmp_path):
    cmd = [sys.executable, "-m", "services.trainer.health", str(tmp_path)]

    def run(*extra):
        res = subprocess.run([*cmd, *extra], cwd=ROOT, capture_output=True, text=True, timeout=60)
        return res.returncode, res.stdout.strip()

    assert run() == (1, f"unhealthy: no {tmp_path / 'nodes.json'} yet: the trainer has not started its parts")
    import time

    (tmp_path / "nodes.json").write_text(json.dumps({"updated": time.time(), "running": True, "parts": {}}))
    assert run() == (0, "healthy")
    (tmp_path / "nodes.json").write_text(json.dumps({"updated": time.time() - 120, "running": True}))
    code, out = run("--max-age-s", "90")
    assert code == 1 and "s old" in out
    (tmp_path / "nodes.json").write_text(json.dumps({"updated": time.time(), "running": False}))
    assert run()[0] == 1


def test_bridge_health_check_reads_the_bridges_heartbeat(tmp_path):
    from worldsample.runlog import StatusFile

    script = ROOT / "deploy" / "bridge" / "healthcheck.py"
    assert "deploy/bridge/healthcheck.py" in (ROOT / BRIDGE_IMAGE).read_text()  # copied into the image

    def run():
        res = subprocess.run(
            [sys.executable, str(script), str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        return res.returncode, res.stdout.strip()

    assert run()[0] == 1  # no status yet
    StatusFile(tmp_path).heartbeat("bridge", detail="episode state idle")  # what robot_bridge/run_link.py writes
    assert run() == (0, "healthy")
    StatusFile(tmp_path).heartbeat("bridge", state="stopped")
    assert run()[0] == 1


def test_dockerfile_installs_the_package_and_headless_gl():
    text = (ROOT / MAIN_IMAGE).read_text()
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert lines[0].startswith("FROM python:3.11")
    assert "libegl1" in text and "MUJOCO_GL=egl" in text
    assert any(line.startswith("ENTRYPOINT") and "worldsample" in line for line in lines)
    # every package the project installs is copied in first (the `worldsample` command lives in services/)
    copied = {line.split()[1].rstrip("/") for line in lines if line.startswith("COPY")}
    for src in copied:
        assert (ROOT / src).exists(), src
    pyproject = (ROOT / "pyproject.toml").read_text()
    packages = re.search(r"include = \[([^\]]*)\]", pyproject).group(1)
    for pkg in re.findall(r'"(\w+)\*"', packages):
        assert pkg in copied, f"the image does not copy {pkg}/, which `pip install .` installs"
    assert "deploy/trainer.sh" in copied and "configs" in copied
    # the extra ray[default] is the same version as the project's pin
    pin = re.search(r'"ray\[rllib\]==([0-9.]+)"', pyproject).group(1)
    assert f'"ray[default]=={pin}"' in text
