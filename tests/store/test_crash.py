"""SIGKILL a writer at random moments, many times: the store must open, every committed episode
must be intact, and the partial one must be gone."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from worldsample.store import EpisodeStore
from worldsample.store.verify import verify_store

from .helpers import make_episode, new_store

ROOT = Path(__file__).resolve().parents[2]


def start_writer(run_dir, count=10_000, step_sleep=0.002):
    return subprocess.Popen(
        [sys.executable, "-m", "tests.store.writer_proc", str(run_dir), str(count), str(step_sleep)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_sigkill_at_random_points_keeps_committed_episodes(tmp_path):
    new_store(tmp_path, chunk_len=4)
    rng = np.random.default_rng(7)
    reported: dict[int, tuple[int, int]] = {}
    kills = 20
    for _ in range(kills):
        p = start_writer(tmp_path)
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
        time.sleep(float(rng.uniform(0.0, 0.4)))
        os.kill(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        for line in out.splitlines():
            _, eid, seed, length = line.split()
            reported[int(eid)] = (int(seed), int(length))

        rep = verify_store(tmp_path)
        assert rep.ok, rep.problems
        r = EpisodeStore(tmp_path).reader("demo")
        # everything the writer said it committed is there, bit for bit
        for eid, (seed, length) in reported.items():
            want = make_episode(seed, length, terminal=eid % 2 == 0)
            got = r.episode(eid)
            for k in want:
                np.testing.assert_array_equal(got[k], want[k], err_msg=f"episode {eid} key {k}")
        # ids are dense: no partial episode ever became visible, none was lost
        assert sorted(r.records) == list(range(len(r.records)))
    assert len(reported) > kills // 2, "the writer should have committed episodes between kills"


def chunks_past(cdir: Path, committed_end: int, chunk_len: int) -> list[int]:
    """The chunk files that hold only steps past the last committed one (a partial episode's)."""
    first = -(-committed_end // chunk_len)  # the chunk the committed data ends in may be shared
    if not cdir.is_dir():
        return []
    return sorted(int(c) for c in os.listdir(cdir) if int(c) >= first)


def test_new_writer_after_crash_removes_partial_chunks(tmp_path):
    store = new_store(tmp_path, chunk_len=2)
    p = start_writer(tmp_path, count=10_000, step_sleep=0.02)
    assert p.stdout.readline().strip() == "ready"
    assert p.stdout.readline().startswith("committed 0 ")  # the second episode is in flight
    committed_end = max(rec.end for rec in store.reader("demo").records.values())
    cdir = store.root / "demo" / "data" / "proprio" / "c"
    # kill only once the in-flight episode has flushed chunks of its own, so the kill cannot land
    # between episodes and leave nothing to clean up
    deadline = time.monotonic() + 10
    while not (partial := chunks_past(cdir, committed_end, 2)) and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(p.pid, signal.SIGKILL)
    p.communicate()
    assert partial, "the in-flight episode never flushed a chunk before the kill"
    r = store.reader("demo")
    assert max(rec.end for rec in r.records.values()) == committed_end, "the kill came after the next commit"
    assert set(partial) <= set(chunks_past(cdir, committed_end, 2))  # the crash left them behind
    with store.writer("demo"):
        pass  # opening cleans up
    assert chunks_past(cdir, committed_end, 2) == []
