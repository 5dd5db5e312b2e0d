"""What a teleop device gives the teleop node, whatever the device: the person's action now (or
hands off) and the episode commands pressed since the last reading.

The keyboard (robot_bridge/teleop/keyboard.py) is the one device shipped and tested. A gamepad or
a SpaceMouse would be another class with the same `read`/`close`, reading its axes through a
maintained package (e.g. `hid` or `pygame` for a gamepad, `pyspacemouse` for a SpaceMouse) and
returning its axes as a normalised action while the person moves it or holds its takeover
button; none is written or tested here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

# what a device may ask for besides an action: the bridge's episode commands (the command topic),
# the e-stop (its topic), and `quit`, which ends the teleop (and `demos record`)
COMMANDS = ("start", "success", "failure", "stop", "rerecord", "clear_fault", "estop", "release_estop", "quit")


@dataclass
class Reading:
    """`action`: the person's action in the policy's normalised units ([-1, 1] per entry; the node
    maps it to the arm's range), None while the person does not take over. `commands`: in order."""

    action: np.ndarray | None = None
    commands: list[str] = field(default_factory=list)


class TeleopDevice(Protocol):
    def read(self, timeout: float) -> Reading:
        """The device's state now; waits up to `timeout` s for input first."""
        ...

    def close(self) -> None: ...
