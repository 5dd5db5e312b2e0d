"""Pydantic models from YAML plus `--set key.path=value` overrides, with errors that name the field.

One loader for every configuration file of the project (run config, world-model config, robot
profile). Booleans follow YAML 1.2: only true/false, so `mode: off` stays the string "off".
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from worldsample.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 booleans."""


_Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


def parse_override(item: str, error: type[Exception] = ConfigError) -> tuple[list[str], Any]:
    if "=" not in item:
        raise error(f"override {item!r} must look like key.path=value")
    key, raw = item.split("=", 1)
    path = [p for p in key.strip().split(".") if p]
    if not path:
        raise error(f"override {item!r} has an empty key")
    try:
        value = load_yaml(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise error(f"override {item!r}: value is not valid YAML: {e}") from e
    return path, value


def apply_overrides(data: dict[str, Any], overrides: list[str], error: type[Exception] = ConfigError) -> dict[str, Any]:
    for item in overrides:
        path, value = parse_override(item, error)
        node = data
        for p in path[:-1]:
            nxt = node.setdefault(p, {})
            if not isinstance(nxt, dict):
                raise error(f"override {item!r}: {p!r} is not a section")
            node = nxt
        node[path[-1]] = value
    return data


def deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in top.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def format_validation_error(e: ValidationError, what: str = "configuration") -> str:
    lines = [f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}" for err in e.errors()]
    return f"invalid {what}:\n  " + "\n  ".join(lines)


def load_model(
    model: type[M],
    path: Path | str | None = None,
    overrides: list[str] | None = None,
    *,
    what: str = "config",
    error: type[Exception] = ConfigError,
    base: dict[str, Any] | None = None,
) -> M:
    """`model` from `base` (if given), then the YAML file at `path`, then the overrides."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = load_yaml(Path(path).read_text())
        except FileNotFoundError:
            raise error(f"{what} file {path} does not exist") from None
        except yaml.YAMLError as e:
            raise error(f"{what} file {path} is not valid YAML: {e}") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise error(f"{what} file {path} must hold a mapping at the top level")
        data = loaded or {}
    if base is not None:
        data = deep_merge(base, data)
    data = apply_overrides(data, overrides or [], error)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise error(format_validation_error(e, what)) from None
