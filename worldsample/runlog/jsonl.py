"""JSON Lines files that one process appends to and others tail.

The appender writes each record as one `write()` of a complete line to a file opened with
O_APPEND. The tail reader keeps a byte offset and consumes only complete lines, so a line the
writer is still in the middle of is read on a later poll, never half. Malformed lines are
skipped, counted and logged (once per line), so one bad line cannot stop a dashboard.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 1 << 20  # a longer "line" is garbage (or not a JSON Lines file at all)


class JsonlAppender:
    """Appends JSON objects, one per line. Thread-safe; `fsync=True` for durability per line."""

    def __init__(self, path: Path, fsync: bool = False):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        self._lock = threading.Lock()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, obj: dict[str, Any]) -> None:
        line = (json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n").encode()
        with self._lock:
            if self._fd < 0:
                raise ValueError(f"{self.path} is closed")
            os.write(self._fd, line)
            if self._fsync:
                os.fsync(self._fd)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class JsonlTail:
    """Reads the complete lines appended since the last `poll()`.

    `parse` turns a decoded object into a record or raises ValueError; such lines count as
    malformed. A file that shrank (truncated or replaced) is read again from the start."""

    def __init__(self, path: Path, parse: Callable[[Any], Any] = lambda o: o, chunk_bytes: int = 1 << 22):
        self.path = Path(path)
        self._parse = parse
        self._chunk = chunk_bytes
        self.offset = 0
        self.lines = 0
        self.malformed = 0
        self.resets = 0

    def poll(self, max_bytes: int | None = None) -> list[Any]:
        return list(self._iter_new(max_bytes))

    def _iter_new(self, max_bytes: int | None) -> Iterator[Any]:
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return
        with f:
            size = os.fstat(f.fileno()).st_size
            if size < self.offset:
                log.warning(
                    "%s shrank from %d to %d bytes: reading it again from the start", self.path, self.offset, size
                )
                self.offset, self.resets = 0, self.resets + 1
            budget = max_bytes if max_bytes is not None else size - self.offset
            f.seek(self.offset)
            while budget > 0:
                data = f.read(min(self._chunk, budget))
                if not data:
                    return
                end = data.rfind(b"\n")
                if end < 0:
                    if len(data) >= MAX_LINE_BYTES:  # no newline in a megabyte: skip it as one bad line
                        self._bad(self.offset, "line longer than 1 MiB")
                        self.offset += len(data)
                        budget -= len(data)
                        continue
                    return  # a partial last line: wait for the writer to finish it
                for raw in data[: end + 1].splitlines():
                    rec = self._decode(raw)
                    if rec is not None:
                        yield rec
                self.offset += end + 1
                budget -= end + 1
                f.seek(self.offset)

    def _decode(self, raw: bytes) -> Any:
        if not raw.strip():
            return None
        self.lines += 1
        try:
            return self._parse(json.loads(raw))
        except (ValueError, TypeError, RecursionError) as e:  # RecursionError: nested past the parser
            self._bad(self.offset, str(e)[:200])
            return None

    def _bad(self, offset: int, why: str) -> None:
        self.malformed += 1
        log.warning("%s: skipping malformed line near byte %d: %s", self.path, offset, why)
