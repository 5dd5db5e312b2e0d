"""Declared schema of a store group: which per-step keys exist, with what dtype and shape.

A group's schema is written once, when the group is created, and every append is checked
against it. Image keys carry the name of their camera.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from worldsample.errors import SchemaError

SCHEMA_VERSION = 1

# Keys every group has besides observations, with the value used when a step omits them.
STEP_KEYS = ("action", "reward", "done", "intervention", "success")
STEP_DEFAULTS = {"done": False, "intervention": False, "success": False}


class KeySpec(BaseModel):
    """One per-step array: time is the first axis on disk, `shape` is the shape of one step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dtype: str
    shape: tuple[int, ...] = ()
    kind: Literal["image", "lowdim"] = "lowdim"
    camera: str | None = None
    finite: bool = Field(False, description="reject NaN and inf at append")

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, v: str) -> str:
        try:
            return np.dtype(v).name
        except TypeError as e:
            raise ValueError(f"unknown dtype {v!r}") from e

    @model_validator(mode="after")
    def _image_rules(self) -> KeySpec:
        if self.kind == "image":
            if self.dtype != "uint8" or len(self.shape) != 3 or self.shape[2] not in (1, 3):
                raise ValueError(f"image keys are uint8 (H, W, C) with C in (1, 3), got {self.dtype} {self.shape}")
            if not self.camera:
                raise ValueError("image keys name their camera")
        if any(d <= 0 for d in self.shape):
            raise ValueError(f"shape dimensions must be positive, got {self.shape}")
        return self

    @property
    def np_dtype(self) -> np.dtype:
        return np.dtype(self.dtype)


class GroupSchema(BaseModel):
    """Keys of one group. `obs_keys` are the observation part; the rest are STEP_KEYS."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = SCHEMA_VERSION
    keys: dict[str, KeySpec]
    obs_keys: tuple[str, ...]
    chunk_len: int = Field(32, ge=1, le=4096, description="steps per chunk; episodes start on chunk boundaries")

    @model_validator(mode="after")
    def _consistent(self) -> GroupSchema:
        missing = [k for k in (*self.obs_keys, *STEP_KEYS) if k not in self.keys]
        if missing:
            raise ValueError(f"schema lacks keys {missing}")
        extra = set(self.keys) - set(self.obs_keys) - set(STEP_KEYS)
        if extra:
            raise ValueError(f"keys {sorted(extra)} are neither observations nor step keys")
        if self.version != SCHEMA_VERSION:
            raise ValueError(f"schema version {self.version} is not supported (this build reads {SCHEMA_VERSION})")
        return self

    @property
    def cameras(self) -> list[str]:
        return [s.camera for s in self.keys.values() if s.kind == "image" and s.camera]

    @property
    def image_keys(self) -> list[str]:
        return [k for k, s in self.keys.items() if s.kind == "image"]

    @property
    def action_dim(self) -> int:
        return int(np.prod(self.keys["action"].shape))

    @classmethod
    def build(cls, obs: dict[str, KeySpec], action_dim: int, chunk_len: int = 32) -> GroupSchema:
        """Schema from observation specs plus the standard step keys."""
        keys = dict(obs)
        keys["action"] = KeySpec(dtype="float32", shape=(action_dim,), finite=True)
        keys["reward"] = KeySpec(dtype="float32", finite=True)
        for k in ("done", "intervention", "success"):
            keys[k] = KeySpec(dtype="bool")
        try:
            return cls(keys=keys, obs_keys=tuple(obs), chunk_len=chunk_len)
        except ValueError as e:
            raise SchemaError(str(e)) from e

    @classmethod
    def from_spaces(cls, observation_space, action_space, chunk_len: int = 32) -> GroupSchema:
        """Schema from a gymnasium Dict observation space (keys `image_<camera>` are images)."""
        obs: dict[str, KeySpec] = {}
        for name, space in observation_space.spaces.items():
            if name.startswith("image_"):
                obs[name] = KeySpec(dtype="uint8", shape=space.shape, kind="image", camera=name[len("image_"):])
            else:
                obs[name] = KeySpec(dtype=np.dtype(space.dtype).name, shape=space.shape, finite=True)
        return cls.build(obs, int(np.prod(action_space.shape)), chunk_len)

    def compatible_with(self, other: GroupSchema) -> bool:
        return self.keys == other.keys and self.obs_keys == other.obs_keys
