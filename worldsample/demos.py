"""Scripted demonstrations on the simulated arm, recorded into a run's episode store."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from worldsample.config import RunConfig
from worldsample.store import EpisodeStore, GroupSchema, Retention


@dataclass
class CollectSummary:
    group: str
    episodes: int
    successes: int
    steps: int
    seconds: float

    @property
    def success_rate(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0


SIM_SEED_OFFSET = 500_000  # sim-group episodes start from other seeds than the demos (and than eval's 10000+)


def group_for_domain(domain: str) -> str:
    """Deployment-domain demos go to `demo`; randomised-domain ones are co-training data."""
    return "demo" if domain == "real" else "sim"


def open_store_for_env(run_dir: Path, cfg: RunConfig, env, group: str) -> EpisodeStore:
    store = EpisodeStore(run_dir, create=True)
    retention = Retention(max_steps=cfg.loop.synth.pool_max_steps) if group == "synthetic" else None
    schema = GroupSchema.from_spaces(env.observation_space, env.action_space, cfg.store.chunk_len)
    store.ensure_group(group, schema, retention)
    return store


def collect_demos(
    run_dir: Path,
    cfg: RunConfig,
    episodes: int,
    group: str | None = None,
    on_episode: Callable[[int, bool, int], None] | None = None,
) -> CollectSummary:
    """Roll the scripted expert for `episodes` episodes; commit each one as it ends.

    Episode i uses seed `cfg.demos.seed + first_id + i` (plus SIM_SEED_OFFSET in the `sim` group, so
    its episodes never start where the demos do), so a collection that is interrupted and started
    again continues with new initial states instead of repeating old ones."""
    from worldsample.sim import ScriptedExpert, make_env  # MuJoCo loads here, not at import

    group = group or group_for_domain(cfg.env.domain)
    env = make_env(cfg.env)
    store = open_store_for_env(run_dir, cfg, env, group)
    t0 = time.perf_counter()
    successes = steps = 0
    with store.writer(group) as writer:
        first = writer.next_episode_id
        for i in range(episodes):
            seed = cfg.demos.seed + (SIM_SEED_OFFSET if group == "sim" else 0) + first + i
            obs, info = env.reset(seed=seed)
            expert = ScriptedExpert(env, cfg.demos.expert, seed=seed)
            ep = writer.begin_episode()
            success = False
            while True:
                action = expert.act()
                nobs, reward, terminated, truncated, info = env.step(action)
                success = success or bool(info["success"])
                ep.add_step(
                    {
                        **obs,
                        "action": action,
                        "reward": np.float32(reward),
                        "done": bool(terminated),
                        "success": bool(info["success"]),
                    }
                )
                obs = nobs
                if terminated or truncated:
                    break
            if success or cfg.demos.keep_failures:
                rec = ep.commit(
                    domain=cfg.env.domain,
                    domain_info=env.unwrapped.domain_info(),
                    extra={"seed": seed, "source": "scripted_expert"},
                )
                steps += rec.length
                successes += int(success)
            else:
                ep.discard()
            if on_episode:
                on_episode(i, success, ep.length)
    env.close()
    return CollectSummary(group, episodes, successes, steps, time.perf_counter() - t0)
