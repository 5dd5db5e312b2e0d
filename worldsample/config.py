"""Run configuration: pydantic models, loaded from YAML and overridden with `--set key=value`.

Nothing deeper in the library reads files or environment variables for settings: the CLI loads
a `RunConfig` here and passes the parts down.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from worldsample.loop.config import LoopConfig
from worldsample.sim.config import ExpertConfig, InterventionConfig, SimArmConfig
from worldsample.yamlconfig import load_model


class StoreConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    chunk_len: int = Field(32, ge=1, le=4096, description="steps per zarr chunk (episodes are chunk-aligned)")
    synthetic_max_steps: int | None = Field(200_000, ge=1, description="bound of the synthetic pool")


class DemoConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    episodes: int = Field(3, ge=1, description="few on purpose: from the 39-dim state, 10 scripted demos let "
                          "behaviour cloning alone solve push-v3, leaving online learning nothing to show")
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


def load_config(path: Path | None = None, overrides: list[str] | None = None) -> RunConfig:
    # nested sections start from their defaults, so `--set loop.world_model.train.ae_steps=20`
    # changes one field instead of replacing a whole section built by a default factory
    return load_model(RunConfig, path, overrides, what="config", base=RunConfig().model_dump(mode="json"))


def dump_config(cfg: RunConfig) -> str:
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
