"""The controller's input callbacks for the operator's and the robot's own topics (command, e-stop,
intervention, robot event, success). They run on the transport's threads: they decode, check and
count each message, then only set a field or queue a command; every state change happens on the
control loop's thread (controller.py). A mixin of `Controller`, which owns the fields they set."""

from __future__ import annotations

import json

import numpy as np

from robot_bridge.codec import decode
from robot_bridge.errors import DecodeError, MessageRejected

COMMANDS = ("start", "stop", "success", "failure", "rerecord", "clear_fault")
EVENT_COMMANDS = ("start", "stop", "success", "failure")  # a driver's button may send these on robot_event


class TopicInputs:
    def _decode(self, name: str, raw: bytes, typename: str):
        c = self.counters[name]
        c.received += 1
        try:
            msg = decode(raw, typename)
        except DecodeError:
            c.rejected["malformed"] += 1
            return None
        c.accepted += 1
        return msg

    def on_command(self, raw: bytes, recv_ns: int) -> None:
        msg = self._decode("command", raw, "std_msgs/msg/String")
        if msg is None:
            return
        try:
            cmd = json.loads(msg.data) if msg.data.lstrip().startswith("{") else {"cmd": msg.data.strip()}
            if cmd.get("cmd") not in COMMANDS:
                raise ValueError(cmd.get("cmd"))
        except (ValueError, AttributeError):
            self.counters["command"].accepted -= 1
            self.counters["command"].rejected["unknown_command"] += 1
            return
        self._commands.put(cmd)

    def submit(self, cmd: dict) -> None:
        """An episode command from outside the topics (e.g. the dashboard), applied at the next tick."""
        if cmd.get("cmd") not in COMMANDS:
            raise ValueError(f"unknown command {cmd.get('cmd')!r}")
        self._commands.put(cmd)

    def trigger_estop(self) -> None:
        """Latch the e-stop and hold at once; released like the topic's e-stop (false)."""
        self.estop = True
        self.out.action(self.limiter.hold)

    def release_estop(self) -> None:
        """The operator's release (a key): like `false` on the e-stop topic."""
        self.estop = False

    def on_estop(self, raw: bytes, recv_ns: int) -> None:
        msg = self._decode("estop", raw, "std_msgs/msg/Bool")
        if msg is not None:
            self.estop = bool(msg.data)
            if self.estop:  # hold at once, not at the next tick
                self.out.action(self.limiter.hold)

    def on_intervention(self, raw: bytes, recv_ns: int) -> None:
        c = self.counters["intervention"]
        c.received += 1
        try:
            a = self._action_msg.decode(raw).astype(np.float32)
        except DecodeError:
            c.rejected["malformed"] += 1
            return
        except MessageRejected as e:  # a field path past a sequence's end, NaN
            c.rejected[e.reason] += 1
            return
        if a.shape != (self.p.action.dim,) or not np.isfinite(a).all():
            why = "wrong_size" if a.shape != (self.p.action.dim,) else "non_finite"
            c.rejected[why] += 1
            return
        c.accepted += 1
        self._intervention = (a.copy(), recv_ns)

    def on_robot_event(self, raw: bytes, recv_ns: int) -> None:
        msg = self._decode("robot_event", raw, "std_msgs/msg/String")
        try:
            if msg is None:
                ev = {}
            elif msg.data.lstrip().startswith("{"):
                ev = json.loads(msg.data)
            else:  # a bare word
                ev = {"event": msg.data.strip()}
            if ev.get("event") == "reset_done":
                self._reset_done = (int(ev["reset_id"]), int(ev["stamp_ns"]))
            elif ev.get("event") in EVENT_COMMANDS:  # the operator's button on the robot side
                self._commands.put({"cmd": ev["event"]})
            elif msg is not None:
                raise ValueError(ev.get("event"))
        except (ValueError, KeyError, TypeError, AttributeError):
            self.counters["robot_event"].rejected["bad_event"] += 1

    def on_success(self, raw: bytes, recv_ns: int) -> None:
        msg = self._decode("success", raw, "std_msgs/msg/Bool")
        if msg is not None:
            self._success = (bool(msg.data), recv_ns)
