"""No Docker or ROS here: the bridge's deploy files are checked by parsing them."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
D = ROOT / "deploy" / "bridge"


def test_dockerfile_is_ros_jazzy_with_cyclonedds_and_no_learner_deps():
    text = (D / "Dockerfile").read_text()
    lines = [x for x in text.splitlines() if x.strip() and not x.startswith("#")]
    assert lines[0] == "FROM ros:jazzy"
    assert "ros-jazzy-rmw-cyclonedds-cpp" in text and "RMW_IMPLEMENTATION=rmw_cyclonedds_cpp" in text
    assert "--no-deps ." in text
    installs = " ".join(x for x in lines if "pip install" in x or x.strip().startswith('"'))
    assert "torch" not in installs and "ray" not in installs
    for src in ("worldsample", "robot_bridge", "configs", "deploy/bridge/entrypoint.sh"):
        assert (ROOT / src).exists(), src


def test_dockerfile_pins_the_robot_side_runtime_as_pyproject_does():
    """The image runs pixel policies (onnxruntime), bags (rosbags) and DDS (cyclonedds) at the versions tested here."""
    import re
    import tomllib

    pins = dict(re.match(r"([A-Za-z0-9_.-]+)(?:\[[^]]*\])?==(\S+)", d).groups()
                for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"] if "==" in d)
    text = (D / "Dockerfile").read_text()
    for pkg in ("onnxruntime", "rosbags", "cyclonedds"):
        assert f'"{pkg}=={pins[pkg]}"' in text, pkg


def test_launch_file_runs_the_real_commands():
    tree = ast.parse((D / "bridge.launch.py").read_text())
    assert any(isinstance(n, ast.FunctionDef) and n.name == "generate_launch_description" for n in tree.body)
    text = (D / "bridge.launch.py").read_text()
    from typer.testing import CliRunner

    from robot_bridge.cli import app

    assert '"python3", "-m", "robot_bridge"' in text
    for cmd in ("bridge", "sim-robot"):
        assert f'"{cmd}"' in text
        assert CliRunner().invoke(app, [cmd, "--help"]).exit_code == 0
    assert '"--transport", "rclpy"' in text


def test_image_entrypoint_runs_the_bridge_module():
    lines = (D / "entrypoint.sh").read_text().splitlines()
    assert lines[-1] == 'exec python3 -m robot_bridge "$@"'
