"""The `home` reset and the operator's keys, with the bridge in this process and an arm driver
that knows nothing of WorldSample: the bridge drives the arm home through its action topic,
settles, records; keys start, end and e-stop; an unreachable home faults naming it."""

import threading
import time

import numpy as np
import pytest

from robot_bridge.bridge import Bridge
from robot_bridge.errors import ProfileError
from robot_bridge.keys import handle_key
from robot_bridge.profile import load_profile
from robot_bridge.transport.dds import LOOPBACK_XML, DdsTransport
from tests.bridge.arm_rig import Driver, arm_profile
from tests.bridge.helpers import ROOT, new_domain
from worldsample.store import EpisodeStore
from worldsample.store.verify import verify_store

HOME = {"key": "proprio", "pose": [0.0, 0.0, 0.0], "gain": 10.0, "tolerance": 0.02, "settle_s": 0.3}


class InProcess:
    """A Bridge on its own thread over the dds transport, stopped and closed on exit."""

    def __init__(self, profile, run, domain: int):
        self.transport = DdsTransport(domain, LOOPBACK_XML)
        self.bridge = Bridge(profile, run, self.transport)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.bridge.run, args=(self.stop,), daemon=True)
        self.thread.start()

    def wait(self, pred, timeout: float, what: str) -> dict:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            st = self.bridge.last_status
            if st and pred(st):
                return st
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; last status {self.bridge.last_status}")

    def close(self) -> None:
        self.stop.set()
        self.thread.join(20)
        self.transport.close()


def rig(tmp_path, start: float, **home):
    domain = new_domain()
    profile = load_profile(arm_profile(tmp_path, reset={"strategy": "home", "home": HOME | home},
                                       episode={"max_steps": 200, "reset_timeout_s": 3, "chunk_len": 8}))
    return Driver(domain, tmp_path / "driver.log", start=start), profile, domain


def test_home_reset_then_keys_record_and_estop(tmp_path):
    run = tmp_path / "run"
    driver, profile, domain = rig(tmp_path, start=0.6)
    with driver:
        b = InProcess(profile, run, domain)
        try:
            ctl = b.bridge.controller
            st = b.wait(lambda s: not s["stale"], 30, "fresh streams")
            assert min(b.bridge.inputs["proprio"].buffer.latest().value) > 0.5  # the arm starts away from home
            assert handle_key(ctl, "s") == "start"
            b.wait(lambda s: s["state"] == "running" and s["step"] >= 5, 15, "home reached and an episode under way")
            assert handle_key(ctl, "y") == "success"
            b.wait(lambda s: s["episodes"]["committed"] == 1 and s["state"] == "ended", 15, "the success")
            assert handle_key(ctl, " ") == "estop"
            st = b.wait(lambda s: s["state"] == "faulted", 5, "the e-stop")
            assert st["fault"] == "estop"
            handle_key(ctl, "s")  # refused while the e-stop is engaged
            st = b.wait(lambda s: s["refused"], 5, "the refusal")
            assert "e-stop" in st["refused"][-1] and st["state"] == "faulted"
            assert handle_key(ctl, "u") == "release_estop" and handle_key(ctl, "c") == "clear_fault"
            b.wait(lambda s: s["state"] == "idle", 5, "the fault to clear")
            assert handle_key(ctl, "?") is None
        finally:
            b.close()
    assert verify_store(run).ok
    reader = EpisodeStore(run).reader("real", cache=False)
    (rec,) = reader.episode_records()
    assert rec.success
    first = reader.episode(0)["proprio"][0]
    assert np.abs(first).max() <= HOME["tolerance"] + 1e-6, first  # the episode starts at home


def test_unreachable_home_faults_naming_it(tmp_path):
    driver, profile, domain = rig(tmp_path, start=0.6, pose=[0.0, 0.0, 2.0])  # the driver clips joints to [-1, 1]
    with driver:
        b = InProcess(profile, tmp_path / "run", domain)
        try:
            b.wait(lambda s: not s["stale"], 30, "fresh streams")
            handle_key(b.bridge.controller, "s")
            st = b.wait(lambda s: s["state"] == "faulted", 15, "the home reset to time out")
            assert st["fault"].startswith("home_timeout: proprio still 1 from home (tolerance 0.02)"), st["fault"]
            assert st["episodes"]["committed"] == 0
        finally:
            b.close()


def test_home_profile_errors_are_clear(tmp_path):
    with pytest.raises(ProfileError, match="needs a reset.home section"):
        load_profile(arm_profile(tmp_path, reset={"strategy": "home"}))
    with pytest.raises(ProfileError, match="out of range"):
        load_profile(arm_profile(tmp_path, reset={"strategy": "home", "home": HOME | {"pose": [0.0] * 4}}))


def test_bringup_example_profile_loads(tmp_path):
    """The worked 7-joint profile in docs/bringup.md is a valid profile with a home reset."""
    text = (ROOT / "docs" / "bringup.md").read_text()
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "arm7.yaml").write_text(block)
    p = load_profile(tmp_path / "arm7.yaml")
    assert [c.name for c in p.cameras] == ["front", "wrist"] and p.joints.dim == 14 and p.action.dim == 7
    assert p.reset.strategy == "home" and len(p.reset.home.pose) == 7 and p.control.success is None
    front = p.cameras[0]
    assert front.geometry.describe() == "640x480 -> crop 480x480 at (80, 0) -> 64x64"
    assert p.cameras[1].geometry.describe() == "640x480 -> 64x64 (aspect ratio x0.75)"
