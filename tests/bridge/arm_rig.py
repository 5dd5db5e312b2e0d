"""An arm that is not the sim: tests/bridge/arm_driver.py (raw cyclonedds, no project code, no
reset handshake) and a profile written for it the way docs/bringup.md says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from tests.bridge.helpers import ROOT, env_for

DRIVER = ROOT / "tests" / "bridge" / "arm_driver.py"


def arm_profile(tmp_path: Path, image: tuple[int, int] = (32, 32), **sections) -> Path:
    """A 3-joint arm with a front camera, Float64MultiArray deltas on /arm/cmd; no reset section
    unless one is given (then the bridge uses `operator`)."""
    data = {
        "name": "test_arm",
        "control_rate_hz": 20,
        "status_rate_hz": 10,
        "staleness_ms": 500,
        "cameras": [{"name": "front", "topic": "/cam/front", "height": image[1], "width": image[0], "rate_hz": 25}],
        "joints": {"topic": "/arm/joint_states", "names": ["j1", "j2", "j3"], "rate_hz": 50},
        "action": {"topic": "/arm/cmd", "type": "std_msgs/msg/Float64MultiArray", "low": [-1] * 3, "high": [1] * 3},
        "episode": {"max_steps": 200, "reset_timeout_s": 5, "chunk_len": 8},
        **sections,
    }
    path = tmp_path / "arm.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


class Driver:
    """The arm driver as a subprocess on `domain`; terminated on exit."""

    def __init__(self, domain: int, log: Path, image: str = "32x32", start: float = 0.5):
        self.log = log
        self._f = open(log, "wb")
        self.p = subprocess.Popen([sys.executable, str(DRIVER), "--domain", str(domain), "--image", image,
                                   "--start", str(start)], env=env_for(domain), stdout=self._f,
                                  stderr=subprocess.STDOUT, cwd=ROOT)

    def stop(self) -> str:
        if self.p.poll() is None:
            self.p.terminate()
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(5)
        self._f.close()
        return self.log.read_text(errors="replace")

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
