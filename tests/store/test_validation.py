import os

import numpy as np
import pytest

from worldsample.errors import EpisodeRejected, SchemaError, StoreError
from worldsample.store import EpisodeStore, GroupSchema, KeySpec

from .helpers import make_episode, new_store, small_schema


def chunk_files(store, group="demo"):
    out = []
    for _dirpath, _, files in os.walk(store.root / group / "data"):
        out += [f for f in files if f != "zarr.json"]
    return out


def good_step(t=0):
    ep = make_episode(0, 1)
    return {k: v[0] for k, v in ep.items()}


@pytest.mark.parametrize(
    "key,value,message",
    [
        ("image_cam", np.zeros((8, 8, 4), np.uint8), "expected shape"),
        ("image_cam", np.zeros((8, 8, 3), np.float32), "images must be uint8"),
        ("proprio", np.zeros(4, np.float32), "expected shape"),
        ("proprio", np.array([0, np.nan, 0], np.float32), "NaN or inf"),
        ("proprio", np.array([0, np.inf, 0]), "NaN or inf"),
        ("action", np.array([np.nan, 0.0]), "NaN or inf"),
        ("action", np.array([1e300, 0.0]), "overflows"),
        ("action", np.array(["a", "b"]), "does not convert"),
        ("done", 1.0, "expected bool"),
        ("reward", np.float64(np.inf), "NaN or inf"),
    ],
)
def test_bad_step_is_rejected_and_nothing_written(tmp_path, key, value, message):
    store = new_store(tmp_path)
    with store.writer("demo") as w:
        ep = w.begin_episode()
        step = good_step()
        step[key] = value
        with pytest.raises(EpisodeRejected, match=message):
            ep.add_step(step)
        assert ep.length == 0
        ep.discard()
    assert store.reader("demo").num_episodes == 0
    assert chunk_files(store) == []


def test_unknown_and_missing_keys(tmp_path):
    store = new_store(tmp_path)
    with store.writer("demo") as w:
        ep = w.begin_episode()
        with pytest.raises(EpisodeRejected, match="unknown keys"):
            ep.add_step({**good_step(), "bogus": 1.0})
        step = good_step()
        del step["action"]
        with pytest.raises(EpisodeRejected, match="lacks key 'action'"):
            ep.add_step(step)
        # defaults fill the optional flags
        step = good_step()
        del step["success"], step["done"]
        ep.add_step(step)
        rec = ep.commit()
    assert rec.length == 1 and not rec.success


def test_empty_episode_rejected(tmp_path):
    store = new_store(tmp_path)
    with store.writer("demo") as w:
        ep = w.begin_episode()
        with pytest.raises(EpisodeRejected, match="at least one step"):
            ep.commit()
        ep.discard()
        with pytest.raises(EpisodeRejected, match="at least one step"):
            w.append_episode({k: v[:0] for k, v in make_episode(0, 3).items()})
    assert store.reader("demo").num_episodes == 0


def test_append_episode_checks_everything_before_writing(tmp_path):
    store = new_store(tmp_path, chunk_len=2)
    bad = make_episode(1, 9)
    bad["action"][7, 1] = np.nan  # late in the episode, after several chunks' worth of steps
    with store.writer("demo") as w:
        with pytest.raises(EpisodeRejected, match="action: contains NaN"):
            w.append_episode(bad)
        rec = w.append_episode(make_episode(2, 5))
    assert chunk_files(store) != []
    r = store.reader("demo")
    assert r.num_episodes == 1 and rec.episode == 0


def test_schema_rules():
    with pytest.raises(ValueError, match="uint8"):
        KeySpec(dtype="float32", shape=(8, 8, 3), kind="image", camera="c")
    with pytest.raises(ValueError, match="unknown dtype"):
        KeySpec(dtype="nope")
    with pytest.raises(ValueError, match="lacks keys"):
        GroupSchema(keys={"x": KeySpec(dtype="float32")}, obs_keys=("x",))
    with pytest.raises(SchemaError, match="must be positive"):
        GroupSchema.build({"x": KeySpec.model_construct(dtype="float32", shape=(0,))}, 2)


def test_group_rules(tmp_path):
    store = new_store(tmp_path)
    with pytest.raises(StoreError, match="unknown group 'bogus'"):
        store.writer("bogus")
    with pytest.raises(StoreError, match="does not exist"):
        store.reader("real")
    with pytest.raises(SchemaError, match="another schema"):
        wider = {**small_schema().keys, "proprio": KeySpec(dtype="float32", shape=(5,))}
        store.ensure_group("demo", small_schema().model_copy(update={"keys": wider}))
    with pytest.raises(StoreError, match="no episode store"):
        EpisodeStore(tmp_path / "elsewhere")
