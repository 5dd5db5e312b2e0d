"""The writer lock of a group: a holder that dies (SIGKILL) leaves no stale lock, and a writer that
finds the lock taken learns which process holds it and what to do, in one line."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from worldsample.errors import WriterLockedError
from worldsample.store.verify import verify_store

from .helpers import make_episode, new_store

ROOT = Path(__file__).resolve().parents[2]

# takes the demo group's writer lock with an episode half written, then waits to be killed;
# with `fork`, hands the lock to a child and exits, so the pid in the lock file is a dead process
HOLDER = """
import os, sys, time
from tests.store.helpers import make_episode
from worldsample.store import EpisodeStore
w = EpisodeStore(sys.argv[1]).writer("demo")
ep = w.begin_episode()
data = make_episode(1, 9)
for t in range(6):
    ep.add_step({k: v[t] for k, v in data.items()})
if sys.argv[2] == "fork" and os.fork() != 0:
    os._exit(0)
print("ready", os.getpid(), flush=True)
time.sleep(120)
"""


def start_holder(run_dir, mode: str = "hold") -> tuple[subprocess.Popen, int]:
    """The holder process and the pid of the process that holds the lock (its child with `fork`)."""
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(run_dir), mode], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    line = p.stdout.readline().split()
    assert line[:1] == ["ready"], p.stderr.read()
    return p, int(line[1])


def test_a_writer_killed_while_holding_the_lock_leaves_no_stale_lock(tmp_path):
    store = new_store(tmp_path, chunk_len=2)
    p, pid = start_holder(tmp_path)
    assert store.writer_active("demo")
    os.kill(pid, signal.SIGKILL)
    p.wait(timeout=30)
    lock_file = tmp_path / "store" / "demo" / "writer.lock"
    assert lock_file.read_text() == str(pid)  # the dead holder's pid is still in the file: no cleanup ran
    assert not store.writer_active("demo")  # the kernel released the dead holder's flock
    with store.writer("demo") as w:  # taken without waiting (the lock is tried once, LOCK_NB): no stale lock
        assert lock_file.read_text() == str(os.getpid())
        rec = w.append_episode(make_episode(2, 5))
    assert rec.episode == 0  # the killed holder's half-written episode never committed
    assert verify_store(tmp_path).ok


def test_a_held_lock_names_its_holder_and_what_to_do(tmp_path):
    store = new_store(tmp_path)
    p, pid = start_holder(tmp_path)
    try:
        with pytest.raises(WriterLockedError) as e:
            store.writer("demo")
    finally:
        os.kill(pid, signal.SIGKILL)
        p.wait(timeout=30)
    msg = str(e.value)
    assert "\n" not in msg
    assert f"group 'demo' in {tmp_path / 'store'} already has a writer (pid {pid})" in msg
    assert "running `" in msg and "from tests.store.helpers import make_episode" in msg  # its command line
    assert f"stop it (kill {pid}) or wait for it to exit; a process that died releases the lock by itself" in msg


def test_a_lock_kept_by_a_forked_child_says_its_taker_is_gone(tmp_path):
    store = new_store(tmp_path)
    p, child = start_holder(tmp_path, mode="fork")
    try:
        p.wait(timeout=30)  # the process that took the lock exited; its child still has the descriptor
        with pytest.raises(WriterLockedError, match=rf"\(pid {p.pid}\), which is no longer running: a process it "
                                                    "started still holds the lock"):
            store.writer("demo")
    finally:
        os.kill(child, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while store.writer_active("demo") and time.monotonic() < deadline:  # the child is not ours to reap
        time.sleep(0.05)
    store.writer("demo").close()


def test_a_second_writer_in_the_same_process(tmp_path):
    store = new_store(tmp_path)
    with store.writer("demo"):
        with pytest.raises(WriterLockedError, match=rf"\(pid {os.getpid()}\) in this process; close the other"):
            store.writer("demo")
