"""What bag export and import share: the WorldSample topics, the episode list and the message types.

`/worldsample/episode` carries start/end markers with the episode record and `/worldsample/step`
the per-step flags, both as `std_msgs/msg/String` JSON (see `bag_export` and `bag_import`).
"""

from __future__ import annotations

import re
from pathlib import Path

from robot_bridge.codec import MessageTypes, message_types
from robot_bridge.codec.typestore import DISTROS
from robot_bridge.errors import BagError
from robot_bridge.profile import RobotProfile

EPISODE_TOPIC, STEP_TOPIC = "/worldsample/episode", "/worldsample/step"
STRING = "std_msgs/msg/String"


def parse_episodes(spec: str | None) -> list[int] | None:
    """"0,3-5" -> [0, 3, 4, 5]; None -> None (all)."""
    if not spec:
        return None
    out: list[int] = []
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m:
            raise BagError(f"episode list {spec!r}: {part!r} is not N or N-M")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        out.extend(range(lo, hi + 1))
    return out


def _types(distro: str, profile: RobotProfile) -> MessageTypes:
    """The distro's message definitions plus the profile's custom `.msg` types."""
    if distro not in DISTROS:
        raise BagError(f"distro {distro!r}: use one of {sorted(DISTROS)}")
    return message_types(distro, profile.types)


def open_bag(bag: Path):
    """An opened rosbags AnyReader on `bag` (MCAP or sqlite3); BagError naming the cause if it cannot be."""
    from rosbags.highlevel import AnyReader

    bag = Path(bag)
    if not bag.exists():
        raise BagError(f"bag {bag} does not exist")
    try:
        reader = AnyReader([bag])
        reader.open()
    except Exception as e:  # rosbags raises several unrelated types for unreadable bags
        raise BagError(f"cannot open {bag} as a rosbag2: {e}") from e
    return reader
