"""`python -m robot_bridge`: the robot-PC entry point, and what the robot side may import."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def robot_bridge(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "robot_bridge", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def test_help_lists_the_robot_commands():
    res = robot_bridge("--help")
    assert res.returncode == 0, res.stderr
    assert "python -m robot_bridge" in res.stdout
    for cmd in ("bridge", "sim-robot", "bag"):
        assert cmd in res.stdout


def test_bridge_help_shows_its_options():
    res = robot_bridge("bridge", "--help")
    assert res.returncode == 0, res.stderr
    for opt in ("--profile", "--run", "--transport", "--domain-id", "--loopback"):
        assert opt in res.stdout


def test_a_bad_profile_is_reported_and_exits_2(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("name: x\ncontrol_rate_hz: -1\n")
    res = robot_bridge("bridge", "-p", str(bad), "--run", str(tmp_path / "r"), "--duration", "1")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "control_rate_hz" in res.stderr and "Traceback" not in res.stderr


def test_the_robot_side_loads_no_services_no_simulator_and_no_learner():
    code = (
        "import sys, robot_bridge.__main__, robot_bridge.cli, robot_bridge.bridge, robot_bridge.bag\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('services', 'mujoco', 'torch', 'ray')\n"
        "       or m in ('worldsample.sim', 'robot_bridge.sim_robot') or m.startswith('worldsample.sim.')]\n"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120)
