"""Run configuration: pydantic models, loaded from YAML and overridden with `--set key=value`.

Nothing deeper in the library reads files or environment variables for settings: the CLI loads
a `RunConfig` here and passes the parts down.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worldsample.errors import ConfigError
from worldsample.loop.config import LoopConfig
from worldsample.sim.config import ExpertConfig, InterventionConfig, SimArmConfig


class _Loader(yaml.SafeLoader):
    """YAML 1.2 booleans only: `mode: off` must stay the string "off", not become False."""


_Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"] for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))


def load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


class StoreConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    chunk_len: int = Field(32, ge=1, le=4096, description="steps per zarr chunk (episodes are chunk-aligned)")
    synthetic_max_steps: int | None = Field(200_000, ge=1, description="bound of the synthetic pool")


class DemoConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    episodes: int = Field(10, ge=1)
    seed: int = 0
    expert: ExpertConfig = ExpertConfig()
    keep_failures: bool = Field(True, description="store expert episodes that did not succeed too")


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    env: SimArmConfig = SimArmConfig()
    store: StoreConfig = StoreConfig()
    demos: DemoConfig = DemoConfig()
    intervention: InterventionConfig = InterventionConfig()
    loop: LoopConfig = LoopConfig()


def parse_override(item: str) -> tuple[list[str], Any]:
    if "=" not in item:
        raise ConfigError(f"override {item!r} must look like key.path=value")
    key, raw = item.split("=", 1)
    path = [p for p in key.strip().split(".") if p]
    if not path:
        raise ConfigError(f"override {item!r} has an empty key")
    try:
        value = load_yaml(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"override {item!r}: value is not valid YAML: {e}") from e
    return path, value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    for item in overrides:
        path, value = parse_override(item)
        node = data
        for p in path[:-1]:
            nxt = node.setdefault(p, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"override {item!r}: {p!r} is not a section")
            node = nxt
        node[path[-1]] = value
    return data


def deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in top.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def format_validation_error(e: ValidationError) -> str:
    lines = []
    for err in e.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        lines.append(f"{loc}: {err['msg']}")
    return "invalid configuration:\n  " + "\n  ".join(lines)


def load_config(path: Path | None = None, overrides: list[str] | None = None) -> RunConfig:
    data: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = load_yaml(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        except yaml.YAMLError as e:
            raise ConfigError(f"config file {path} is not valid YAML: {e}") from e
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"config file {path} must hold a mapping at the top level")
        data = loaded or {}
    # nested sections start from their defaults, so `--set loop.world_model.train.ae_steps=20`
    # changes one field instead of replacing a whole section built by a default factory
    data = apply_overrides(deep_merge(RunConfig().model_dump(mode="json"), data), overrides or [])
    try:
        return RunConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e)) from None


def dump_config(cfg: RunConfig) -> str:
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
