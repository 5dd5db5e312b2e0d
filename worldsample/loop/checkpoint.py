"""Trainer checkpoints without pickle: nested state dicts split into tensors (safetensors) and
everything else (JSON), one version per checkpoint in a `worldsample.versioned.VersionedDir`:

    ROOT/v000012/<part>.safetensors, <part>.json   one pair per part (learner, synth, ...)
    ROOT/v000012/meta.json                         the caller's meta: what resume reads
    ROOT/latest                                    the newest complete checkpoint
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file, save_file

from worldsample.errors import WorldSampleError
from worldsample.versioned import VersionedDir, VersionError

_ARRAY = "__array__"
_LIST = "__list__"
_ITEMS = "__items__"  # a dict with non-string keys (e.g. optimizer param ids), as [key, value] pairs


class CheckpointError(WorldSampleError):
    """A trainer checkpoint is missing or unreadable."""


def split_state(
    state: Any, path: str = "", tensors: dict[str, np.ndarray] | None = None
) -> tuple[Any, dict[str, np.ndarray]]:
    """Replace every array leaf by a reference into `tensors`; the rest must be JSON-able."""
    tensors = {} if tensors is None else tensors
    if hasattr(state, "detach"):
        state = state.detach().cpu().numpy()
    if isinstance(state, np.ndarray):
        key = path or "/"
        tensors[key] = np.ascontiguousarray(state)
        return {_ARRAY: key}, tensors
    if isinstance(state, dict):
        if all(isinstance(k, str) for k in state):
            return {k: split_state(v, f"{path}/{k}", tensors)[0] for k, v in state.items()}, tensors
        return {_ITEMS: [[k, split_state(v, f"{path}/{k}", tensors)[0]] for k, v in state.items()]}, tensors
    if isinstance(state, (list, tuple)):
        return {_LIST: [split_state(v, f"{path}/{i}", tensors)[0] for i, v in enumerate(state)]}, tensors
    if isinstance(state, np.generic):
        return state.item(), tensors
    return state, tensors


def join_state(tree: Any, tensors: dict[str, np.ndarray]) -> Any:
    if isinstance(tree, dict):
        if _ARRAY in tree:
            return tensors[tree[_ARRAY]]
        if _LIST in tree:
            return [join_state(v, tensors) for v in tree[_LIST]]
        if _ITEMS in tree:
            return {k: join_state(v, tensors) for k, v in tree[_ITEMS]}
        return {k: join_state(v, tensors) for k, v in tree.items()}
    return tree


def save_checkpoint(root: Path, parts: dict[str, Any], meta: dict[str, Any]) -> Path:
    """Write parts (name -> nested state) as <name>.safetensors + <name>.json, and `meta`, as the
    next version; returns its directory. Resume reads `meta` only, never a file name."""
    split = {name: split_state(state) for name, state in parts.items()}

    def write(tmp: Path) -> None:
        for name, (tree, tensors) in split.items():
            save_file(tensors, str(tmp / f"{name}.safetensors"))
            (tmp / f"{name}.json").write_text(json.dumps(tree))
        (tmp / "meta.json").write_text(json.dumps(meta))

    vdir = VersionedDir(root)
    try:
        return vdir.path(vdir.publish(write))
    except VersionError as e:
        raise CheckpointError(f"trainer checkpoint {meta} not written: {e}") from None


def load_checkpoint(root: Path) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(parts, meta) of the newest checkpoint, or None when there is none."""
    vdir = VersionedDir(root)
    try:
        latest = vdir.latest()
    except VersionError as e:
        raise CheckpointError(f"cannot resume: {e}") from None
    if latest is None:
        return None
    path = vdir.path(latest)
    try:
        meta = json.loads((path / "meta.json").read_text())
        parts = {}
        for f in path.glob("*.json"):
            if f.name == "meta.json":
                continue
            tensors = load_file(str(path / f"{f.stem}.safetensors"))
            parts[f.stem] = join_state(json.loads(f.read_text()), tensors)
    except (OSError, ValueError, KeyError, SafetensorError) as e:
        raise CheckpointError(f"trainer checkpoint {path} is unreadable: {e}") from e
    return parts, meta
