"""Finding a run's processes from outside, for the tests that kill one: by the run directory or the
run's Ray temp dir in a process's command line or in the path of a file it has open (Ray renames
its workers `ray::...`, but they keep their logs in the temp dir open). Written apart from
services/trainer/local_ray.py on purpose, so that a mistake there cannot hide here."""

from __future__ import annotations

import os
import time
from pathlib import Path

REAPER = "services.trainer.local_ray"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _open_files(pid: int) -> list[str]:
    out = []
    try:
        for fd in os.scandir(f"/proc/{pid}/fd"):
            try:
                out.append(os.readlink(fd.path))
            except OSError:
                pass
    except OSError:
        pass
    return out


def processes_naming(*marks: str) -> dict[int, str]:
    """pid -> command line of every process but this one that names one of `marks`."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        cmd = _cmdline(pid)
        if any(m in cmd for m in marks) or any(f.startswith(m) for f in _open_files(pid) for m in marks):
            found[pid] = cmd or "?"
    return found


def ray_temp_dir(run: Path, timeout: float = 60) -> str:
    """The Ray temp dir of the trainer running on `run`, from its reaper's command line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for cmd in processes_naming(str(run)).values():
            if REAPER in cmd:
                args = cmd.split()
                return args[args.index("--temp-dir") + 1]
        time.sleep(0.2)
    raise AssertionError(f"no Ray reaper for {run} within {timeout} s")


def left_after(marks: list[str], timeout: float = 30) -> dict[int, str]:
    """The processes still naming `marks` after `timeout` seconds ({} as soon as there are none)."""
    deadline = time.monotonic() + timeout
    while True:
        left = processes_naming(*marks)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def kill_run(run: Path) -> dict[int, str]:
    """SIGKILL what a test left of a job on `run`: the processes naming the run directory or any Ray
    temp dir its reapers name (a failed test must not leave a job training beside the next tests).
    Returns what was killed."""
    import signal

    found = processes_naming(str(run))
    temps = [a.split()[a.split().index("--temp-dir") + 1] for a in found.values()
             if REAPER in a and "--temp-dir" in a.split()]
    found.update(processes_naming(*temps) if temps else {})
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return found
