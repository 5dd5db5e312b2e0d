"""The run's policy registry: `RUN/policies/v<NNNNNN>/{actor.safetensors,config.json}` plus a
`latest` pointer.

A version is written into a temp directory and renamed into place, and `latest` is replaced
last (temp file + rename), so a reader that follows `latest` always finds a complete version.
Loading validates config and tensor shapes and reads safetensors only: nothing is unpickled.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
from pydantic import ValidationError
from safetensors import SafetensorError
from safetensors.numpy import load_file, save_file

from worldsample.atomic import atomic_write_text
from worldsample.policy.config import PolicyConfig
from worldsample.policy.errors import PolicyError

_VERSION_DIR = re.compile(r"^v(\d{6})$")
ACTOR_FILE, CONFIG_FILE, LATEST = "actor.safetensors", "config.json", "latest"


def version_dir(version: int) -> str:
    return f"v{version:06d}"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class PolicyRegistry:
    def __init__(self, run_dir: Path | str):
        self.root = Path(run_dir) / "policies"

    def versions(self) -> list[int]:
        if not self.root.is_dir():
            return []
        return sorted(int(m.group(1)) for p in self.root.iterdir() if (m := _VERSION_DIR.match(p.name)))

    def latest_version(self) -> int | None:
        """The version `latest` points to, or None when nothing was published yet."""
        try:
            text = (self.root / LATEST).read_text().strip()
        except FileNotFoundError:
            return None
        m = _VERSION_DIR.match(text)
        if not m:
            raise PolicyError(f"{self.root / LATEST} holds {text!r}, expected a version like v000001")
        return int(m.group(1))

    def publish(self, config: PolicyConfig, tensors: dict[str, np.ndarray]) -> int:
        """Write a new version (numbered after the newest) and point `latest` at it."""
        version = (max(self.versions(), default=0)) + 1
        config = config.model_copy(update={"version": version})
        tensors = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items()}
        check_tensors(config, tensors, where="publish")
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=self.root, prefix=".tmp-"))
        try:
            save_file(tensors, str(tmp / ACTOR_FILE), metadata={"format": config.format, "version": str(version)})
            (tmp / CONFIG_FILE).write_text(config.model_dump_json(indent=2))
            for name in (ACTOR_FILE, CONFIG_FILE):
                with open(tmp / name, "rb+") as f:
                    os.fsync(f.fileno())
            os.rename(tmp, self.root / version_dir(version))  # fails if another writer took the number
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _fsync_dir(self.root)
        atomic_write_text(self.root / LATEST, version_dir(version) + "\n")
        return version

    def load(self, version: int | None = None) -> tuple[PolicyConfig, dict[str, np.ndarray]]:
        """Config and float32 tensors of `version` (default: latest), validated."""
        if version is None:
            version = self.latest_version()
            if version is None:
                raise PolicyError(f"no policy published in {self.root} yet")
        vdir = self.root / version_dir(version)
        try:
            config = PolicyConfig.model_validate(json.loads((vdir / CONFIG_FILE).read_text()))
        except FileNotFoundError:
            raise PolicyError(f"policy version {version} is missing ({vdir / CONFIG_FILE})") from None
        except (ValueError, ValidationError) as e:
            raise PolicyError(f"{vdir / CONFIG_FILE} is invalid: {e}") from None
        if config.version != version:
            raise PolicyError(f"{vdir / CONFIG_FILE} says version {config.version}, its directory {version}")
        try:
            tensors = load_file(str(vdir / ACTOR_FILE))
        except (FileNotFoundError, SafetensorError, OSError) as e:
            raise PolicyError(f"cannot read {vdir / ACTOR_FILE}: {e}") from None
        check_tensors(config, tensors, where=str(vdir))
        return config, tensors


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
