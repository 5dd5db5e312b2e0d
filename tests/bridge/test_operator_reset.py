"""The `operator` reset with an arm driver that knows nothing of WorldSample (no handshake):
episodes start and end from the command topic and from bare words on the robot event topic; a
wrong-size camera gives a fault naming it."""

import time

from robot_bridge.codec import String, encode
from robot_bridge.profile import load_profile
from robot_bridge.transport.base import RELIABLE_QOS
from tests.bridge.arm_rig import Driver, arm_profile
from tests.bridge.helpers import Operator, Proc, new_domain
from worldsample.runlog import StatusFile
from worldsample.store import EpisodeStore
from worldsample.store.verify import verify_store


def test_operator_records_success_and_failure_from_the_topic(tmp_path):
    profile = arm_profile(tmp_path)
    assert load_profile(profile).reset.strategy == "operator"  # no reset section
    run, domain = tmp_path / "run", new_domain()
    with Driver(domain, tmp_path / "driver.log") as driver, \
            Proc(["bridge", "--profile", str(profile), "--run", str(run)], domain, tmp_path / "bridge.log") as bridge:
        op = Operator(domain)
        try:
            # a button on the robot side: bare words on the robot event topic
            button = op.t.publisher("/robot/event", "std_msgs/msg/String", RELIABLE_QOS)
            op.wait_ready(60)
            for outcome, send in (("success", op.send), ("failure", lambda w: button(encode(String(w))))):
                send("start")
                op.wait(lambda s: s["state"] == "running" and s["step"] >= 5, 20, "an episode under way")
                send(outcome)
                op.wait(lambda s, o=outcome: s["state"] == "ended" and s["last_outcome"] == o, 20, f"the {outcome}")
            st = op.wait(lambda s: s["episodes"]["committed"] == 2, 20, "both episodes in the store")
            assert st["fault"] is None and st["reset"] == "operator"
            assert bridge.stop() == 0, bridge.output()
        finally:
            op.close()
        out = driver.stop()
    assert "actions applied" in out and not out.startswith("arm_driver: 0 actions"), out
    assert verify_store(run).ok
    records = EpisodeStore(run).reader("real", cache=False).episode_records()
    assert [r.success for r in records] == [True, False]
    assert all(r.length >= 5 for r in records)


def _wait_robot(run, ok, timeout=10.0):
    deadline, robot = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        rs = StatusFile(run).read()
        robot = rs.robot if rs else None
        if robot is not None and ok(robot):
            return robot
        time.sleep(0.1)
    raise AssertionError(f"status.json's robot never matched: {robot}")


def test_wrong_image_size_faults_with_its_cause(tmp_path):
    profile = arm_profile(tmp_path, image=(32, 32), episode={"reset_timeout_s": 1.5})
    run, domain = tmp_path / "run", new_domain()
    cause = "no valid frame on /cam/front: 48x48, profile says 32x32"
    with Driver(domain, tmp_path / "driver.log", image="48x48"), \
            Proc(["bridge", "--profile", str(profile), "--run", str(run)], domain, tmp_path / "bridge.log") as bridge:
        op = Operator(domain)
        try:
            st = op.wait(lambda s: s["stale_causes"].get("image_front") == cause, 60, "the stale camera's cause")
            assert st["topics"]["image_front"]["rejected"].get("wrong_size", 0) >= 1
            # the dashboard's robot panel reads the same cause from the run's status file
            robot = _wait_robot(run, lambda r: r.stale_causes.get("image_front") == cause)
            assert robot.fault is None and robot.connected
            op.send("start")
            st = op.wait(lambda s: s["state"] == "faulted", 20, "the reset to fail")
            assert st["fault"] == cause and st["episodes"]["committed"] == 0
            deadline = time.monotonic() + 5  # the dashboard's view: the run directory's status file
            while time.monotonic() < deadline:
                rs = StatusFile(run).read()
                detail = rs.services["bridge"].detail if rs and "bridge" in rs.services else ""
                if cause in detail:
                    break
                time.sleep(0.1)
            assert f"fault: {cause}" in detail, detail
            assert _wait_robot(run, lambda r: r.fault == cause).mode == "faulted"
            bridge.stop()
            assert f"fault: {cause}" in bridge.output()
        finally:
            op.close()
