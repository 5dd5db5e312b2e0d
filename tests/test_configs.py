"""Every shipped YAML under configs/ loads with the loader its folder is used with, and the files
that claim to write out defaults match the models."""

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from robot_bridge.profile import load_profile
from worldsample.config import RunConfig, load_config
from worldsample.world_model.config import WorldModelConfig
from worldsample.world_model.loading import load_wm_config
from worldsample.yamlconfig import load_yaml

CONFIGS = Path(__file__).resolve().parents[1] / "configs"

# folder under configs/ -> how the project loads the files in it
LOADERS: dict[str, Callable[[Path], BaseModel]] = {
    ".": load_config,  # `--config` of run / train / demos
    "bench": load_config,  # bench/sample_efficiency.py passes a profile as `--config`: an overlay on the defaults
    "world_model": load_wm_config,  # `wm train --config`, bench/world_model.py
    "robot_profiles": load_profile,  # `bridge` / `sim-robot --profile`
}

# files whose comments say they write out the model's defaults
DEFAULTS: dict[str, type[BaseModel]] = {"default.yaml": RunConfig, "world_model/cpu.yaml": WorldModelConfig}

FILES = sorted(p for pattern in ("*.yaml", "*.yml") for p in CONFIGS.rglob(pattern))


def rel(path: Path) -> str:
    return path.relative_to(CONFIGS).as_posix()


def folder(path: Path) -> str:
    return rel(path.parent) if path.parent != CONFIGS else "."


def leaves(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    for key, value in data.items():
        if isinstance(value, dict):
            yield from leaves(value, (*prefix, key))
        else:
            yield (*prefix, key), value


def lookup(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return f"<no field {'.'.join(path)}>"
        data = data[key]
    return data


def test_the_glob_finds_every_kind_of_config():
    found = {folder(p) for p in FILES}
    assert found == set(LOADERS), "a configs/ folder without files, or files in a folder with no loader"
    assert set(DEFAULTS) <= {rel(p) for p in FILES}


@pytest.mark.parametrize("path", FILES, ids=rel)
def test_config_file_loads_with_its_loader(path):
    loader = LOADERS.get(folder(path))
    assert loader is not None, f"configs/{rel(path)}: no known loader for configs/{folder(path)}/; add it to LOADERS"
    assert isinstance(loader(path), BaseModel)


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_file_that_shows_the_defaults_states_only_default_values(name):
    model, path = DEFAULTS[name], CONFIGS / name
    defaults = model().model_dump(mode="json")
    stated = load_yaml(path.read_text())
    assert isinstance(stated, dict) and stated, f"configs/{name} states no fields"
    wrong = {
        ".".join(key): (value, lookup(defaults, key)) for key, value in leaves(stated) if lookup(defaults, key) != value
    }
    assert not wrong, f"configs/{name} differs from {model.__name__}() at (file value, model default): {wrong}"
    assert LOADERS[folder(path)](path) == model()
