"""One writer per group: an advisory `flock` on a lock file.

The kernel drops the lock when its holder dies, SIGKILL included, so a crashed writer never
leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from worldsample.errors import WriterLockedError


class WriterLock:
    def __init__(self, path: Path, what: str):
        self.path = path
        self.what = what
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise WriterLockedError(
                f"{self.what} already has a writer (pid {holder}); a group takes one writer at a time. "
                "Stop the other writer or write to another run directory."
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def is_locked_elsewhere(self) -> bool:
        """True when some writer holds the lock (for `store info`); never blocks."""
        if not self.path.exists():
            return False
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
