"""Versioned checkpoints: tensors in safetensors, config and provenance in JSON, nothing pickled.

    DIR/wm-000003.safetensors   weights and statistics buffers
    DIR/wm-000003.json          format, version, config, tensor manifest, sha256 of the tensor file
    DIR/latest.json             {"version": 3}, replaced last, so a reader never sees a half-written version

Loading checks, in order: the JSON's format and format version, the sha256 of the tensor file
(a tampered or torn file fails here), the config against the caller's expected architecture, and
every tensor's name and shape against the model rebuilt from the config.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from worldsample.atomic import atomic_write_text
from worldsample.world_model.config import WorldModelConfig
from worldsample.world_model.errors import CheckpointCorruptError, CheckpointError, CheckpointMismatchError
from worldsample.world_model.model import WorldModel

FORMAT = "worldsample-world-model"
FORMAT_VERSION = 1


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def latest_version(directory: Path) -> int | None:
    p = Path(directory) / "latest.json"
    if not p.exists():
        return None
    try:
        return int(json.loads(p.read_text())["version"])
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{p} is unreadable ({e}); delete it to fall back to an explicit version") from None


def save(directory: Path, model: WorldModel, meta: dict[str, Any] | None = None) -> Path:
    """Write the next version; returns the path of its JSON file."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    version = (latest_version(directory) or 0) + 1
    stem = directory / f"wm-{version:06d}"
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    tmp = stem.with_name(f".{stem.name}.safetensors.tmp")
    save_file(state, str(tmp), metadata={"format": FORMAT, "format_version": str(FORMAT_VERSION)})
    os.replace(tmp, stem.with_suffix(".safetensors"))
    doc = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "version": version,
        "created": time.time(),
        "config": model.cfg.model_dump(mode="json"),
        "tensors": {k: [str(v.dtype).removeprefix("torch."), list(v.shape)] for k, v in state.items()},
        "sha256": _sha256(stem.with_suffix(".safetensors")),
        "meta": meta or {},
    }
    atomic_write_text(stem.with_suffix(".json"), json.dumps(doc, indent=1))
    atomic_write_text(directory / "latest.json", json.dumps({"version": version}))
    return stem.with_suffix(".json")


def resolve(path: Path) -> Path:
    """A checkpoint JSON from a directory (its latest version), a JSON path, or a .safetensors path."""
    path = Path(path)
    if path.is_dir() or path.suffix not in (".json", ".safetensors"):
        v = latest_version(path)
        if v is None:
            raise CheckpointError(f"no world-model checkpoint in {path}; train one first: worldsample wm train RUN")
        path = path / f"wm-{v:06d}.json"
    if path.suffix == ".safetensors":
        path = path.with_suffix(".json")
    if not path.exists():
        raise CheckpointError(f"checkpoint {path} does not exist")
    return path


def load(path: Path, expect: WorldModelConfig | None = None, device: str = "cpu") -> tuple[WorldModel, dict]:
    """Rebuild the model from a checkpoint; returns it with the checkpoint's JSON document."""
    path = resolve(path)
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise CheckpointCorruptError(f"{path} is not valid JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CheckpointMismatchError(f"{path} is not a WorldSample world-model checkpoint")
    if doc.get("format_version") != FORMAT_VERSION:
        raise CheckpointMismatchError(
            f"{path} has format version {doc.get('format_version')}; this WorldSample reads version {FORMAT_VERSION}"
        )
    tensors = path.with_suffix(".safetensors")
    if not tensors.exists():
        raise CheckpointError(f"{tensors} is missing (the JSON file has no tensors beside it)")
    if _sha256(tensors) != doc.get("sha256"):
        raise CheckpointCorruptError(
            f"{tensors} does not match the sha256 in {path.name}: the file was modified "
            "or truncated; restore it or use another version"
        )
    try:
        cfg = WorldModelConfig.model_validate(doc["config"])
    except (ValidationError, KeyError) as e:
        raise CheckpointMismatchError(f"{path}: its config is not valid for this WorldSample: {e}") from None
    if expect is not None and expect.architecture() != cfg.architecture():
        a, b = expect.architecture(), cfg.architecture()
        diff = sorted(k for k in a if a[k] != b.get(k))
        raise CheckpointMismatchError(
            f"{path} was trained with another architecture (differs in {diff}); "
            "load it without an expected config or train a new model"
        )
    model = WorldModel(cfg)
    try:
        state = load_file(str(tensors))
    except (SafetensorError, OSError) as e:
        raise CheckpointCorruptError(f"{tensors} is unreadable: {e}") from None
    want = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    have = {k: tuple(v.shape) for k, v in state.items()}
    if want != have:
        bad = sorted(set(want) ^ set(have)) + sorted(k for k in set(want) & set(have) if want[k] != have[k])
        raise CheckpointMismatchError(
            f"{tensors} does not fit the model its config describes ({len(bad)} tensors differ, e.g. {bad[:3]})"
        )
    model.load_state_dict(state)
    return model.to(device).eval(), doc
