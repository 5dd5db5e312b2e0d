"""Versioned checkpoints: tensors in safetensors, config and provenance in JSON, nothing pickled.

    DIR/v000003/model.safetensors   weights and statistics buffers
    DIR/v000003/model.json          format, version, config, tensor manifest, sha256 of the tensor file
    DIR/v000003/model.onnx          one step of dynamics and heads, and encode.onnx, for onnxruntime
                                    without torch (onnx_export.py; their sha256 in model.json's `onnx`)
    DIR/latest                      "v000003", replaced last (worldsample.versioned), so a reader never
                                    sees a half-written version

Loading checks, in order: the JSON's format and format version, the sha256 of the tensor file
(a tampered or torn file fails here), the config against the caller's expected architecture, and
every tensor's name and shape against the model rebuilt from the config.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from worldsample.versioned import VersionedDir, VersionError, parse_version_name
from worldsample.world_model.config import WorldModelConfig
from worldsample.world_model.errors import CheckpointCorruptError, CheckpointError, CheckpointMismatchError
from worldsample.world_model.model import WorldModel

FORMAT = "worldsample-world-model"
FORMAT_VERSION = 1
MODEL_JSON, MODEL_TENSORS = "model.json", "model.safetensors"
log = logging.getLogger(__name__)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def latest_version(directory: Path) -> int | None:
    try:
        return VersionedDir(directory).latest()
    except VersionError as e:
        raise CheckpointError(str(e)) from None


def _export_onnx(model: WorldModel, tmp: Path, version: int) -> dict:
    """The ONNX files of the version (the bridge's search runs them); an export that fails leaves the
    checkpoint usable from torch and says why in model.json, where the bridge reads it."""
    from worldsample.world_model.onnx_export import export_world_model

    try:
        return export_world_model(model, tmp, version)
    except Exception as e:  # the torch checkpoint must not be lost to an exporter failure
        log.warning("world model v%d: ONNX export failed: %s: %s", version, type(e).__name__, e)
        for f in tmp.glob("*.onnx"):
            f.unlink()
        return {"error": f"{type(e).__name__}: {e}"}


def save(directory: Path, model: WorldModel, meta: dict[str, Any] | None = None) -> Path:
    """Write the next version (with its ONNX export); returns the path of its JSON file."""
    vdir = VersionedDir(directory)
    version = vdir.next_version()
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}

    def write(tmp: Path) -> None:
        onnx = _export_onnx(model, tmp, version)
        save_file(state, str(tmp / MODEL_TENSORS), metadata={"format": FORMAT, "format_version": str(FORMAT_VERSION)})
        doc = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "version": version,
            "created": time.time(),
            "config": model.cfg.model_dump(mode="json"),
            "tensors": {k: [str(v.dtype).removeprefix("torch."), list(v.shape)] for k, v in state.items()},
            "sha256": _sha256(tmp / MODEL_TENSORS),
            "meta": meta or {},
            "onnx": onnx,
        }
        (tmp / MODEL_JSON).write_text(json.dumps(doc, indent=1))

    try:
        vdir.publish(write, version=version)
    except VersionError as e:
        raise CheckpointError(str(e)) from None
    return vdir.path(version) / MODEL_JSON


def resolve(path: Path) -> Path:
    """A checkpoint JSON from a checkpoint directory (its latest version), a version directory,
    a JSON path, or a .safetensors path."""
    path = Path(path)
    if parse_version_name(path.name) is not None:
        path = path / MODEL_JSON
    elif path.is_dir() or path.suffix not in (".json", ".safetensors"):
        v = latest_version(path)
        if v is None:
            raise CheckpointError(f"no world-model checkpoint in {path}; train one first: worldsample wm train RUN")
        path = VersionedDir(path).path(v) / MODEL_JSON
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
