"""Damaged files cost one episode, not the group: readers (cached or not) and the writer open a
group with a broken commit record or chunk, set that episode aside with the reason, and read the
rest; checksums catch a deleted chunk that zarr would read as zeros."""

import numpy as np
import pytest

from worldsample.errors import StoreCorruptError
from worldsample.store import GroupSampler
from worldsample.store.layout import chunk_path
from worldsample.store.records import record_path
from worldsample.store.verify import verify_store

from .helpers import make_episode, new_store


@pytest.fixture()
def stored(tmp_path):
    """Four episodes of 10 steps (chunks of 4 steps) in group demo."""
    store = new_store(tmp_path, chunk_len=4)
    eps = [make_episode(seed, 10, terminal=True) for seed in range(4)]
    with store.writer("demo") as w:
        ids = [w.append_episode(e).episode for e in eps]
    return store, eps, ids


def _chunk_file(store, key: str, rec, index: int):
    inner = ("0",) * (3 if key.startswith("image_") else 1 if key in ("proprio", "action") else 0)
    return chunk_path(store.root / "demo", key, rec.start // 4 + index).joinpath(*inner)


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: raw[: len(raw) // 2],  # truncated
        lambda raw: b"\x00\xff garbage \x13" * 3,  # garbled
        lambda raw: b"[" * 200_000 + b"]" * 200_000,  # nested past the parser
        lambda raw: raw.replace(b'"episode":1,', b'"episode":3,'),  # names another episode
    ],
    ids=["truncated", "garbled", "deep", "wrong-id"],
)
def test_a_damaged_record_sets_one_episode_aside(stored, damage):
    store, eps, ids = stored
    path = record_path(store.root / "demo" / "commits", ids[1])
    path.write_bytes(damage(path.read_bytes()))
    for cache in (True, False):
        r = store.reader("demo", cache=cache)
        assert sorted(r.records) == [ids[0], ids[2], ids[3]]
        assert list(r.damaged) == [ids[1]] and "commit record" in r.damaged[ids[1]]
        np.testing.assert_array_equal(r.episode(ids[2])["proprio"], eps[2]["proprio"])
        r.refresh()  # stays aside, the others stay
        assert sorted(r.records) == [ids[0], ids[2], ids[3]]
    sampler = GroupSampler(store.reader("demo"))
    assert len(sampler.transitions(np.random.default_rng(0), 16)["reward"]) == 16
    # the writer opens too, and never reuses the damaged episode's id or slots
    with store.writer("demo") as w:
        assert w.damaged.keys() == {ids[1]}
        new = w.append_episode(make_episode(9, 5)).episode
    assert new == ids[3] + 1
    r = store.reader("demo", cache=True)
    assert sorted(r.records) == [ids[0], ids[2], ids[3], new]
    np.testing.assert_array_equal(r.episode(ids[3])["proprio"], eps[3]["proprio"])
    rep = verify_store(store.run_dir)
    assert [p for p in rep.problems if "set aside" in p] and f"demo/episode {ids[1]}" in rep.problems[0]


def test_a_garbled_chunk_is_an_error_naming_the_episode_and_sets_it_aside(stored):
    store, eps, ids = stored
    lazy = store.reader("demo", cache=False)
    rec = lazy.records[ids[2]]
    _chunk_file(store, "image_cam", rec, 1).write_bytes(b"not a blosc frame" * 10)
    # a cached reader opened now leaves the episode out
    cached = store.reader("demo", cache=True)
    assert ids[2] in cached.damaged and ids[2] not in cached.records
    assert cached.cache.num_episodes == 3 and "do not decode" in cached.damaged[ids[2]]
    # a window reader: the chunks before it still read; the broken one raises, then the episode is aside
    np.testing.assert_array_equal(lazy.read_steps(ids[2], "image_cam", 0, 4), eps[2]["image_cam"][:4])
    with pytest.raises(StoreCorruptError, match=rf"demo/episode {ids[2]}: image_cam steps 4..8 do not decode"):
        lazy.read_steps(ids[2], "image_cam", 4, 8)
    assert ids[2] in lazy.damaged and ids[2] not in lazy.records
    np.testing.assert_array_equal(lazy.read_steps(ids[3], "image_cam"), eps[3]["image_cam"])
    # a read of another key of it afterwards (another thread's, say) is told it is damaged, not missing
    for read in (lambda: lazy.read_steps(ids[2], "proprio"), lambda: lazy.episode(ids[2]), lambda: lazy.verify(ids[2])):
        with pytest.raises(StoreCorruptError, match=rf"demo/episode {ids[2]} is set aside as damaged: .*do not decode"):
            read()


def test_a_deleted_chunk_is_detected_by_the_checksums(stored):
    store, eps, ids = stored
    lazy = store.reader("demo", cache=False)
    rec = lazy.records[ids[1]]
    _chunk_file(store, "image_cam", rec, 2).unlink()
    # a window read cannot tell (zarr writes no file for a chunk of zeros, and reads a missing one as zeros)
    assert not lazy.read_steps(ids[1], "image_cam", 8, 10).any() and eps[1]["image_cam"][8:10].any()
    # the whole-episode read and `verify` compare checksums and name the missing file
    with pytest.raises(StoreCorruptError, match=r"image_cam does not match its checksum.*\[\d+\] are not on disk"):
        lazy.episode(ids[1])
    assert ids[1] in lazy.damaged and ids[1] not in lazy.records
    other = store.reader("demo", cache=False)
    seen = []
    with pytest.raises(StoreCorruptError, match="not on disk"):
        other.verify(ids[1], ["proprio", "image_cam"], on_block=lambda k, i, b: seen.append((k, i)))
    assert seen[:3] == [("proprio", 0), ("proprio", 1), ("proprio", 2)]
    other.verify(ids[0])  # a sound episode verifies
    cached = store.reader("demo", cache=True)  # sets it aside at open
    assert ids[1] not in cached.records and "not on disk" in cached.damaged[ids[1]]


def test_verify_catches_changed_bytes_that_still_decode(stored):
    store, eps, ids = stored
    r = store.reader("demo", cache=False)
    rec = r.records[ids[0]]
    # rewrite one chunk of proprio through zarr with other values: it decodes, the checksum differs
    import zarr

    arr = zarr.open_array(str(store.root / "demo" / "data" / "proprio"), mode="r+")
    arr[rec.start : rec.start + 4] = arr[rec.start : rec.start + 4] + 1
    np.testing.assert_array_equal(r.read_steps(ids[0], "proprio", 0, 4), eps[0]["proprio"][:4] + 1)  # no check
    with pytest.raises(StoreCorruptError, match="does not match its checksum"):
        r.verify(ids[0], ["proprio"])
    assert ids[0] in r.damaged
