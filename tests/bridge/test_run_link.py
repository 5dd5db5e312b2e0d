"""Dashboard requests reach the bridge process through the run directory, and the bridge reports
the robot's state there (worldsample.runlog)."""

from tests.bridge.helpers import Rig, small_profile
from worldsample.runlog import ControlChannel, StatusFile


def test_dashboard_estop_and_episode_requests_reach_the_bridge(tmp_path):
    run = tmp_path / "run"
    profile = small_profile(tmp_path, **{"episode.max_steps": 400})
    with Rig(tmp_path, profile, run) as rig:
        op = rig.op
        op.wait_ready()
        ch = ControlChannel(run)
        ch.send("start_episode")
        op.wait(lambda s: s["state"] == "running" and s["step"] >= 2, 20, "the episode started from the dashboard")
        ch.send("estop")
        st = op.wait(lambda s: s["state"] == "faulted", 10, "the e-stop fault")
        assert st["fault"] == "estop"
        status = StatusFile(run).read()
        assert status.robot is not None and status.robot.connected and status.robot.transport == "dds"
        op.wait(lambda s: StatusFile(run).read().robot.estop, 10, "the e-stop in status.json")
        acked = [c for c, acks in ch.history() if c.kind.value == "estop"]
        assert acked, "the e-stop request is in the history"
        op.wait(lambda s: any(a.consumer == "bridge" for c, acks in ch.history() if c.kind.value == "estop" for a in acks), 10, "the ack")
