import numpy as np

from worldsample.store import Retention

from .helpers import make_episode, new_store, small_schema


def test_synthetic_pool_drops_oldest_world_model_version_first(tmp_path):
    store = new_store(tmp_path, group="synthetic", retention=Retention(max_episodes=3))
    reader = store.reader("synthetic")
    with store.writer("synthetic") as w:
        # world-model versions out of id order: 2, 1, 2, 3, 1
        for i, v in enumerate((2, 1, 2, 3, 1)):
            w.append_episode(make_episode(i, 6), wm_version=v)
        kept = {r.episode: r.wm_version for r in w.records}
    assert kept == {0: 2, 2: 2, 3: 3}
    reader.refresh()
    assert sorted(reader.records) == [0, 2, 3]
    assert reader.cache.size == 18
    assert set(np.unique(reader.cache.view("proprio")[:, 1]).astype(int)) == {0, 2, 3}
    # the dropped episodes' chunks are gone from disk
    cdir = store.root / "synthetic" / "data" / "proprio" / "c"
    slots = sorted(int(c) for c in cdir.iterdir() for c in [c.name])
    starts = {r.start // 4 for r in reader.records.values()}
    assert set(slots) == {s + k for s in starts for k in (0, 1)}


def test_ids_are_never_reused_after_retention(tmp_path):
    store = new_store(tmp_path, group="synthetic", retention=Retention(max_steps=10))
    with store.writer("synthetic") as w:
        for i in range(4):
            w.append_episode(make_episode(i, 6), wm_version=i)
    with store.writer("synthetic") as w:
        assert [r.episode for r in w.records] == [3]
        assert w.append_episode(make_episode(9, 6), wm_version=0).episode == 4


def test_ensure_group_replaces_the_retention_of_an_existing_group(tmp_path):
    store = new_store(tmp_path, group="synthetic")
    assert store.reader("synthetic").retention == Retention()
    store.ensure_group("synthetic", small_schema(), Retention(max_episodes=2))
    store.ensure_group("synthetic", small_schema())  # no retention given: the group keeps its own
    with store.writer("synthetic") as w:
        for i, v in enumerate((2, 1, 3)):
            w.append_episode(make_episode(i, 5), wm_version=v)
        assert {r.episode: r.wm_version for r in w.records} == {0: 2, 2: 3}
