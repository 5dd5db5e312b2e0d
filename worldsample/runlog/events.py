"""`RUN/events.jsonl`: notable things that happened in a run, one JSON object per line.

    {"time": 1767.3e6, "kind": "policy_published", "level": "info", "source": "learner",
     "message": "policy v7 published", "data": {"version": 7}}

Typed kinds, not free text in a metrics row: the dashboard shows them as a log and marks them
on the curves' time axis.
"""

from __future__ import annotations

import time as _time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worldsample.paths import RunFiles
from worldsample.runlog.errors import RunLogError
from worldsample.runlog.jsonl import JsonlAppender, JsonlTail

KIND_RE = r"^[a-z][a-z0-9_.]{0,63}$"


class Event(BaseModel):
    model_config = ConfigDict(extra="ignore")

    time: float
    kind: str = Field(pattern=KIND_RE, description="e.g. run_started, policy_published, estop, episode_labelled")
    level: Literal["debug", "info", "warning", "error"] = "info"
    source: str = Field("", max_length=64, description="service that emitted it: trainer, bridge, dashboard, ...")
    message: str = Field("", max_length=2000)
    data: dict[str, Any] = {}


class EventLog:
    """Appends events to RUN/events.jsonl. Safe to share between threads."""

    def __init__(self, run_dir: Path | str, source: str = "", fsync: bool = False):
        self.path = RunFiles.of(run_dir).events
        self.source = source
        self._out = JsonlAppender(self.path, fsync=fsync)

    def emit(self, kind: str, message: str = "", level: str = "info", **data: Any) -> Event:
        try:
            ev = Event(time=_time.time(), kind=kind, level=level, source=self.source, message=message, data=data)
        except ValidationError as e:
            raise RunLogError(f"bad event {kind!r}: {e.errors()[0]['msg']}") from e
        self._out.append(ev.model_dump(mode="json"))
        return ev

    def close(self) -> None:
        self._out.close()


def _parse(obj: Any) -> Event:
    try:
        return Event.model_validate(obj)
    except ValidationError as e:
        raise ValueError(str(e)) from e


class EventReader:
    """Tails RUN/events.jsonl, keeping the newest `keep` events in memory."""

    def __init__(self, run_dir: Path | str, keep: int = 2000):
        self._tail = JsonlTail(RunFiles.of(run_dir).events, parse=_parse)
        self._keep = keep
        self.events: list[Event] = []
        self.total = 0

    @property
    def malformed(self) -> int:
        return self._tail.malformed

    def refresh(self) -> list[Event]:
        new = self._tail.poll()
        self.total += len(new)
        self.events.extend(new)
        if len(self.events) > self._keep:
            del self.events[: len(self.events) - self._keep]
        return new
