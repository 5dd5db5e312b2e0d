"""Operator labels: a person's success or failure verdict on a committed episode, kept beside it.

Committed episodes never change, so a verdict is not written into the episode: it is one line of

    RUN/store/<group>/labels.jsonl    {"episode": 3, "success": false, "time": ..., "source": "dashboard",
                                       "request": "<control request id>", "reason": "...", "crc": <crc32>}

appended under an flock on `labels.lock` (one labeller at a time, beside the group's own single
writer, which never touches these files) by rewriting the whole file to a temp file, fsync and
rename: readers see the old file or the new one, never a torn line. Lines are only ever added;
the newest line for an episode is its label. Each line holds the crc32 of the rest of it; a line
that does not parse or whose crc does not match is skipped, counted and logged (one bad line costs
that label, not the others). A request id that is already in the file is not appended again, so
a control request delivered twice (at least once delivery) labels once.

What a label changes, for readers with a step cache (`GroupReader` applies it when an episode
enters its cache and again whenever this file changes; the commit record and the chunks on disk
stay as recorded):

- success, on an episode recorded as a failure: `success` true at the last step only, `done` true
  there, and the episode ends in a terminal state: the success reward is a sparse 1 at that step.
  On an episode recorded as a success: nothing changes.
- failure: `success` false at every step (no success reward anywhere). An episode recorded as a
  success that terminated is no longer terminal (`done` false at its last step): its end came from
  the success detection, so it is treated like a time-limit cut (its last step is not sampled and
  earlier steps bootstrap). An episode recorded as a failure does not change.

The task's own `reward` key is never changed.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time as _time
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worldsample.atomic import atomic_write_text
from worldsample.errors import StoreError
from worldsample.store.records import EpisodeRecord, record_path

log = logging.getLogger(__name__)

LABELS_FILE = "labels.jsonl"
LABELS_LOCK = "labels.lock"
MAX_LINE_BYTES = 4096  # a label is about 200 bytes; a longer line is damage
MAX_FILE_BYTES = 64 << 20


class Label(BaseModel):
    model_config = ConfigDict(extra="forbid")

    episode: int = Field(ge=0)
    success: bool = Field(description="the person's verdict")
    time: float = Field(default_factory=_time.time)
    source: str = Field("", max_length=64, description="who sent it: dashboard, cli, ...")
    request: str | None = Field(None, max_length=64, description="the control request that carried it")
    reason: str = Field("", max_length=500)


def _crc(fields: dict) -> int:
    return zlib.crc32(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode())


def encode_line(label: Label) -> str:
    fields = label.model_dump(mode="json")
    return json.dumps({**fields, "crc": _crc(fields)}, separators=(",", ":"), allow_nan=False) + "\n"


def decode_line(line: bytes) -> Label:
    """One label; ValueError saying why when the line is not one."""
    if len(line) > MAX_LINE_BYTES:
        raise ValueError(f"line longer than {MAX_LINE_BYTES} bytes")
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"not JSON: {str(e)[:100]}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("crc"), int):
        raise ValueError("not a label object with a crc")
    crc = obj.pop("crc")
    if _crc(obj) != crc:
        raise ValueError("crc does not match its content")
    try:
        return Label.model_validate(obj)
    except ValidationError as e:
        raise ValueError(str(e)[:200]) from None


class LabelLog:
    """The labels of one group (`group_path` is RUN/store/<group>)."""

    def __init__(self, group_path: Path, name: str = ""):
        self.group_path = Path(group_path)
        self.name = name or self.group_path.name
        self.path = self.group_path / LABELS_FILE
        self.malformed = 0  # lines skipped by the last read
        self._reported: set[str] = set()

    def signature(self) -> tuple[int, int, int] | None:
        """Changes whenever the file is replaced (inode, size, mtime); None while there is none."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    def _raw(self) -> bytes:
        try:
            with open(self.path, "rb") as f:
                raw = f.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return b""
        if len(raw) > MAX_FILE_BYTES:
            raise StoreError(f"{self.path} is larger than {MAX_FILE_BYTES} bytes: not a label file")
        return raw

    def read(self) -> list[Label]:
        """Every good line, in file order (bad ones skipped, counted in `malformed` and logged once)."""
        out, bad = [], 0
        for n, line in enumerate(self._raw().splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.append(decode_line(line))
            except ValueError as e:
                bad += 1
                why = f"{self.path} line {n}: {e}"
                if why not in self._reported:
                    self._reported.add(why)
                    log.error("group %r: skipping a damaged label: %s", self.name, why)
        self.malformed = bad
        return out

    def current(self) -> dict[int, Label]:
        """The label of each labelled episode: its newest line."""
        return {lab.episode: lab for lab in self.read()}

    def append(self, episode: int, success: bool, source: str = "", request: str | None = None,
               reason: str = "") -> Label:
        """Label a committed episode. StoreError when the group has no such committed episode.
        A `request` already in the file is not appended again: its label is returned."""
        if not record_path(self.group_path / "commits", episode).exists():
            raise StoreError(f"group {self.name!r} has no committed episode {episode} to label")
        try:
            label = Label(episode=episode, success=success, source=source, request=request, reason=reason)
        except ValidationError as e:
            raise StoreError(f"bad label for {self.name}/episode {episode}: {e.errors()[0]['msg']}") from None
        fd = os.open(self.group_path / LABELS_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = self._raw()
            if request is not None:
                for old in self.read():
                    if old.request == request:
                        return old
            if raw and not raw.endswith(b"\n"):
                raw += b"\n"
            atomic_write_text(self.path, raw.decode("utf-8", errors="replace") + encode_line(label))
            return label
        finally:
            os.close(fd)  # closing releases the flock


@dataclass(frozen=True)
class Recorded:
    """The columns a label may change, as recorded."""

    success: np.ndarray
    done: np.ndarray
    terminated: bool


def apply_label(rec: EpisodeRecord, recorded: Recorded, label: Label | None) -> tuple[np.ndarray, np.ndarray, bool]:
    """(success, done, terminal) of an episode as its label says (as recorded without one)."""
    if label is None or label.success == rec.success:
        return recorded.success, recorded.done, recorded.terminated
    success = np.zeros_like(recorded.success)
    done = recorded.done.copy()
    if label.success:
        success[-1] = True
        done[-1] = True
        return success, done, True
    if recorded.terminated:
        done[-1] = False
    return success, done, False
