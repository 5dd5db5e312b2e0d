"""Action limits applied to every action before it leaves the bridge (policy or human)."""

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
