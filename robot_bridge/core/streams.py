"""Per-topic input: decode, check, count, and keep recent samples ordered by header stamp.

`StreamBuffer.at(t)` is the alignment rule: the newest sample stamped at or before `t` (a
zero-order hold). Out-of-order and duplicate stamps are rejected and counted, never reordered.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from robot_bridge.codec import decode as default_decode
from robot_bridge.errors import DecodeError, MessageRejected

FUTURE_TOLERANCE_NS = 1_000_000_000  # stamps further ahead of the receive clock are wrong clocks


@dataclass(frozen=True)
class Sample:
    stamp_ns: int
    recv_ns: int
    value: np.ndarray


@dataclass
class TopicCounters:
    received: int = 0
    accepted: int = 0
    rejected: Counter = field(default_factory=Counter)
    cpu_s: float = 0.0  # thread CPU spent decoding and checking
    transport_ms: deque = field(default_factory=lambda: deque(maxlen=5000))  # header stamp -> receive

    def as_dict(self) -> dict:
        return {
            "received": self.received,
            "accepted": self.accepted,
            "rejected": dict(self.rejected),
            "cpu_s": round(self.cpu_s, 4),
        }


class StreamBuffer:
    def __init__(self, depth: int = 64):
        self._stamps: list[int] = []
        self._samples: list[Sample] = []
        self._depth = depth
        self._lock = threading.Lock()

    def push(self, sample: Sample) -> None:
        with self._lock:
            if self._stamps and sample.stamp_ns <= self._stamps[-1]:
                reason = "duplicate_stamp" if sample.stamp_ns == self._stamps[-1] else "out_of_order"
                raise MessageRejected(reason, f"stamp {sample.stamp_ns} after {self._stamps[-1]}")
            self._stamps.append(sample.stamp_ns)
            self._samples.append(sample)
            if len(self._stamps) > 2 * self._depth:
                del self._stamps[: self._depth], self._samples[: self._depth]

    def at(self, t_ns: int) -> Sample | None:
        with self._lock:
            i = bisect.bisect_right(self._stamps, t_ns)
            return self._samples[i - 1] if i else None

    def latest(self) -> Sample | None:
        with self._lock:
            return self._samples[-1] if self._samples else None

    def clear(self) -> None:
        with self._lock:
            self._stamps.clear()
            self._samples.clear()


class StreamInput:
    """The subscription callback of one sensor topic. `decode(raw, typename)`: the profile's
    (`RobotProfile.msg_types.decode`, for its typestore and custom types); stock messages by default."""

    def __init__(self, key: str, typename: str, to_array: Callable, depth: int = 64,
                 decode: Callable | None = None):
        self.key, self.typename, self._to_array = key, typename, to_array
        self.decode = decode or default_decode
        self.buffer = StreamBuffer(depth)
        self.counters = TopicCounters()
        self.on_sample: Callable[[str, Sample], None] | None = None
        self.last_reject: tuple[str, int] | None = None  # (why, receive ns) of the newest rejected message

    def __call__(self, raw: bytes, recv_ns: int) -> None:
        t0 = time.thread_time()
        self.counters.received += 1
        try:
            stamp, value = self._to_array(self.decode(raw, self.typename))
            if stamp is not None and stamp > recv_ns + FUTURE_TOLERANCE_NS:
                raise MessageRejected("stamp_in_future", f"{(stamp - recv_ns) / 1e9:.1f} s ahead of this clock")
            sample = Sample(stamp or recv_ns, recv_ns, value)
            self.buffer.push(sample)
            self.counters.accepted += 1
            if stamp is not None:
                self.counters.transport_ms.append((recv_ns - stamp) / 1e6)
        except DecodeError as e:
            self.counters.rejected["malformed"] += 1
            self.last_reject = (f"malformed message ({e})", recv_ns)
            return
        except MessageRejected as e:
            self.counters.rejected[e.reason] += 1
            self.last_reject = (str(e).removeprefix(e.reason + ": "), recv_ns)
            return
        finally:
            self.counters.cpu_s += time.thread_time() - t0
        if self.on_sample is not None:
            self.on_sample(self.key, sample)
