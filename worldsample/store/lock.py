"""One writer per group: an advisory `flock` on a lock file.

The kernel drops the lock when its holder dies, SIGKILL included, so a crashed writer never
leaves a stale lock behind (tests/store/test_lock.py kills one). The holder writes its pid into
the file, so a writer that finds the lock taken can say which process holds it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from worldsample.errors import WriterLockedError


def _command_line(pid: int, limit: int = 160) -> str | None:
    """The process's command line from /proc, or None when it is gone or not readable."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    cmd = " ".join(raw.decode(errors="replace").replace("\0", " ").split())  # one line, whatever the arguments
    return cmd if len(cmd) <= limit else cmd[: limit - 3] + "..."


def describe_holder(holder: str) -> str:
    """Who holds a lock, from the pid its holder wrote, and what to do about it: one line."""
    if not holder.isdigit():  # the holder took the lock and has not written its pid yet
        return "(pid unknown); wait for it to finish, or stop the other writer of this run directory"
    pid = int(holder)
    if pid == os.getpid():
        return f"(pid {pid}) in this process; close the other writer of this group first"
    cmd = _command_line(pid)
    if cmd is None and not Path(f"/proc/{pid}").exists():
        # a flock survives its taker only in a child that inherited the descriptor
        return (f"(pid {pid}), which is no longer running: a process it started still holds the lock; "
                "stop that process or wait for it to exit")
    running = f" running `{cmd}`" if cmd else ""
    return (f"(pid {pid}){running}; stop it (kill {pid}) or wait for it to exit; "
            "a process that died releases the lock by itself")


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
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
            os.close(fd)
            raise WriterLockedError(f"{self.what} already has a writer {describe_holder(holder)}") from None
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
