"""The run's policy registry: `RUN/policies/v<NNNNNN>/{actor.safetensors,config.json}` plus a
`latest` pointer.

Versions are published through `worldsample.versioned.VersionedDir`, so a reader that follows
`latest` always finds a complete version.
Loading validates config and tensor shapes and reads safetensors only: nothing is unpickled.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
from pydantic import ValidationError
from safetensors import SafetensorError
from safetensors.numpy import load_file, save_file

from worldsample.paths import RunFiles
from worldsample.policy.config import PolicyConfig
from worldsample.policy.errors import PolicyError
from worldsample.versioned import VersionedDir, VersionError

ACTOR_FILE, CONFIG_FILE = "actor.safetensors", "config.json"


class PolicyRegistry:
    def __init__(self, run_dir: Path | str):
        self.dir = VersionedDir(RunFiles.of(run_dir).policies)
        self.root = self.dir.root

    def versions(self) -> list[int]:
        return self.dir.versions()

    def latest_version(self) -> int | None:
        """The version `latest` points to, or None when nothing was published yet."""
        try:
            return self.dir.latest()
        except VersionError as e:
            raise PolicyError(str(e)) from None

    def publish(self, config: PolicyConfig, tensors: dict[str, np.ndarray],
                extra: Callable[[Path, PolicyConfig, dict[str, np.ndarray]], None] | None = None) -> int:
        """Write a new version (numbered after the newest) and point `latest` at it; `extra(dir, config,
        tensors)` writes more files into the version before it is published (a pixel policy's ONNX file)."""
        version = self.dir.next_version()
        config = config.model_copy(update={"version": version})
        tensors = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items()}
        check_tensors(config, tensors, where="publish")

        def write(tmp: Path) -> None:
            save_file(tensors, str(tmp / ACTOR_FILE), metadata={"format": config.format, "version": str(version)})
            (tmp / CONFIG_FILE).write_text(config.model_dump_json(indent=2))
            if extra is not None:
                extra(tmp, config, tensors)

        try:
            return self.dir.publish(write, version=version)
        except VersionError as e:
            raise PolicyError(str(e)) from None

    def load(self, version: int | None = None) -> tuple[PolicyConfig, dict[str, np.ndarray]]:
        """Config and float32 tensors of `version` (default: latest), validated."""
        if version is None:
            version = self.latest_version()
            if version is None:
                raise PolicyError(f"no policy published in {self.root} yet")
        config = self.config(version)
        vdir = self.dir.path(version)
        try:
            tensors = load_file(str(vdir / ACTOR_FILE))
        except (FileNotFoundError, SafetensorError, OSError) as e:
            raise PolicyError(f"cannot read {vdir / ACTOR_FILE}: {e}") from None
        check_tensors(config, tensors, where=str(vdir))
        return config, tensors

    def config(self, version: int) -> PolicyConfig:
        """The validated config of `version` alone (no tensors read)."""
        vdir = self.dir.path(version)
        try:
            config = PolicyConfig.model_validate(json.loads((vdir / CONFIG_FILE).read_text()))
        except FileNotFoundError:
            raise PolicyError(f"policy version {version} is missing ({vdir / CONFIG_FILE})") from None
        except (ValueError, ValidationError) as e:
            raise PolicyError(f"{vdir / CONFIG_FILE} is invalid: {e}") from None
        if config.version != version:
            raise PolicyError(f"{vdir / CONFIG_FILE} says version {config.version}, its directory {version}")
        return config


def check_tensors(config: PolicyConfig, tensors: dict[str, np.ndarray], where: str) -> None:
    want = config.tensor_shapes()
    if set(tensors) != set(want):
        raise PolicyError(f"{where}: tensors {sorted(tensors)} do not match the config, expected {sorted(want)}")
    for name, shape in want.items():
        t = tensors[name]
        if t.dtype != np.float32 or t.shape != shape:
            raise PolicyError(f"{where}: tensor {name} is {t.dtype} {t.shape}, expected float32 {shape}")
        if not np.isfinite(t).all():
            raise PolicyError(f"{where}: tensor {name} holds NaN or inf")
    if config.obs_normalization and (tensors["obs_std"] <= 0).any():
        raise PolicyError(f"{where}: obs_std must be positive")
