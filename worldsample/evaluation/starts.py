"""Initial observations to start imagined (and real) rollouts from.

heldout   the first observation of held-out episodes in the run's store (the world model's own split:
          episode ids with id % holdout_every == holdout_every - 1, never trained on), real episodes
          first, then demonstrations; what a physical arm has.
sim       the simulated arm reset at the evaluation seeds (EVAL_SEED0 + i), the same initial states
          the real evaluation on the simulated arm starts from.

Either is a `Starts`: key -> (n, ...) arrays and where each row came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from worldsample.errors import ConfigError, StoreError
from worldsample.store import EpisodeStore


@dataclass
class Starts:
    obs: dict[str, np.ndarray]  # key -> (n, ...)
    origin: list[str] = field(default_factory=list)  # "real/17", "sim/10003", ...
    seeds: list[int] | None = None  # sim starts: the reset seeds, to replay them on the arm

    def __len__(self) -> int:
        return len(self.origin)


def heldout_starts(
    run_dir: str | Path, keys: list[str], n: int, holdout_every: int, groups: tuple[str, ...] = ("real", "demo")
) -> Starts:
    """First observations of up to `n` held-out episodes (newest first within a group)."""
    from worldsample.world_model.data import is_heldout

    if holdout_every <= 0:
        raise ConfigError("the world model holds no episode out (train.holdout_every 0): use sim starts")
    store = EpisodeStore(run_dir)
    rows: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    origin: list[str] = []
    for g in groups:
        if g not in store.groups or len(origin) >= n:
            continue
        schema = store.schema(g)
        missing = [k for k in keys if k not in schema.keys]
        if missing:
            raise ConfigError(f"group {g!r} has no {missing}; the policy and world model need {keys}")
        reader = store.reader(g, keys=keys)
        for rec in reversed(reader.episode_records()):
            if len(origin) >= n:
                break
            if not is_heldout(rec.episode, holdout_every):
                continue
            try:
                first = {k: reader.read_steps(rec.episode, k, 0, 1)[0] for k in keys}
            except StoreError:  # dropped by retention or damaged meanwhile: the next one
                continue
            for k in keys:
                rows[k].append(first[k])
            origin.append(f"{g}/{rec.episode}")
    if not origin:
        raise ConfigError(
            f"no held-out episode in groups {list(groups)} of {run_dir} (ids with id % {holdout_every} == "
            f"{holdout_every - 1}); collect more episodes or use sim starts"
        )
    return Starts({k: np.stack(v) for k, v in rows.items()}, origin)


def sim_starts(env_cfg, keys: list[str], n: int, seed0: int | None = None) -> Starts:
    """The simulated arm's observations after reset(seed=seed0 + i), i < n (cameras off unless asked)."""
    from worldsample.sim import make_env

    seed0 = eval_seed0() if seed0 is None else seed0
    from pydantic import ValidationError

    cams = [k.removeprefix("image_") for k in keys if k.startswith("image_")]
    try:
        env_cfg = type(env_cfg).model_validate({**env_cfg.model_dump(), "cameras": cams})
    except ValidationError as e:
        raise ConfigError(f"the simulated arm cannot give {keys}: {e.errors()[0]['msg']}") from None
    env = make_env(env_cfg)
    try:
        rows: dict[str, list[np.ndarray]] = {k: [] for k in keys}
        for i in range(n):
            obs, _ = env.reset(seed=seed0 + i)
            missing = [k for k in keys if k not in obs]
            if missing:
                raise ConfigError(f"the simulated arm has no {missing} (it has {sorted(obs)})")
            for k in keys:
                rows[k].append(np.asarray(obs[k]))
    finally:
        env.close()
    seeds = [seed0 + i for i in range(n)]
    return Starts({k: np.stack(v) for k, v in rows.items()}, [f"sim/{s}" for s in seeds], seeds)


def eval_seed0() -> int:
    """The loop's first held-out evaluation seed, so that scores here and in the run's log start alike."""
    from worldsample.loop.loop import EVAL_SEED0

    return EVAL_SEED0
