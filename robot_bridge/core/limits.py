"""Action limits applied to every action before it leaves the bridge (policy or human), and the map
between the policy's normalised actions and the arm's units (`ActionScale`)."""

from __future__ import annotations

import numpy as np

from robot_bridge.profile import ActionSpec


class ActionLimiter:
    """Per-dimension bounds, then at most `max_delta` change per step; non-finite -> hold."""

    def __init__(self, spec: ActionSpec):
        self.low = np.asarray(spec.low, np.float32)
        self.high = np.asarray(spec.high, np.float32)
        self.max_delta = np.broadcast_to(np.asarray(spec.max_delta, np.float32), self.low.shape)
        self.hold = np.asarray(spec.hold if spec.hold is not None else np.zeros_like(self.low), np.float32)
        self.prev = self.hold.copy()
        self.clipped = 0  # actions changed by the limits
        self.non_finite = 0

    def reset(self) -> None:
        self.prev = self.hold.copy()

    def __call__(self, action) -> np.ndarray:
        a = np.asarray(action, np.float32).reshape(-1)
        if a.shape != self.low.shape:
            raise ValueError(f"action has {a.size} dimensions, the profile {self.low.size}")
        if not np.isfinite(a).all():
            self.non_finite += 1
            a = self.prev.copy()
        out = np.clip(a, self.low, self.high)
        out = np.clip(out, self.prev - self.max_delta, self.prev + self.max_delta)
        if not np.array_equal(out, a):
            self.clipped += 1
        self.prev = out
        return out


class ActionScale:
    """The policy's normalised action [-1, 1] <-> the profile's action range [`low`, `high`] (arm units).

    `to_arm(a) = low + (a + 1) / 2 * (high - low)`, computed as `center + a * half_range` (the same map,
    exact for a [-1, 1] range: identity; -1 and +1 give `low` and `high` exactly, and no action within
    [-1, 1] rounds past the range). `to_policy` is its inverse (the same care at the ends); a dimension
    with low == high maps to 0. The limiter clips in arm units after `to_arm`; the store holds
    `to_policy` of what was sent."""

    def __init__(self, spec: ActionSpec):
        low = np.asarray(spec.low, np.float32)
        high = np.asarray(spec.high, np.float32)
        self.low, self.high = low, high
        self.center = ((high + low) / 2).astype(np.float32)
        self.half = ((high - low) / 2).astype(np.float32)
        self.identity = bool(np.all(self.center == 0) and np.all(self.half == 1))

    def to_arm(self, action) -> np.ndarray:
        a = np.asarray(action, np.float32).reshape(-1)
        if a.shape != self.center.shape:
            raise ValueError(f"action has {a.size} dimensions, the profile {self.center.size}")
        if self.identity:
            return a.copy()
        out = np.clip(self.center + a * self.half, self.low, self.high)  # no rounding past the range
        out = np.where(a == -1, self.low, np.where(a == 1, self.high, out))  # the ends exactly
        return np.where((a >= -1) & (a <= 1), out, self.center + a * self.half).astype(np.float32)  # outside: as is

    def to_policy(self, action) -> np.ndarray:
        a = np.asarray(action, np.float32).reshape(-1)
        if self.identity:
            return a.copy()
        raw = (a - self.center) / np.where(self.half == 0, np.float32(1), self.half)
        out = np.where(a == self.low, -1.0, np.where(a == self.high, 1.0, np.clip(raw, -1, 1)))
        out = np.where((a >= self.low) & (a <= self.high), out, raw)  # outside the range: unclipped
        return np.where(self.half == 0, 0.0, out).astype(np.float32)
