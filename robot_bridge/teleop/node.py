"""The teleop node: a device's readings onto the bridge's own topics, as any ROS 2 node would send them.

- the person's action, mapped from the policy's [-1, 1] to the arm's units (ActionScale, the
  same map the bridge applies to the policy), on `control.intervention`, at `rate_hz` while the
  device gives one. The bridge counts a step as a takeover while such messages keep coming
  (within `episode.intervention_timeout_ms`), limits the action like any other, stores it
  normalised and flags the step `intervention`; when they stop, the policy drives again;
- episode commands (start, success, failure, stop, rerecord, clear_fault) on `control.command`;
- the e-stop (true / false) on `control.estop`.

It needs nothing from the bridge's process: the same node drives a bridge on another machine.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

import numpy as np

from robot_bridge.codec import Bool, String, decode, encode
from robot_bridge.core.limits import ActionScale
from robot_bridge.profile import RobotProfile
from robot_bridge.teleop.device import Reading, TeleopDevice
from robot_bridge.transport.base import RELIABLE_QOS, Transport

log = logging.getLogger(__name__)


def teleop_rate(profile: RobotProfile) -> float:
    """Twice the control rate (every tick sees a fresh takeover), 10..100 Hz."""
    return float(min(100.0, max(10.0, 2 * profile.control_rate_hz)))


def policy_hold(profile: RobotProfile) -> np.ndarray:
    """The profile's hold action in the policy's normalised units."""
    a = profile.action
    return ActionScale(a).to_policy(np.asarray(a.hold if a.hold is not None else [0.0] * a.dim, np.float32))


class TeleopNode:
    def __init__(self, profile: RobotProfile, transport: Transport, device: TeleopDevice,
                 rate_hz: float | None = None, on_quit: Callable[[], None] | None = None,
                 watch_status: bool = False):
        c = profile.control
        self.device = device
        self.scale = ActionScale(profile.action)
        self._msg = profile.action_mapping()
        self.period = 1.0 / (rate_hz or teleop_rate(profile))
        self._pub_iv = transport.publisher(c.intervention, profile.action.type, RELIABLE_QOS)
        self._pub_cmd = transport.publisher(c.command, "std_msgs/msg/String", RELIABLE_QOS)
        self._pub_estop = transport.publisher(c.estop, "std_msgs/msg/Bool", RELIABLE_QOS)
        self.on_quit = on_quit
        self.published = 0  # takeover messages
        self.commands: Counter[str] = Counter()
        self.last = Reading()
        self.bridge_status: dict = {}  # the bridge's status topic, with watch_status
        if watch_status:
            transport.subscribe(c.status, "std_msgs/msg/String", RELIABLE_QOS, self._on_status)
        self._thread: threading.Thread | None = None

    def _on_status(self, raw: bytes, _recv_ns: int) -> None:
        try:
            self.bridge_status = json.loads(decode(raw, "std_msgs/msg/String").data)
        except ValueError:
            pass

    @property
    def taking_over(self) -> bool:
        return self.last.action is not None

    def command(self, name: str) -> None:
        self.commands[name] += 1
        log.info("teleop: %s", name)
        if name == "quit":
            if self.on_quit is not None:
                self.on_quit()
        elif name in ("estop", "release_estop"):
            self._pub_estop(encode(Bool(name == "estop")))
        else:
            self._pub_cmd(encode(String(json.dumps({"cmd": name}))))

    def publish(self, action: np.ndarray) -> None:
        arm = self.scale.to_arm(np.clip(action, -1, 1))
        self._pub_iv(self._msg.encode(arm, time.time_ns()))
        self.published += 1

    def run(self, stop: threading.Event) -> None:
        next_pub = time.monotonic()
        try:
            while not stop.is_set():
                reading = self.device.read(max(0.0, next_pub - time.monotonic()))
                self.last = reading
                for name in reading.commands:
                    self.command(name)
                now = time.monotonic()
                if now >= next_pub:
                    if reading.action is not None:
                        self.publish(reading.action)
                    next_pub = max(next_pub + self.period, now)
        finally:
            self.device.close()

    def start(self, stop: threading.Event) -> None:
        self._thread = threading.Thread(target=self.run, args=(stop,), name="teleop", daemon=True)
        self._thread.start()

    def join(self, timeout: float = 2.0) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def stats(self) -> dict:
        return {"takeover_messages": self.published, "commands": dict(self.commands)}
