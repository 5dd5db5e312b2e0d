"""Best-of-N at the loop's own simulated arm (`loop.search`): the collector and the evaluator act
through `worldsample.evaluation.search.BestOfN` in the run's latest world model, scored by the
learner's latest critic (the trainer checkpoint), instead of executing the policy's action alone.

Between episodes `refresh` takes the newest policy, world model and trainer checkpoint; until the
run has all three the arm runs the policy alone (`active` False), as it does for a policy the search
cannot imagine with. Nothing here is on the learner's path: the search changes which actions the
arm executes, and so what the store records, never how the learner trains on it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from worldsample.errors import ConfigError
from worldsample.loop.config import SearchConfig
from worldsample.paths import RunFiles
from worldsample.versioned import VersionedDir, VersionError


class LoopSearch:
    def __init__(self, run_dir: str | Path, cfg: SearchConfig, seed: int):
        self.run_dir, self.cfg, self.seed = Path(run_dir), cfg, seed
        self.planner = None
        self.model, self.wm_version, self.critic, self.ckpt_version, self.actor = None, None, None, None, None
        self.error: str | None = None  # why the last refresh left the search off
        self.decisions = 0  # searched decisions since the start: what the summary and the store see

    @property
    def active(self) -> bool:
        return self.planner is not None

    def refresh(self, actor) -> None:
        """Between episodes: rebuild the planner when the policy, world model or critic changed."""
        from worldsample.evaluation.critic import load_critic
        from worldsample.evaluation.imagined import load_world_model
        from worldsample.evaluation.search import BestOfN

        files = RunFiles.of(self.run_dir)
        try:
            wm_v, ckpt_v = VersionedDir(files.world_model).latest(), VersionedDir(files.trainer).latest()
        except (VersionError, OSError) as e:
            self.planner, self.error = None, str(e)
            return
        if actor is None or wm_v is None or (ckpt_v is None and self.cfg.score == "value"):
            self.planner, self.error = None, "no policy, world model or trainer checkpoint yet"
            return
        if (actor, wm_v, ckpt_v) == (self.actor, self.wm_version, self.ckpt_version) and self.planner is not None:
            return
        try:
            if wm_v != self.wm_version:
                self.model, self.wm_version = load_world_model(self.run_dir, wm_v)
            if self.cfg.score == "value" and ckpt_v != self.ckpt_version:
                self.critic, self.ckpt_version = load_critic(self.run_dir, ckpt_v), ckpt_v
            self.planner = BestOfN(self.model, actor, self.cfg.n, self.cfg.horizon, spread=self.cfg.spread,
                                   seed=self.seed, score=self.cfg.score, critic=self.critic)
            self.actor, self.error = actor, None
        except ConfigError as e:  # a policy or checkpoint the search cannot use: the policy alone
            self.planner, self.error = None, str(e)

    def reset(self, obs: dict[str, np.ndarray]) -> None:
        if self.planner is not None:
            self.planner.reset(obs)

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        self.decisions += 1
        return self.planner.act(obs)

    def executed(self, action: np.ndarray) -> None:
        """The action the arm executed instead (a human's takeover): the imagined history follows it."""
        if self.planner is not None:
            self.planner.executed(action)
