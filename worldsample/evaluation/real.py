"""A policy on the simulated arm, deterministic, from the held-out evaluation seeds: what the loop's
Evaluator measures (worldsample/loop/robot.py), for one given version, with per-episode results."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from worldsample.policy import NumpyActor

Act = Callable[[dict[str, np.ndarray]], np.ndarray]


@dataclass
class RealScore:
    version: int | None
    success_rate: float
    mean_return: float  # of the environment's reward, as the store records it
    mean_length: float
    episodes: int
    seed0: int
    seconds: float = 0.0
    successes: list[bool] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def run_episodes(env, act: Act, seeds: list[int], on_reset: Callable[[dict], None] | None = None) -> list[dict]:
    """One episode per seed with `act(obs) -> action`; success, return and length of each."""
    out = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        if on_reset is not None:
            on_reset(obs)
        ret, steps, won = 0.0, 0, False
        while True:
            obs, reward, terminated, truncated, info = env.step(act(obs))
            ret += float(reward)
            steps += 1
            if info["success"]:
                won = True
                break
            if terminated or truncated:
                break
        out.append({"seed": seed, "success": won, "return": ret, "length": steps})
    return out


def eval_env(env_cfg):
    """The simulated arm without cameras: the policy reads vectors only, and renders cost ~60 ms a frame."""
    from worldsample.sim import make_env

    return make_env(env_cfg.model_copy(update={"cameras": []}))


def score_real(actor: NumpyActor, env_cfg, episodes: int, seed0: int | None = None, env=None) -> RealScore:
    """Success of the deterministic policy over `episodes` resets at seed0, seed0 + 1, ..."""
    from worldsample.evaluation.starts import eval_seed0

    seed0 = eval_seed0() if seed0 is None else seed0
    t0 = time.perf_counter()
    own = env is None
    env = eval_env(env_cfg) if own else env
    try:
        eps = run_episodes(env, lambda obs: actor.act(obs), [seed0 + i for i in range(episodes)])
    finally:
        if own:
            env.close()
    n = max(len(eps), 1)
    return RealScore(
        version=actor.version,
        success_rate=sum(e["success"] for e in eps) / n,
        mean_return=sum(e["return"] for e in eps) / n,
        mean_length=sum(e["length"] for e in eps) / n,
        episodes=len(eps),
        seed0=seed0,
        seconds=time.perf_counter() - t0,
        successes=[bool(e["success"]) for e in eps],
    )
