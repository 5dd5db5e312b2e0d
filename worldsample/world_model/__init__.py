"""The action-conditioned latent world model (docs/world_model.md).

Importing this package is cheap: torch loads when a model class or function is first used.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from worldsample.world_model.config import WorldModelConfig
from worldsample.world_model.errors import (
    CheckpointCorruptError,
    CheckpointError,
    CheckpointMismatchError,
    NotEnoughDataError,
    WorldModelError,
)

_LAZY = {
    "WorldModel": "worldsample.world_model.model",
    "Imaginer": "worldsample.world_model.imagine",
    "Rollout": "worldsample.world_model.imagine",
    "Trainer": "worldsample.world_model.train",
    "train_run": "worldsample.world_model.modes",
    "evaluate": "worldsample.world_model.evaluate",
    "psnr": "worldsample.world_model.metrics",
    "ssim": "worldsample.world_model.metrics",
}

__all__ = [
    "CheckpointCorruptError",
    "CheckpointError",
    "CheckpointMismatchError",
    "NotEnoughDataError",
    "WorldModelConfig",
    "WorldModelError",
    # the lazy names, spelled out so that linters and type checkers see them
    "Imaginer",
    "Rollout",
    "Trainer",
    "WorldModel",
    "evaluate",
    "psnr",
    "ssim",
    "train_run",
]

if TYPE_CHECKING:
    from worldsample.world_model.evaluate import evaluate
    from worldsample.world_model.imagine import Imaginer, Rollout
    from worldsample.world_model.metrics import psnr, ssim
    from worldsample.world_model.model import WorldModel
    from worldsample.world_model.modes import train_run
    from worldsample.world_model.train import Trainer


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
