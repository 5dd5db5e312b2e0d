"""The bridge's link to the run directory's service files (worldsample.runlog): control requests
from the dashboard (e-stop, start and stop episode) and the robot state shown there.

It runs in its own thread at a few Hz; the control loop never waits for it. Requests enter the
controller the same way as the ROS command and e-stop topics do.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from worldsample.runlog import ControlChannel, ControlKind, RobotState, StatusFile

log = logging.getLogger(__name__)
CONSUMER = "bridge"
_TO_COMMAND = {ControlKind.start_episode: "start", ControlKind.stop_episode: "stop"}


class RunLink:
    def __init__(self, run_dir: Path, controller, transport_name: str = "dds", period_s: float = 0.2):
        self.ctl = controller
        self.channel = ControlChannel(run_dir)
        self.status = StatusFile(run_dir)
        self.transport_name = transport_name
        self.period_s = period_s
        self._thread: threading.Thread | None = None

    def poll_once(self) -> None:
        kinds = {ControlKind.estop, ControlKind.start_episode, ControlKind.stop_episode}
        for cmd in self.channel.poll(CONSUMER, kinds):
            if cmd.kind == ControlKind.estop:
                self.ctl.trigger_estop()
                note = "holding; release with the e-stop topic (false)"
            else:
                self.ctl.submit({"cmd": _TO_COMMAND[cmd.kind]})
                note = ""
            self.channel.ack(CONSUMER, cmd, note=note)
        sm = self.ctl.sm
        figures = self.ctl.robot_figures(time.time_ns())
        figures["fault"] = figures["fault"] and figures["fault"][:2000]
        if figures["control_hz"] is None:  # the loop has not ticked yet: its configured rate
            figures["control_hz"] = float(self.ctl.p.control_rate_hz)
        robot = RobotState(connected=True, estop=bool(self.ctl.estop), mode=sm.state.value,
                           transport=self.transport_name, **figures)
        fault = f"; fault: {self.ctl.fault}" if self.ctl.fault else ""
        self.status.heartbeat(CONSUMER, detail=f"episode state {sm.state.value}{fault}"[:2000], robot=robot)

    def start(self, stop: threading.Event) -> None:
        def loop() -> None:
            while not stop.is_set():
                try:
                    self.poll_once()
                except Exception:  # a bad request file must not take the bridge down
                    log.exception("run-directory link failed; retrying")
                stop.wait(self.period_s)
            self.status.heartbeat(CONSUMER, state="stopped", robot=RobotState(connected=False))

        self._thread = threading.Thread(target=loop, name="run-link", daemon=True)
        self._thread.start()
