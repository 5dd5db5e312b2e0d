"""One checkpoint format for the vision modules: `<name>.json` (the module's pydantic config) and
`<name>.safetensors` (its float32 state dict). Written each file atomically; loaded without
unpickling anything, with names, shapes, dtype and finiteness checked against the config."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import torch
from pydantic import BaseModel, ValidationError
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from worldsample.atomic import atomic_write_text

M = TypeVar("M", bound=nn.Module)


def save_module(module: nn.Module, config: BaseModel, directory: Path | str, name: str) -> Path:
    """Write `name.safetensors`, then `name.json`, into `directory`; each replaces the old one atomically."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().cpu().to(torch.float32).contiguous() for k, v in module.state_dict().items()}
    tmp = d / f".{name}.safetensors.tmp"
    save_file(tensors, str(tmp), metadata={"format": str(getattr(config, "format", name))})
    tmp.replace(d / f"{name}.safetensors")
    atomic_write_text(d / f"{name}.json", config.model_dump_json(indent=2))
    return d


def load_module(directory: Path | str, name: str, config_cls: type[BaseModel], build: Callable[..., M],
                error: type[Exception], what: str) -> M:
    """`build(config)` with the saved tensors loaded, in eval mode; `error` says what is missing or wrong."""
    d = Path(directory)
    cfg_file, tensors_file = d / f"{name}.json", d / f"{name}.safetensors"
    try:
        config = config_cls.model_validate(json.loads(cfg_file.read_text()))
    except FileNotFoundError:
        raise error(f"no {what} in {d} ({cfg_file.name} is missing)") from None
    except (ValueError, ValidationError) as e:
        raise error(f"{cfg_file} is invalid: {str(e)[:300]}") from None
    try:
        tensors = load_file(str(tensors_file))
    except (FileNotFoundError, SafetensorError, OSError) as e:
        raise error(f"cannot read {tensors_file}: {e}") from None
    module = build(config)
    want = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    have = {k: tuple(v.shape) for k, v in tensors.items()}
    if want != have:
        diff = sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k))
        raise error(f"{tensors_file} does not match {cfg_file.name}: tensors {diff[:6]} differ in name/shape")
    for k, t in tensors.items():
        if t.dtype != torch.float32 or not torch.isfinite(t).all():
            raise error(f"{tensors_file}: tensor {k} is not finite float32")
    module.load_state_dict(tensors, strict=True)
    return module.eval()
