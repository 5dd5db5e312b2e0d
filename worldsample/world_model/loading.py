"""A `WorldModelConfig` from a YAML file plus `--set key=value` overrides (the run config's rules)."""

from __future__ import annotations

from pathlib import Path

from worldsample.world_model.config import WorldModelConfig
from worldsample.yamlconfig import load_model


def load_wm_config(path: Path | None = None, overrides: list[str] | None = None) -> WorldModelConfig:
    return load_model(WorldModelConfig, path, overrides, what="world-model config")
