"""Tie a process's life to another's: notice when the process that started it is gone.

A pid alone does not name a process: once a process exits the kernel may give its pid to a new
one. Here a process is its pid and its start time (field 22 of /proc/PID/stat), so a reused pid is
never taken for the process that had it. A zombie (exited, not yet waited for) counts as gone.
Where there is no /proc the pid alone is checked.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_PROC = Path("/proc/self/stat").exists()


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks after boot) of `pid`, or None when there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the command name in parentheses may hold spaces
    return fields[0], int(fields[19])


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


@dataclass(frozen=True)
class ProcessRef:
    pid: int
    start: int | None  # clock ticks after boot; None where there is no /proc

    @classmethod
    def of(cls, pid: int) -> ProcessRef | None:
        """The process that has `pid` now; None when there is none (or only a zombie)."""
        if not _PROC:
            return cls(pid, None) if _pid_exists(pid) else None
        st = _stat(pid)
        if st is None or st[0] in "ZX":
            return None
        return cls(pid, st[1])

    @classmethod
    def supervisor(cls, pid: int) -> ProcessRef | None:
        """The process at `pid`, if it can be the one that started this process: one that started
        after this process holds a reused pid, and the supervisor is gone (None)."""
        ref, me = cls.of(pid), cls.of(os.getpid())
        if ref is None or (ref.start is not None and me is not None and me.start is not None and ref.start > me.start):
            return None
        return ref

    def alive(self) -> bool:
        now = ProcessRef.of(self.pid)
        return now is not None and now.start == self.start


def watch(process: ProcessRef | None, on_gone: Callable[[], None], period_s: float = 0.5) -> threading.Thread:
    """Call `on_gone` once, from a daemon thread, as soon as `process` has exited (at once when it is
    None: already gone). Polls every `period_s`."""

    def loop() -> None:
        while process is not None and process.alive():
            time.sleep(period_s)
        on_gone()

    thread = threading.Thread(target=loop, name="supervisor-watch", daemon=True)
    thread.start()
    return thread
