"""The trainer's local Ray cluster and its reaper, so that no Ray process outlives the driver.

`ray.init()` without an address starts a cluster owned by the driver. When the driver dies
without `ray.shutdown()` (SIGKILL, the OOM killer) Ray ends most of it, but its agents
(`ray::DashboardAgent`, `ray::RuntimeEnvAgent`) stay and ignore SIGTERM. `LocalRay` gives the
cluster a temp dir of its own and starts a reaper: a small process in its own session (a signal
to the driver's process group does not reach it) that waits until the driver is gone or says it
has finished (closes the reaper's stdin), then ends every process of that cluster, found by the
temp dir in its command line or its open files (SIGTERM, SIGKILL after a few seconds), keeps the
cluster's logs in RUN/ray_logs/ and removes the temp dir.

    python -m services.trainer.local_ray --driver PID:START --temp-dir DIR [--logs RUN/ray_logs]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from worldsample.lifetime import ProcessRef, watch
from worldsample.paths import RunFiles

TEMP_ROOT = "/tmp"  # Ray's unix sockets live under the temp dir: a long path breaks the 107-byte limit
GRACE_S = 3.0


class LocalRay:
    """`with LocalRay(run_dir) as local: ray.init(..., _temp_dir=str(local.temp_dir))`; call
    `ray.shutdown()` inside the block. On exit the reaper tidies up and is waited for."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.logs = RunFiles.of(self.run_dir).ray_logs
        self.temp_dir = Path()
        self.reaper: subprocess.Popen | None = None

    def __enter__(self) -> LocalRay:
        self.temp_dir = Path(tempfile.mkdtemp(prefix="wsray-", dir=TEMP_ROOT))
        me = ProcessRef.of(os.getpid())
        start = "" if me is None or me.start is None else str(me.start)
        cmd = [sys.executable, "-m", "services.trainer.local_ray", "--driver", f"{os.getpid()}:{start}",
               "--temp-dir", str(self.temp_dir), "--logs", str(self.logs)]
        with open(RunFiles.of(self.run_dir).log("ray-reaper"), "a") as log:
            self.reaper = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True)
        return self

    def __exit__(self, *exc) -> None:
        assert self.reaper is not None
        self.reaper.stdin.close()  # type: ignore[union-attr]  # "finished": the reaper sweeps and exits
        try:
            self.reaper.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass  # it finishes on its own; nothing here depends on it


def _names(pid: int, mark: str) -> bool:
    """Whether process `pid` has `mark` in its command line or the path of an open file."""
    try:
        if mark.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
            return True
        fds = list(os.scandir(f"/proc/{pid}/fd"))
    except OSError:  # gone, or not ours
        return False
    for fd in fds:
        try:
            if os.readlink(fd.path).startswith(mark):
                return True
        except OSError:
            continue
    return False


def session_processes(temp_dir: Path, spare: int | None = None) -> list[ProcessRef]:
    """Every process but this one and `spare` that names `temp_dir` (Ray renames its workers
    `ray::...`, but they keep their log files in the temp dir open)."""
    if not Path("/proc/self").exists():
        return []
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) in (os.getpid(), spare):
            continue
        if _names(int(entry.name), str(temp_dir)):
            ref = ProcessRef.of(int(entry.name))
            if ref is not None:
                found.append(ref)
    return found


def _signal(procs: list[ProcessRef], sig: int) -> None:
    for p in procs:
        if p.alive():  # never a process that took the pid over since
            try:
                os.kill(p.pid, sig)
            except ProcessLookupError:
                pass


def end_session(temp_dir: Path, spare: int | None = None, grace_s: float = GRACE_S, rounds: int = 5) -> int:
    """SIGTERM every process of the session but `spare` (a driver that finished normally still has
    Ray's files open), SIGKILL what is left after `grace_s`; again until a search finds none (a
    dying raylet may still start a worker). The number of processes ended."""
    ended = 0
    for _ in range(rounds):
        procs = session_processes(temp_dir, spare)
        if not procs:
            break
        _signal(procs, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while any(p.alive() for p in procs) and time.monotonic() < deadline:
            time.sleep(0.1)
        _signal(procs, signal.SIGKILL)
        ended += len(procs)
    return ended


def keep_logs(temp_dir: Path, dest: Path) -> None:
    """Copy each Ray session's logs/ to dest/<session>/."""
    for session in temp_dir.glob("session_*"):
        if session.is_symlink() or not (session / "logs").is_dir():  # session_latest links to one of them
            continue
        shutil.copytree(session / "logs", dest / session.name, symlinks=True, dirs_exist_ok=True)


def reap(driver: ProcessRef, temp_dir: Path, logs: Path | None) -> str:
    """Wait for the driver to go or finish, then end its cluster and tidy up; one line on what was done."""
    done = threading.Event()

    def until_stdin_closes() -> None:
        sys.stdin.buffer.read()
        done.set()

    watch(driver, done.set)
    threading.Thread(target=until_stdin_closes, daemon=True).start()
    done.wait()
    finished = driver.alive()
    why = "driver finished" if finished else f"driver pid {driver.pid} is gone"
    ended = end_session(temp_dir, spare=driver.pid if finished else None)
    kept = ""
    if logs is not None:
        try:
            keep_logs(temp_dir, logs)
            kept = f"; logs kept in {logs}"
        except OSError as e:
            kept = f"; logs not kept ({e})"
    shutil.rmtree(temp_dir, ignore_errors=True)
    return f"local Ray {temp_dir}: {why}; ended {ended} process(es) left of it{kept}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m services.trainer.local_ray", description=__doc__.splitlines()[0])
    ap.add_argument("--driver", required=True, help="PID:START of the driver (START from /proc/PID/stat)")
    ap.add_argument("--temp-dir", required=True, type=Path, help="the cluster's own Ray temp dir")
    ap.add_argument("--logs", type=Path, help="where to keep the cluster's logs")
    args = ap.parse_args(argv)
    pid, _, start = args.driver.partition(":")
    line = reap(ProcessRef(int(pid), int(start) if start else None), args.temp_dir, args.logs)
    print(time.strftime("%Y-%m-%d %H:%M:%S"), line, flush=True)


if __name__ == "__main__":
    main()
