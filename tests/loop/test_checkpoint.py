"""Trainer checkpoints: nested state without pickle, versions in a VersionedDir, resume from meta."""

import numpy as np
import pytest
import torch

from worldsample.loop.checkpoint import CheckpointError, join_state, load_checkpoint, save_checkpoint, split_state


def test_nested_state_round_trip_without_pickle(tmp_path):
    state = {
        "a": {"w": torch.ones(2, 3), "n": 3, "opt": [{"m": np.zeros(4)}, 0.5, None]},
        "name": "x",
        "f": np.float32(1.5),
        "ids": {0: np.ones(1), 7: "x"},
    }
    tree, tensors = split_state(state)
    assert set(tensors) == {"/a/w", "/a/opt/0/m", "/ids/0"}
    back = join_state(tree, tensors)
    np.testing.assert_array_equal(back["a"]["w"], np.ones((2, 3)))
    assert back["a"]["opt"][1:] == [0.5, None] and back["name"] == "x" and back["f"] == 1.5
    assert list(back["ids"]) == [0, 7] and back["ids"][7] == "x"  # int keys stay ints
    first = save_checkpoint(tmp_path, {"learner": state}, {"round": 3})
    second = save_checkpoint(tmp_path, {"learner": {"w": np.arange(3)}}, {"round": 7})
    assert (first.name, second.name) == ("v000001", "v000002")
    parts, meta = load_checkpoint(tmp_path)
    assert meta == {"round": 7} and list(parts["learner"]["w"]) == [0, 1, 2]
    assert (tmp_path / "latest").read_text().strip() == "v000002"
    assert not list(tmp_path.glob(".tmp-*"))


def test_two_checkpoints_of_the_same_round_are_both_kept(tmp_path):
    # the final checkpoint of a run may follow a periodic one of the same round: nothing is overwritten
    save_checkpoint(tmp_path, {"learner": {"w": np.zeros(2)}}, {"round": 5})
    save_checkpoint(tmp_path, {"learner": {"w": np.ones(2)}, "synth": {"n": 1}}, {"round": 4, "final": True})
    parts, meta = load_checkpoint(tmp_path)
    assert meta == {"round": 4, "final": True} and set(parts) == {"learner", "synth"}
    np.testing.assert_array_equal(parts["learner"]["w"], np.ones(2))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "v000001", "v000002"]


def test_missing_and_corrupt(tmp_path):
    assert load_checkpoint(tmp_path) is None
    save_checkpoint(tmp_path, {"learner": {"w": np.arange(3)}}, {"round": 1})
    (tmp_path / "v000001" / "learner.safetensors").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="unreadable"):
        load_checkpoint(tmp_path)
    (tmp_path / "latest").write_text("ckpt_000000001")
    with pytest.raises(CheckpointError, match="expected a version directory name"):
        load_checkpoint(tmp_path)
