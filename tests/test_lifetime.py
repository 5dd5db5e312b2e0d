"""Watching a supervisor process: its exit is noticed (a zombie counts as gone), a reused pid is not it."""

import os
import subprocess
import sys
import threading

from worldsample.lifetime import ProcessRef, watch


def child() -> subprocess.Popen:
    """A process that exits when its stdin is closed."""
    return subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)


def test_watch_calls_back_once_the_process_has_exited():
    p = child()
    try:
        ref = ProcessRef.of(p.pid)
        assert ref is not None and ref.alive()
        gone = threading.Event()
        watch(ref, gone.set, period_s=0.05)
        assert not gone.wait(0.3)
        p.stdin.close()  # it exits; not waited for yet, so it is a zombie
        assert gone.wait(10)
        assert not ref.alive() and ProcessRef.of(p.pid) is None
    finally:
        p.kill()
        p.wait()


def test_a_reused_pid_is_not_the_process_that_had_it():
    p = child()
    try:
        ref = ProcessRef.of(p.pid)
        assert ref is not None and ref.start is not None
        # the same pid with another start time: what a new process given a dead one's pid looks like
        assert not ProcessRef(p.pid, ref.start + 1).alive()
        gone = threading.Event()
        watch(ProcessRef(p.pid, ref.start + 1), gone.set, period_s=0.05)
        assert gone.wait(5)
        # a process that started after this one cannot be the one that started it: its pid was reused
        assert ProcessRef.supervisor(p.pid) is None
        assert ProcessRef.supervisor(os.getppid()) is not None
    finally:
        p.stdin.close()
        p.wait()
    gone = threading.Event()
    watch(None, gone.set)  # already gone when the watch began
    assert gone.wait(5)
