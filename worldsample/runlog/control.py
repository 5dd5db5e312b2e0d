"""`RUN/control/`: requests from people (through the dashboard) to the services that act.

A request is an immutable JSON file, written atomically, named so that names sort by time:

    RUN/control/requests/<time_ns>-<id>.json      {"version": 1, "id": ..., "kind": "pause", ...}
    RUN/control/acks/<consumer>/<id>.json         {"id": ..., "consumer": "trainer", "result": "done", ...}

Every consumer (the trainer, the bridge) sees every request and picks the kinds it handles;
it acknowledges each one it saw, so delivery is at least once per consumer and survives a
restart (unacknowledged requests are delivered again). Requests that move the robot expire:
a "start_episode" typed an hour ago must not start one now. An e-stop never expires.

Who handles what: pause, resume and label go to the trainer; estop, start_episode and
stop_episode go to the bridge (the trainer also watches estop, to stop sending actions).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time as _time
import uuid
from enum import Enum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from worldsample.atomic import atomic_write_json
from worldsample.paths import RunFiles
from worldsample.runlog.errors import ControlError

log = logging.getLogger(__name__)

CONSUMER_RE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


class ControlKind(str, Enum):
    pause = "pause"
    resume = "resume"
    estop = "estop"
    start_episode = "start_episode"
    stop_episode = "stop_episode"
    label = "label"


# seconds after which a request is stale and acknowledged as "expired" instead of acted on
DEFAULT_TTL: dict[ControlKind, float | None] = {
    ControlKind.pause: None,
    ControlKind.resume: None,
    ControlKind.estop: None,
    ControlKind.start_episode: 10.0,
    ControlKind.stop_episode: 10.0,
    ControlKind.label: None,
}
HANDLERS: dict[ControlKind, tuple[str, ...]] = {
    ControlKind.pause: ("trainer",),
    ControlKind.resume: ("trainer",),
    ControlKind.estop: ("bridge", "trainer"),
    ControlKind.start_episode: ("bridge",),
    ControlKind.stop_episode: ("bridge",),
    ControlKind.label: ("trainer",),
}


class ControlCommand(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    id: str = Field(default_factory=lambda: uuid.uuid4().hex, pattern=r"^[0-9a-f]{32}$")
    kind: ControlKind
    time: float = Field(default_factory=_time.time)
    expires: float | None = Field(None, description="unix time after which consumers ignore it")
    source: str = Field("dashboard", max_length=64)
    reason: str = Field("", max_length=500)
    group: str | None = Field(None, max_length=32, description="label: the episode's store group")
    episode: int | None = Field(None, ge=0, description="label: the episode id")
    success: bool | None = Field(None, description="label: the person's verdict")

    @model_validator(mode="after")
    def _label_fields(self) -> ControlCommand:
        has = (self.group is not None, self.episode is not None, self.success is not None)
        if self.kind == ControlKind.label and not all(has):
            raise ValueError("a label request needs group, episode and success")
        if self.kind != ControlKind.label and any(has):
            raise ValueError(f"{self.kind.value} takes no group, episode or success")
        return self

    @property
    def file_name(self) -> str:
        return f"{int(self.time * 1e9):020d}-{self.id}.json"


class Ack(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    consumer: str
    time: float
    result: Literal["done", "rejected", "expired", "ignored"]
    note: str = ""


class ControlChannel:
    """Send requests (the dashboard) or poll and acknowledge them (a consumer)."""

    def __init__(self, run_dir: Path | str):
        root = RunFiles.of(run_dir).control
        self.requests = root / "requests"
        self.acks = root / "acks"
        self._delivered: dict[str, set[str]] = {}
        self._malformed: set[str] = set()

    # -- sending -----------------------------------------------------------------------------
    def send(self, cmd: ControlCommand | ControlKind | str, **fields) -> ControlCommand:
        if not isinstance(cmd, ControlCommand):
            try:
                kind = ControlKind(cmd)
                ttl = DEFAULT_TTL[kind]
                cmd = ControlCommand(kind=kind, **fields)
                if ttl is not None and cmd.expires is None:
                    cmd = cmd.model_copy(update={"expires": cmd.time + ttl})
            except (ValueError, ValidationError) as e:
                raise ControlError(f"bad control request {cmd!r}: {e}") from e
        atomic_write_json(self.requests / cmd.file_name, cmd.model_dump(mode="json"))
        return cmd

    # -- consuming ---------------------------------------------------------------------------
    def poll(self, consumer: str, kinds: set[ControlKind] | None = None) -> list[ControlCommand]:
        """Requests of `kinds` that `consumer` has not acknowledged and was not given yet by
        this channel, oldest first. Expired ones are acknowledged as such and not returned.
        Requests of other kinds are acknowledged as "ignored" so they are not listed again."""
        _check_consumer(consumer)
        seen = self._delivered.setdefault(consumer, set())
        out = []
        for cmd in self._pending(consumer, seen):
            seen.add(cmd.id)
            if kinds is not None and cmd.kind not in kinds:
                self.ack(consumer, cmd, "ignored")
            elif cmd.expires is not None and _time.time() > cmd.expires:
                self.ack(consumer, cmd, "expired", "older than its time to live")
            else:
                out.append(cmd)
        return out

    def ack(self, consumer: str, cmd: ControlCommand, result: str = "done", note: str = "") -> None:
        _check_consumer(consumer)
        ack = Ack(id=cmd.id, consumer=consumer, time=_time.time(), result=result, note=note[:500])
        atomic_write_json(self.acks / consumer / f"{cmd.id}.json", ack.model_dump())

    def _pending(self, consumer: str, seen: set[str]) -> list[ControlCommand]:
        acked = {n[:-5] for n in _listdir(self.acks / consumer) if n.endswith(".json")}
        out = []
        for name in sorted(_listdir(self.requests)):
            if not name.endswith(".json") or name.startswith("."):
                continue
            cid = name[:-5].rpartition("-")[2]
            if cid in acked or cid in seen:
                continue
            cmd = self._read(self.requests / name)
            if cmd is not None:
                out.append(cmd)
        return out

    # -- history (the dashboard) -------------------------------------------------------------
    def history(self, limit: int = 50) -> list[tuple[ControlCommand, list[Ack]]]:
        """The newest `limit` requests, newest first, each with its acknowledgements."""
        names = sorted(
            (n for n in _listdir(self.requests) if n.endswith(".json") and not n.startswith(".")), reverse=True
        )
        consumers = [c for c in _listdir(self.acks) if CONSUMER_RE.match(c)]
        out = []
        for name in names[:limit]:
            cmd = self._read(self.requests / name)
            if cmd is None:
                continue
            acks = []
            for c in consumers:
                p = self.acks / c / f"{cmd.id}.json"
                if p.exists():
                    try:
                        acks.append(Ack.model_validate_json(p.read_bytes()))
                    except (OSError, ValidationError):
                        pass
            out.append((cmd, acks))
        return out

    def _read(self, path: Path) -> ControlCommand | None:
        if path.name in self._malformed:
            return None
        try:
            return ControlCommand.model_validate(json.loads(path.read_bytes()))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, ValidationError) as e:
            self._malformed.add(path.name)
            log.warning("ignoring malformed control request %s: %s", path, e)
            return None


def _check_consumer(name: str) -> None:
    if not CONSUMER_RE.match(name):
        raise ControlError(f"consumer name {name!r} must match {CONSUMER_RE.pattern}")


def _listdir(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except FileNotFoundError:
        return []
