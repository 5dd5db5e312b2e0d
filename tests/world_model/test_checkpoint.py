"""Checkpoints: round trip, and clear errors for tampered, torn or mismatched ones."""

import json

import pytest
import torch

from tests.world_model.helpers import tiny_config
from worldsample.world_model import checkpoint
from worldsample.world_model.errors import CheckpointCorruptError, CheckpointError, CheckpointMismatchError
from worldsample.world_model.model import WorldModel


@pytest.fixture
def saved(tmp_path):
    torch.manual_seed(0)
    model = WorldModel(tiny_config("drift"))
    with torch.no_grad():
        model.lat_std.fill_(2.5)  # statistics travel with the weights
    return model, checkpoint.save(tmp_path, model, {"note": "x"})


def test_round_trip(saved, tmp_path):
    model, path = saved
    assert path == tmp_path / "v000001" / "model.json" and checkpoint.latest_version(tmp_path) == 1
    files = sorted(p.name for p in path.parent.iterdir())
    assert files == ["encode.onnx", "model.json", "model.onnx", "model.safetensors"]  # the ONNX export beside it
    loaded, doc = checkpoint.load(tmp_path)
    assert doc["meta"] == {"note": "x"} and loaded.cfg == model.cfg
    for (k, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), k
    z = torch.randn(2, 2, 6, 4, 4)
    a = torch.zeros(2, 2, 4)
    d = torch.zeros(2, dtype=torch.long)
    noise = lambda: (lambda g: lambda s: torch.randn(s, generator=g))(torch.Generator().manual_seed(1))  # noqa: E731
    assert torch.equal(model.eval().step(z, a, d, noise=noise())[0], loaded.step(z, a, d, noise=noise())[0])
    assert checkpoint.save(tmp_path, loaded) == tmp_path / "v000002" / "model.json"
    assert checkpoint.latest_version(tmp_path) == 2 and json.loads(path.read_text())["version"] == 1


def test_resolve_accepts_every_way_to_name_a_version(saved, tmp_path):
    model, path = saved
    second = checkpoint.save(tmp_path, model)
    assert checkpoint.resolve(tmp_path) == second  # the directory: its latest version
    assert checkpoint.resolve(tmp_path / "v000001") == path
    assert checkpoint.resolve(path) == path
    assert checkpoint.resolve(path.with_suffix(".safetensors")) == path
    assert checkpoint.load(tmp_path / "v000001")[1]["version"] == 1
    (tmp_path / "latest").write_text("wm-000002")
    with pytest.raises(CheckpointError, match="expected a version directory name"):
        checkpoint.latest_version(tmp_path)


def test_tampered_tensors_fail_the_checksum(saved):
    _, path = saved
    blob = bytearray(path.with_suffix(".safetensors").read_bytes())
    blob[-3] ^= 0xFF
    path.with_suffix(".safetensors").write_bytes(bytes(blob))
    with pytest.raises(CheckpointCorruptError, match="sha256"):
        checkpoint.load(path)


def test_tensors_of_another_checkpoint_are_rejected(saved, tmp_path):
    _, path = saved
    other = WorldModel(
        tiny_config("drift").model_copy(update={"dynamics": tiny_config().dynamics.model_copy(update={"width": 16})})
    )
    other_path = checkpoint.save(tmp_path / "other", other)
    path.with_suffix(".safetensors").write_bytes(other_path.with_suffix(".safetensors").read_bytes())
    with pytest.raises(CheckpointCorruptError):
        checkpoint.load(path)
    # someone also "fixes" the checksum: the shapes still give it away
    doc = json.loads(path.read_text())
    doc["sha256"] = checkpoint._sha256(path.with_suffix(".safetensors"))
    path.write_text(json.dumps(doc))
    with pytest.raises(CheckpointMismatchError, match="does not fit"):
        checkpoint.load(path)


def test_expected_architecture_and_format_are_checked(saved):
    _, path = saved
    with pytest.raises(CheckpointMismatchError, match="generator_kind"):
        checkpoint.load(path, expect=tiny_config("regression"))
    checkpoint.load(path, expect=tiny_config("drift", batch=3))  # training settings may differ
    doc = json.loads(path.read_text())
    doc["format_version"] = 99
    path.write_text(json.dumps(doc))
    with pytest.raises(CheckpointMismatchError, match="format version 99"):
        checkpoint.load(path)
    path.write_text("{not json")
    with pytest.raises(CheckpointCorruptError, match="not valid JSON"):
        checkpoint.load(path)


def test_missing_checkpoints(tmp_path):
    with pytest.raises(CheckpointError, match="train one first"):
        checkpoint.load(tmp_path)
    with pytest.raises(CheckpointError, match="does not exist"):
        checkpoint.load(tmp_path / "v000009")
    with pytest.raises(CheckpointError, match="does not exist"):
        checkpoint.load(tmp_path / "v000009" / "model.json")


def test_nothing_is_unpickled(saved, monkeypatch):
    import pickle

    import torch.serialization

    calls = []

    def refuse(*a, **k):
        calls.append(a)
        raise AssertionError("pickle used")

    class RefusingUnpickler:
        def __init__(self, *a, **k):
            refuse(*a, **k)

    monkeypatch.setattr(pickle, "Unpickler", RefusingUnpickler)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(torch, "load", refuse)
    monkeypatch.setattr(torch.serialization, "load", refuse)
    model, path = saved
    loaded, _ = checkpoint.load(path)
    assert calls == []
    want, got = model.state_dict(), loaded.state_dict()
    assert want.keys() == got.keys()
    for k in want:
        assert torch.equal(want[k], got[k]), k
    assert torch.all(got["lat_std"] == 2.5)
