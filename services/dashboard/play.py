"""Interactive play in the world model: the provider hook and the bounded store of open sessions.

A `PlayProvider` (services/dashboard/wm_play.py, backed by the run's world model) is passed to
`create_app(..., play=provider)`. `start` encodes a real start (a step of a stored episode) into a
session's state; `step` feeds one action through the model and returns the next predicted frame
with the heads' predictions. Without a provider the play endpoints answer 501 once RUN/world_model/
exists (404 before, as the imagine view does).

`PlaySessions` holds the states by id: at most `limit` at once (starting one more ends the least
recently used) and each ended after `idle_s` without a request, so a server never holds more than
`limit` states, whatever the clients do.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from services.dashboard.errors import NotFound


@dataclass
class PlayFrame:
    image: np.ndarray  # (H, W, C) uint8: the predicted frame of the session's camera
    step: int  # steps taken since the start (1 for the first predicted frame)
    action: np.ndarray  # the action applied (after clipping to the bounds)
    reward: float
    success: float  # probability
    success_label: bool  # success above the model's calibrated threshold
    done: float  # probability


class PlayState(Protocol):
    group: str
    episode: int
    start: int
    camera: str
    version: int  # the world-model version the session runs on
    action_dim: int
    action_low: np.ndarray
    action_high: np.ndarray
    history: int  # latent frames in the model's context window
    frame_shape: tuple[int, int, int]
    steps: int


class PlayProvider(Protocol):
    def start(self, group: str, episode: int, camera: str, step: int) -> PlayState:
        """A new session's state at step `step` of a stored episode (the newest world model)."""
        ...

    def step(self, state: PlayState, action: np.ndarray) -> PlayFrame:
        """Apply one action (length action_dim, finite) and predict the next frame."""
        ...


class PlaySessions:
    def __init__(self, limit: int, idle_s: float, clock: Callable[[], float] = time.monotonic):
        self.limit, self.idle_s, self.clock = limit, idle_s, clock
        self._open: OrderedDict[str, tuple[PlayState, float]] = OrderedDict()  # least recently used first
        self._lock = threading.Lock()

    def _expire(self) -> None:
        now = self.clock()
        for sid in [s for s, (_, used) in self._open.items() if now - used > self.idle_s]:
            del self._open[sid]

    def add(self, state: PlayState) -> str:
        sid = secrets.token_urlsafe(16)
        with self._lock:
            self._expire()
            while len(self._open) >= self.limit:
                self._open.popitem(last=False)
            self._open[sid] = (state, self.clock())
        return sid

    def _missing(self, sid: str) -> NotFound:
        return NotFound(
            f"no play session {sid!r}: it ended (unused for {self.idle_s:g} s, or more than {self.limit} "
            "sessions were started after it), was closed, or never existed; start one with POST /api/play"
        )

    def get(self, sid: str) -> PlayState:
        """The session's state (it counts as used now), or 404."""
        with self._lock:
            self._expire()
            if sid not in self._open:
                raise self._missing(sid)
            state = self._open[sid][0]
            self._open[sid] = (state, self.clock())
            self._open.move_to_end(sid)
            return state

    def replace(self, sid: str, state: PlayState) -> None:
        with self._lock:
            if sid not in self._open:
                raise self._missing(sid)
            self._open[sid] = (state, self.clock())
            self._open.move_to_end(sid)

    def remove(self, sid: str) -> None:
        with self._lock:
            self._expire()
            if self._open.pop(sid, None) is None:
                raise self._missing(sid)

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._open)
