"""GroupReader's window reads (`read_steps`) and its on-disk commit check (`is_committed`)."""

import numpy as np
import pytest

from worldsample.errors import StoreCorruptError, StoreError
from worldsample.store import Retention

from .helpers import make_episode, new_store


def test_read_steps_returns_the_stored_window_of_one_key(tmp_path):
    store = new_store(tmp_path, chunk_len=4)
    eps = {seed: make_episode(seed, length) for seed, length in ((0, 7), (1, 10), (2, 3))}
    with store.writer("demo") as w:
        ids = {seed: w.append_episode(data).episode for seed, data in eps.items()}
    r = store.reader("demo", cache=False)
    for seed, data in eps.items():
        n = len(data["reward"])
        for key in ("image_cam", "proprio", "action", "reward"):
            whole = r.read_steps(ids[seed], key)
            np.testing.assert_array_equal(whole, data[key], err_msg=f"{seed}/{key}")
            windows = [(0, 1), (1, 3), (3, 5), (2, n), (n - 1, n), (n, n)]  # inside, across chunk edges, empty
            for lo, hi in (w for w in windows if w[1] <= n):
                np.testing.assert_array_equal(r.read_steps(ids[seed], key, lo, hi), data[key][lo:hi])
    assert r.read_steps(ids[1], "image_cam", 4, 8).shape == (4, 8, 8, 3)


def test_read_steps_sees_arrays_the_writer_grew_after_the_reader_opened(tmp_path):
    store = new_store(tmp_path, chunk_len=2)
    r = store.reader("demo", cache=False)  # opened on zero-length arrays
    data = make_episode(5, 40)
    with store.writer("demo") as w:
        eid = w.append_episode(data).episode
    r.refresh()
    np.testing.assert_array_equal(r.read_steps(eid, "proprio", 30, 40), data["proprio"][30:40])


def test_read_steps_rejects_what_is_not_there(tmp_path):
    store = new_store(tmp_path)
    with store.writer("demo") as w:
        eid = w.append_episode(make_episode(0, 6)).episode
    r = store.reader("demo", cache=False)
    with pytest.raises(StoreError, match="no committed episode 7"):
        r.read_steps(7, "proprio")
    with pytest.raises(StoreError, match="no key 'image_nope'"):
        r.read_steps(eid, "image_nope")
    for lo, hi in ((0, 7), (-1, 2), (4, 3)):
        with pytest.raises(StoreError, match="it has 6 steps"):
            r.read_steps(eid, "proprio", lo, hi)


def test_read_steps_refuses_an_episode_retention_dropped_after_refresh(tmp_path):
    store = new_store(tmp_path, group="synthetic", chunk_len=4, retention=Retention(max_episodes=1))
    with store.writer("synthetic") as w:
        first = w.append_episode(make_episode(0, 6), wm_version=0).episode
        r = store.reader("synthetic", cache=False)
        assert list(r.records) == [first]
        w.append_episode(make_episode(1, 6), wm_version=1)  # drops `first`: record, then chunks
    assert first in r.records  # the reader has not refreshed yet
    with pytest.raises(StoreError, match="dropped by retention") as e:
        r.read_steps(first, "proprio")
    assert not isinstance(e.value, StoreCorruptError)


def test_is_committed_follows_the_disk_not_the_last_refresh(tmp_path):
    store = new_store(tmp_path, group="synthetic", retention=Retention(max_episodes=2))
    r = store.reader("synthetic", cache=False)
    with store.writer("synthetic") as w:
        a = w.append_episode(make_episode(0, 5), wm_version=0).episode
        assert r.is_committed(a) and a not in r.records  # committed since the last refresh
        r.refresh()
        b = w.append_episode(make_episode(1, 5), wm_version=1).episode
        c = w.append_episode(make_episode(2, 5), wm_version=2).episode  # retention drops a
        ep = w.begin_episode()
        ep.add_step({k: v[0] for k, v in make_episode(3, 1).items()})
        pending = w.next_episode_id
        assert not r.is_committed(pending)  # written, not committed
        ep.discard()
    assert a in r.records and not r.is_committed(a)
    assert r.is_committed(b) and r.is_committed(c)
    assert not r.is_committed(99)
    r.refresh()
    assert sorted(r.records) == [b, c]
