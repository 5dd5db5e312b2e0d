import os
import signal

import pytest

from worldsample.errors import WriterLockedError

from .helpers import make_episode, new_store
from .test_crash import start_writer


def test_second_writer_gets_clear_error_and_lock_dies_with_holder(tmp_path):
    store = new_store(tmp_path)
    p = start_writer(tmp_path, count=10_000, step_sleep=0.01)
    try:
        assert p.stdout.readline().strip() == "ready"
        with pytest.raises(WriterLockedError, match=rf"already has a writer \(pid {p.pid}\)"):
            store.writer("demo")
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.communicate()
    with store.writer("demo") as w:  # the kernel released the dead writer's lock
        w.append_episode(make_episode(0, 3))


def test_same_process_second_writer_rejected(tmp_path):
    store = new_store(tmp_path)
    with store.writer("demo"):
        with pytest.raises(WriterLockedError):
            store.writer("demo")
    store.writer("demo").close()


def test_reader_sees_commits_from_another_process_without_reopening(tmp_path):
    store = new_store(tmp_path)
    reader = store.reader("demo")
    assert reader.num_episodes == 0
    p = start_writer(tmp_path, count=3, step_sleep=0.0)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert reader.num_episodes == 0  # nothing changes until refresh
    assert reader.refresh() == 3
    assert reader.num_episodes == 3 and reader.cache.size == reader.num_steps
    assert reader.refresh() == 0


def test_uncommitted_episode_is_invisible(tmp_path):
    store = new_store(tmp_path, chunk_len=2)
    data = make_episode(3, 9)
    with store.writer("demo") as w:
        ep = w.begin_episode()
        for t in range(8):  # several chunks already flushed to disk
            ep.add_step({k: v[t] for k, v in data.items()})
        r = store.reader("demo")
        assert r.num_episodes == 0
        ep.add_step({k: v[8] for k, v in data.items()})
        ep.commit()
        assert r.refresh() == 1
