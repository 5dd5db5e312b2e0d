"""Live updates: one background task polls the run's files and fans out server-sent events.

However many pages are open, the files are read once per interval. Events:
`overview` (the run at a glance, each tick while someone listens), `metrics` (rows appended
since the last tick), `events` (new run events), `episodes` (the set of committed episodes
changed: fetch the list again). A subscriber that falls 64 messages behind is dropped; the
page reconnects and reloads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
from collections.abc import AsyncIterator
from typing import Any

import anyio

from services.dashboard.overview import build_overview

log = logging.getLogger(__name__)

QUEUE_LEN = 64
MAX_ROWS_PER_MESSAGE = 5000


def _finite(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (v if not isinstance(v, float) or math.isfinite(v) else None) for k, v in row.items()}


def sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


class _Sub:
    def __init__(self):
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue(QUEUE_LEN)
        self.dropped = False


class LiveHub:
    def __init__(self, ctx, interval: float, streams):
        self.ctx = ctx
        self.interval = interval
        self.streams = streams
        self._subs: set[_Sub] = set()
        self.ticks = 0
        self.failures = 0
        self._last_error: dict[str, str] = {}

    def poll(self) -> list[bytes]:
        """Read what is new in the run's files (runs in a worker thread). Each part is read and
        sent on its own, so one broken file never costs the others: rows read from metrics.jsonl
        are sent even when the overview cannot be built."""
        c = self.ctx
        out: list[bytes] = []
        with self._part("metrics"):
            rows = c.metrics.refresh()
            for i in range(0, len(rows), MAX_ROWS_PER_MESSAGE):
                out.append(sse("metrics", {"rows": [_finite(r) for r in rows[i : i + MAX_ROWS_PER_MESSAGE]]}))
        with self._part("events"):
            new = c.events.refresh()
            if new:
                out.append(sse("events", {"items": [e.model_dump(mode="json") for e in new[-500:]]}))
        with self._part("episodes"):
            if c.data.refresh(force=True):
                out.append(sse("episodes", {"version": c.data.version}))
        if self._subs:
            with self._part("overview"):
                ov = build_overview(c.data, c.metrics, c.events, c.control, run_id=c.run_id)
                out.append(sse("overview", ov.model_dump(mode="json")))
        self.ticks += 1
        return out

    @contextlib.contextmanager
    def _part(self, what: str):
        try:
            yield
        except Exception as e:  # a broken file must not end live updates, nor cost the other parts
            self.failures += 1
            why = f"{type(e).__name__}: {str(e)[:300]}"
            if self._last_error.get(what) != why:  # logged once while it stays the same
                log.error("live update: %s failed: %s", what, why)
            self._last_error[what] = why
        else:
            self._last_error.pop(what, None)

    async def run(self) -> None:
        while True:
            try:
                msgs = await anyio.to_thread.run_sync(self.poll)
            except Exception:  # a broken file must not end live updates for everyone
                log.exception("live update poll failed")
                msgs = []
            for sub in list(self._subs):
                for m in msgs:
                    self._offer(sub, m)
            await anyio.sleep(self.interval)

    def _offer(self, sub: _Sub, msg: bytes) -> None:
        if sub.dropped:
            return
        try:
            sub.queue.put_nowait(msg)
        except asyncio.QueueFull:
            sub.dropped = True
            sub.queue.get_nowait()
            sub.queue.put_nowait(None)

    async def subscribe(self, client: str = "?") -> AsyncIterator[bytes]:
        self.streams.acquire("live-update", client)
        sub = _Sub()
        self._subs.add(sub)
        return self._stream(sub, client)

    async def _stream(self, sub: _Sub, client: str) -> AsyncIterator[bytes]:
        try:
            yield sse(
                "hello",
                {"interval": self.interval, "episodes_version": self.ctx.data.version, "run_id": self.ctx.run_id},
            )
            while True:
                try:
                    msg = await asyncio.wait_for(sub.queue.get(), timeout=15)
                except TimeoutError:
                    yield b": keep-alive\n\n"
                    continue
                if msg is None:
                    yield sse("resync", {"reason": "this client fell behind; reload"})
                    return
                yield msg
        finally:
            self._subs.discard(sub)
            self.streams.release("live-update", client)
