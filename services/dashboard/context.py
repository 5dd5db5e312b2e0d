"""Everything a request handler needs, built once per app: the run's readers and writers."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio

from services.dashboard.auth import TokenGuard
from services.dashboard.data import RunData
from services.dashboard.errors import TooManyRequests, TooManyStreams
from services.dashboard.imagine import ImagineProvider
from services.dashboard.play import PlayProvider, PlaySessions
from services.dashboard.settings import DashboardSettings
from worldsample.paths import RunFiles
from worldsample.runlog.control import ControlChannel
from worldsample.runlog.events import EventReader
from worldsample.runlog.metrics import MetricsReader

T = TypeVar("T")


class StreamSlots:
    """Counts open long-lived responses (live updates, video) against a limit for the server and
    one per client address and kind, so one client's streams cannot take every slot."""

    def __init__(self, limit: int, per_client: int | None = None):
        self.limit = limit
        self.per_client = per_client or limit
        self.open = 0
        self._by_client: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def acquire(self, kind: str = "stream", client: str = "?") -> None:
        """Take a slot, or raise TooManyStreams saying which limit was hit."""
        with self._lock:
            if self.open >= self.limit:
                raise TooManyStreams(
                    f"too many streams open on this server ({self.limit}); close some players or tabs, "
                    "or raise max_stream_clients"
                )
            n = self._by_client.get((kind, client), 0)
            if n >= self.per_client:
                raise TooManyStreams(
                    f"too many {kind} streams open from {client} ({self.per_client}); close some, "
                    "or raise max_streams_per_client"
                )
            self._by_client[(kind, client)] = n + 1
            self.open += 1

    def release(self, kind: str = "stream", client: str = "?") -> None:
        with self._lock:
            self.open = max(0, self.open - 1)
            n = self._by_client.pop((kind, client), 0) - 1
            if n > 0:
                self._by_client[(kind, client)] = n


class WorkQueue:
    """Slow work (world-model rollouts) in worker threads, `running` at a time, with at most
    `waiting` more queued; beyond that a request is answered 429 at once instead of holding a
    thread of the pool that every other endpoint needs."""

    def __init__(self, running: int, waiting: int, what: str):
        self.running, self.capacity, self.what = running, running + waiting, what
        self.admitted = 0
        self._limiter: anyio.CapacityLimiter | None = None

    async def run(self, fn: Callable[[], T]) -> T:
        if self.admitted >= self.capacity:  # runs on the event loop: no lock needed
            raise TooManyRequests(
                f"{self.admitted} {self.what} requests are already running or waiting; try again shortly",
                retry_after_s=1,
            )
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.running)
        self.admitted += 1
        try:
            return await anyio.to_thread.run_sync(fn, limiter=self._limiter)
        finally:
            self.admitted -= 1


def run_identity(run_dir: Path) -> str:
    """An id for this run directory that changes when another run takes its place (path,
    directory inode, and the store's creation): image URLs and validators carry it, so a browser
    never shows one run's cached frames for another served on the same port."""
    parts = [str(run_dir.resolve())]
    for path in (run_dir, RunFiles.of(run_dir).store / "zarr.json"):
        try:
            st = path.stat()
            parts.append(f"{st.st_dev}:{st.st_ino}:{st.st_mtime_ns if path != run_dir else ''}")
        except OSError:
            parts.append("-")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


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
    play: PlayProvider | None = None
    hub: Any = None  # LiveHub, set by the app factory
    streams: StreamSlots = field(init=False)
    imagine_work: WorkQueue = field(init=False)  # world-model work: imagine and play
    play_sessions: PlaySessions = field(init=False)
    _run_id: tuple[str, bool] | None = field(default=None, init=False, repr=False)

    def __post_init__(self):
        self.streams = StreamSlots(self.settings.max_stream_clients, self.settings.max_streams_per_client)
        self.imagine_work = WorkQueue(1, self.settings.max_imagine_waiting, "world-model (imagine and play)")
        self.play_sessions = PlaySessions(self.settings.max_play_sessions, self.settings.play_idle_s)

    @property
    def run_id(self) -> str:
        """`run_identity` of the run; fixed once the store exists (before that there are no frames)."""
        if self._run_id is None or not self._run_id[1]:
            self._run_id = (run_identity(self.run_dir), self.data.has_store)
        return self._run_id[0]
