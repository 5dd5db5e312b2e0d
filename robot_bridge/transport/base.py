"""What the core needs from a middleware: raw-CDR subscriptions and publishers, plus QoS events.

Both transports hand callbacks the CDR bytes (with the encapsulation header) and a receive time,
and publish CDR bytes; the codec does the rest, so the core never sees middleware types.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

RawCallback = Callable[[bytes, int], None]  # (cdr bytes, receive time ns since the epoch)
Publish = Callable[[bytes], None]


@dataclass(frozen=True)
class QosSpec:
    """ROS defaults: reliable depth 10 for commands/actions; best effort depth 5 for sensors."""

    reliability: Literal["reliable", "best_effort"] = "reliable"
    depth: int = 10


SENSOR_QOS = QosSpec("best_effort", 5)
RELIABLE_QOS = QosSpec("reliable", 10)


@dataclass
class QosEvents:
    """Per-topic middleware events the bridge reports on its status topic."""

    incompatible_qos: int = 0  # a matched peer asked for/offered QoS we cannot pair with
    samples_lost: int = 0
    samples_rejected: int = 0


class Transport(Protocol):
    def subscribe(self, topic: str, typename: str, qos: QosSpec, callback: RawCallback) -> None: ...

    def publisher(self, topic: str, typename: str, qos: QosSpec) -> Publish: ...

    def matched_subscribers(self, topic: str) -> int: ...

    def qos_events(self) -> dict[str, QosEvents]: ...

    def close(self) -> None: ...
