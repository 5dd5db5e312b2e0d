"""A `WorldModelConfig` from a YAML file plus `--set key=value` overrides (the run config's rules)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from worldsample.config import apply_overrides, format_validation_error
from worldsample.errors import ConfigError
from worldsample.world_model.config import WorldModelConfig


def load_wm_config(path: Path | None = None, overrides: list[str] | None = None) -> WorldModelConfig:
    data: dict[str, Any] = {}
    if path is not None:
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except FileNotFoundError:
            raise ConfigError(f"world-model config {path} does not exist") from None
        except yaml.YAMLError as e:
            raise ConfigError(f"world-model config {path} is not valid YAML: {e}") from e
        if not isinstance(data, dict):
            raise ConfigError(f"world-model config {path} must hold a mapping at the top level")
    data = apply_overrides(data, overrides or [])
    try:
        return WorldModelConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e)) from None
