"""Everything a request handler needs, built once per app: the run's readers and writers."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.dashboard.auth import TokenGuard
from services.dashboard.data import RunData
from services.dashboard.imagine import ImagineProvider
from services.dashboard.settings import DashboardSettings
from worldsample.runlog.control import ControlChannel
from worldsample.runlog.events import EventReader
from worldsample.runlog.metrics import MetricsReader


class StreamSlots:
    """Counts open long-lived responses (live updates, video) against a limit."""

    def __init__(self, limit: int):
        self.limit = limit
        self.open = 0
        self._lock = threading.Lock()

    def acquire(self) -> bool:
        with self._lock:
            if self.open >= self.limit:
                return False
            self.open += 1
            return True

    def release(self) -> None:
        with self._lock:
            self.open = max(0, self.open - 1)


@dataclass
class AppContext:
    run_dir: Path
    settings: DashboardSettings
    guard: TokenGuard
    data: RunData
    metrics: MetricsReader
    events: EventReader
    control: ControlChannel
    imagine: ImagineProvider | None = None
    hub: Any = None  # LiveHub, set by the app factory
    streams: StreamSlots = field(init=False)

    def __post_init__(self):
        self.streams = StreamSlots(self.settings.max_stream_clients)
