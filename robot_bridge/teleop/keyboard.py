"""The keyboard as a teleop device: keys -> end-effector deltas in the policy's normalised [-1, 1]
action space, HIL-SERL's hold-to-intervene, episode commands.

Default keys (an end-effector delta arm: action entries 0, 1, 2 = x, y, z, entry 3 = gripper):

    d / a, right / left   +x / -x          w / s, up / down   +y / -y          r / f   +z / -z
    g                     gripper: close, then open, ... (entry 3 = +1 closed, -1 open)
    space                 take over and hold still
    enter start | y success | n failure | x stop | backspace discard and redo (rerecord)
    e e-stop | u release the e-stop | c clear a fault | q quit

While a motion key or space is held, the person takes over: each reading carries the action (a
held motion key moves its entry from the hold `speed` of the way to that end of the range: +/- speed
when the range is symmetric about the hold; the gripper's latched value; the hold everywhere else),
which the node publishes on the intervention topic; when the last one is released the reading has
no action and the policy drives again. With `always=True` (demonstrations) every reading carries
an action: the person drives the whole episode, standing still when no key is held.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from robot_bridge.teleop.device import COMMANDS, Reading
from robot_bridge.teleop.keys import KeySource

MOTION = {"d": (0, 1), "right": (0, 1), "a": (0, -1), "left": (0, -1),
          "w": (1, 1), "up": (1, 1), "s": (1, -1), "down": (1, -1),
          "r": (2, 1), "f": (2, -1)}
KEY_COMMANDS = {"enter": "start", "y": "success", "n": "failure", "x": "stop", "backspace": "rerecord",
                "e": "estop", "u": "release_estop", "c": "clear_fault", "q": "quit"}
HELP = ("keys: hold w/s a/d r/f (or arrows) to move, space to hold still (takeover); g gripper | enter start | "
        "y success | n failure | x stop | backspace redo | e e-stop | u release | c clear fault | q quit")


@dataclass
class KeyMap:
    motion: dict[str, tuple[int, int]] = field(default_factory=lambda: dict(MOTION))  # key -> (entry, sign)
    commands: dict[str, str] = field(default_factory=lambda: dict(KEY_COMMANDS))
    takeover: str = "space"
    gripper: str = "g"
    gripper_dim: int | None = 3  # None: no gripper key

    def __post_init__(self) -> None:
        unknown = sorted(set(self.commands.values()) - set(COMMANDS))
        if unknown:
            raise ValueError(f"unknown teleop command(s) {unknown}; choose from {list(COMMANDS)}")
        keys = [*self.motion, *self.commands, self.takeover, self.gripper]
        if len(set(keys)) != len(keys):
            raise ValueError(f"a key is bound twice: {keys}")

    def without(self, *commands: str) -> KeyMap:
        """This map without the keys of `commands` (e.g. `demos record` has no unlabelled `stop`)."""
        return KeyMap({**self.motion}, {k: c for k, c in self.commands.items() if c not in commands},
                      self.takeover, self.gripper, self.gripper_dim)


class KeyboardDevice:
    """`hold`: the action that holds the arm, in the policy's units (the profile's `hold` through
    ActionScale.to_policy); `speed`: the normalised size of a motion key's delta."""

    def __init__(self, source: KeySource, hold, keymap: KeyMap | None = None, speed: float = 0.5,
                 always: bool = False):
        if not 0 < speed <= 1:
            raise ValueError(f"speed must be in (0, 1] (a fraction of the action range), got {speed}")
        self.source = source
        self.hold = np.asarray(hold, np.float32).reshape(-1)
        self.map = keymap or KeyMap()
        self.speed, self.always = float(speed), always
        dim = self.hold.size
        self.motion = {k: v for k, v in self.map.motion.items() if v[0] < dim}  # entries the arm has
        self.gripper_dim = self.map.gripper_dim if self.map.gripper_dim is not None and self.map.gripper_dim < dim \
            else None
        self.gripper: float | None = None  # latched by the gripper key: +1 closed, -1 open; None: the hold
        self.held: set[str] = set()

    @property
    def taking_over(self) -> bool:
        return bool(self.held & (set(self.motion) | {self.map.takeover}))

    def action(self) -> np.ndarray:
        """The person's action now, in the policy's units."""
        a = self.hold.copy()
        signs: dict[int, set[int]] = {}
        for key in self.held & set(self.motion):
            i, sign = self.motion[key]
            signs.setdefault(i, set()).add(sign)
        for i, s in signs.items():
            if len(s) == 1:  # opposite keys together cancel
                sign = s.pop()  # `speed` of the way from the hold to the range's end in that direction
                a[i] = self.hold[i] + self.speed * (sign - self.hold[i])
        if self.gripper_dim is not None and self.gripper is not None:
            a[self.gripper_dim] = self.gripper
        return a

    def read(self, timeout: float) -> Reading:
        commands = []
        for ev in self.source.read(timeout):
            if not ev.down:
                self.held.discard(ev.key)
                continue
            self.held.add(ev.key)
            if ev.key == self.map.gripper and self.gripper_dim is not None:
                self.gripper = -1.0 if self.gripper == 1.0 else 1.0
            elif ev.key in self.map.commands:
                commands.append(self.map.commands[ev.key])
        action = self.action() if self.always or self.taking_over else None
        return Reading(action, commands)

    def describe(self) -> str:
        """One line for a status display: what the person is doing."""
        moving = sorted(k for k in self.held if k in self.motion)
        what = ("moving " + ",".join(moving)) if moving else ("holding still" if self.taking_over or self.always
                                                              else "hands off")
        grip = {None: "", 1.0: " | gripper closed", -1.0: " | gripper open"}[self.gripper]
        return f"teleop: {what}{grip}"

    def close(self) -> None:
        self.source.close()
