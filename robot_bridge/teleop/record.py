"""Demonstrations from a person through the bridge (`worldsample demos record`), and the teleop
node on its own beside a running bridge (`worldsample teleop`).

`record_demos` runs the bridge (robot_bridge/bridge.py, the same topics, limits, alignment and
recorder as for the policy's episodes) with the profile's episodes going to the `demo` group, no
policy and no unattended starts, and a teleop node whose person drives every step: each step is
stored as a takeover (`intervention`) in the policy's normalised units. An episode ends on the
person's success or failure key, the robot's success signal (`control.success` with
`end_on_success`), or `episode.max_steps` (labelled a failure); either way it is committed with
its success flag. Backspace throws the attempt away and resets; quitting drops an open attempt.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from robot_bridge.profile import RobotProfile, load_profile
from robot_bridge.teleop.device import TeleopDevice
from robot_bridge.teleop.node import TeleopNode
from robot_bridge.transport.base import Transport

DEMO_GROUP = "demo"
# after the user's own --set: demonstrations go to `demo`, are labelled, and start only when asked;
# the teleop node owns the terminal, so the bridge's own keys are off
DEMO_OVERRIDES = [f"episode.group={DEMO_GROUP}", "episode.auto_start=false", "episode.max_steps_failure=true",
                  "reset.keys=false"]


def demo_profile(path: Path | str, overrides: list[str] | None = None) -> RobotProfile:
    return load_profile(path, [*(overrides or []), *DEMO_OVERRIDES])


def _line(bridge, node: TeleopNode, describe, episodes: int | None) -> str:
    from robot_bridge.bridge import status_text

    st = bridge.last_status
    rs = bridge.recorder.stats
    target = f"/{episodes}" if episodes else ""
    return f"{status_text(st)}\n{describe()} | demos kept {rs.committed}{target}"


def record_demos(profile: RobotProfile, run_dir: Path, transport: Transport, device: TeleopDevice,
                 stop: threading.Event, episodes: int | None = None, status_line: bool = True,
                 help_text: str | None = None) -> dict:
    """Record demonstrations until `episodes` are committed (None: until `stop` or the quit key).
    `profile` should come from `demo_profile`. Returns the bridge's stats with the teleop's."""
    from robot_bridge.bridge import Bridge
    from robot_bridge.console import StatusLine
    from robot_bridge.live_frames import LiveFrameWriter
    from robot_bridge.run_link import RunLink

    if profile.episode.group != DEMO_GROUP or profile.episode.auto_start:
        raise ValueError("record_demos needs a profile from demo_profile (group demo, no auto_start)")
    sys.setswitchinterval(0.0005)  # as run_bridge: the control loop takes the GIL back soon after its sleep
    run_dir = Path(run_dir)
    bridge = Bridge(profile, run_dir, transport, run_policy=False)
    bridge.keep_interrupted = False  # a demonstration cut short is dropped
    ctl = bridge.controller
    RunLink(run_dir, ctl).start(stop)
    if profile.live_frames_hz > 0:
        LiveFrameWriter(run_dir, bridge.inputs, profile.live_frames_hz).start(stop)
    node = TeleopNode(profile, transport, device, on_quit=stop.set)
    describe = getattr(device, "describe", lambda: "teleop")
    if help_text:
        print(f"demos record: {help_text}", file=sys.stderr, flush=True)
    node.start(stop)
    try:
        with StatusLine(status_line) as line:
            def tick() -> None:
                line.update(_line(bridge, node, describe, episodes))
                rec = bridge.recorder
                if episodes and rec.settled and rec.stats.committed >= episodes and not ctl.sm.active:
                    stop.set()

            bridge.run(stop, on_tick=tick)
            line.update(_line(bridge, node, describe, episodes))
    finally:
        stop.set()
        node.join()
    return bridge.stats() | {"teleop": node.stats()}


def run_teleop(profile: RobotProfile, transport: Transport, device: TeleopDevice, stop: threading.Event,
               status_line: bool = True) -> dict:
    """The teleop node beside a bridge that runs elsewhere, until `stop` or the quit key."""
    from robot_bridge.console import StatusLine

    node = TeleopNode(profile, transport, device, on_quit=stop.set, watch_status=True)
    describe = getattr(device, "describe", lambda: "teleop")
    node.start(stop)
    try:
        with StatusLine(status_line) as line:
            while not stop.wait(0.1):
                st = node.bridge_status
                bridge = f"bridge {st['state']} step {st['step']}" if st else "bridge: no status yet"
                line.update(f"{describe()} | {bridge}")
    finally:
        stop.set()
        node.join()
    return node.stats()
