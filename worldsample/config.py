"""Run configuration: pydantic models, loaded from YAML and overridden with `--set key=value`.

Nothing deeper in the library reads files or environment variables for settings: the CLI loads
a `RunConfig` here and passes the parts down. A run keeps its own config in RUN/config.yaml
(resume starts from it) and a line per start or resume in RUN/config_history.jsonl.
"""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from worldsample.atomic import atomic_write_text
from worldsample.loop.config import LoopConfig
from worldsample.paths import RunFiles
from worldsample.sim.config import ExpertConfig, InterventionConfig, SimArmConfig
from worldsample.yamlconfig import load_model


class StoreConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    chunk_len: int = Field(32, ge=1, le=4096, description="steps per zarr chunk (episodes are chunk-aligned)")

    @model_validator(mode="before")
    @classmethod
    def _moved_keys(cls, data: Any) -> Any:
        # run directories written before the synthetic pool's bound moved to loop.synth.pool_max_steps
        # still resume; the old value is ignored, as the synthesiser never read it
        if isinstance(data, dict) and "synthetic_max_steps" in data:
            data = {k: v for k, v in data.items() if k != "synthetic_max_steps"}
        return data


class DemoConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    episodes: int = Field(3, ge=1, description="few on purpose, so the benchmark shows what online learning adds: "
                          "with the human, state profile, behaviour cloning starts at about 25 % from 3 scripted "
                          "demos, 38 % from 5 and 73 % from 10, and runs of 4,000 real steps end at a final IQM of "
                          "83 %, 86 % and 89-90 % (docs/results.md, 'From 10 demonstrations')")
    seed: int = 0
    expert: ExpertConfig = ExpertConfig()
    keep_failures: bool = Field(True, description="store expert episodes that did not succeed too")
    sim_episodes: int = Field(0, ge=0, description="expert episodes in the randomised sim domain (group `sim`), "
                              "collected after the demos: free on a real arm, breadth for the pixel encoder "
                              "(loop.vision.pretrain_groups) and the world model's cotrain mode")


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    env: SimArmConfig = SimArmConfig()
    store: StoreConfig = StoreConfig()
    demos: DemoConfig = DemoConfig()
    intervention: InterventionConfig = InterventionConfig()
    loop: LoopConfig = LoopConfig()

    @model_validator(mode="after")
    def _vision_cameras_exist(self) -> RunConfig:
        vision = self.loop.vision
        if vision.enabled:
            missing = [c for c in vision.cameras if c not in self.env.cameras]
            if missing:
                raise ValueError(f"loop.vision.cameras {vision.cameras}: env.cameras {self.env.cameras} lack {missing}")
            if "sim" in vision.pretrain_groups and self.demos.sim_episodes == 0:
                raise ValueError("loop.vision.pretrain_groups includes sim but demos.sim_episodes is 0: set "
                                 "demos.sim_episodes to the randomised-domain expert episodes to collect")
        return self


def load_config(
    path: Path | None = None, overrides: list[str] | None = None, base: RunConfig | None = None
) -> RunConfig:
    """`base` (default: the defaults), the YAML file at `path` over it, then the overrides."""
    # nested sections start from the base, so `--set loop.world_model.train.ae_steps=20`
    # changes one field instead of replacing a whole section built by a default factory
    start = (base if base is not None else RunConfig()).model_dump(mode="json")
    return load_model(RunConfig, path, overrides, what="config", base=start)


def dump_config(cfg: RunConfig) -> str:
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)


# -- a run's own config: RUN/config.yaml and its history ------------------------------------------
def saved_config(run_dir: Path | str) -> RunConfig | None:
    """The config the run was started (or last resumed) with, or None when the run has none."""
    path = RunFiles.of(run_dir).config
    if not path.exists():
        return None
    # fields added since the run started take their defaults
    return load_model(RunConfig, path, what="run config", base=RunConfig().model_dump(mode="json"))


def load_run_config(
    run_dir: Path | str, overlay: Path | None = None, overrides: list[str] | None = None
) -> RunConfig | None:
    """The run's own config with `overlay` (a YAML file, e.g. `--config`) and the overrides on top;
    None when the run has no config.yaml."""
    saved = saved_config(run_dir)
    return None if saved is None else load_config(overlay, overrides, base=saved)


def record_config(
    run_dir: Path | str,
    cfg: RunConfig,
    action: str,
    command: list[str],
    overlay: Path | None = None,
    overrides: list[str] | None = None,
    **extra: Any,
) -> None:
    """Save `cfg` as the run's config and append what changed it to the run's config history."""
    files = RunFiles.of(run_dir)
    atomic_write_text(files.config, dump_config(cfg))
    entry = {"time": time.time(), "action": action, "command": shlex.join(command),
             "config": None if overlay is None else str(overlay), "overrides": list(overrides or []), **extra}
    with open(files.config_history, "a") as f:
        f.write(json.dumps(entry) + "\n")


def config_history(run_dir: Path | str) -> list[dict[str, Any]]:
    """The run's config history, oldest first (a line cut short by a crash is skipped)."""
    path = RunFiles.of(run_dir).config_history
    if not path.exists():
        return []
    entries = []
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries
