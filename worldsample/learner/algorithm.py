"""The algorithm contract of the loop's learn step, in the spirit of LeRobot's `rl/algorithms/base.py`:
the loop hands an algorithm an iterator of mixer batches and gets scalar statistics back. The
update-to-data ratio, the reward the learner sees and the behaviour-cloning mask belong here, not
to the loop, the mixer or a Ray actor.

No Ray or torch here: `SACAlgorithm` drives an agent built elsewhere (`worldsample.learner.sac.SACAgent`).
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Literal, Protocol

import numpy as np

from worldsample.store.sampler import Batch

# rows the behaviour-cloning term applies to: a human chose the action (demos, interventions), or the
# policy won that episode alone (the mixer's `success` pool, with loop.imitate_successes)
BC_SOURCES = ("demo", "intervention", "success")


class MeanStats:
    """Mean of per-update scalar dicts. A non-finite value counts as 0 in its update (a NaN
    estimate in one update must not hide the values of the others)."""

    def __init__(self) -> None:
        self.count, self.sums = 0, {}

    def add(self, stats: dict[str, float]) -> None:
        self.count += 1
        for k, v in stats.items():
            if math.isfinite(v):
                self.sums[k] = self.sums.get(k, 0.0) + v

    def mean(self) -> dict[str, float]:
        return {k: v / max(self.count, 1) for k, v in self.sums.items()}


class Algorithm(ABC):
    """What the loop needs from a learning rule."""

    @property
    @abstractmethod
    def reward_key(self) -> str:
        """The store's step key that the samplers sum as reward."""

    @property
    @abstractmethod
    def updates(self) -> int:
        """Gradient updates taken so far."""

    @property
    def actor_learning(self) -> bool:
        """False while only the critics learn (warm-up); the mixer's pacing waits for the actor."""
        return True

    @abstractmethod
    def updates_for(self, new_real_steps: int) -> int:
        """Gradient updates to take for this many newly committed real steps (the update-to-data ratio)."""

    @abstractmethod
    def update(self, batches: Iterable[Batch]) -> dict[str, float]:
        """One gradient update per batch; the mean of each statistic over the updates."""

    def pretrain(self, obs: np.ndarray, actions: np.ndarray) -> dict[str, float]:
        """Optional warm start from (observation, action) pairs; {} when the algorithm has none."""
        return {}


class SACAgentLike(Protocol):
    cfg: object
    updates: int

    def update(self, batch: Batch, report: bool | None = True) -> dict[str, float]: ...

    def update_many(self, batches: list[Batch], report: bool | None = True) -> dict[str, float]: ...

    def report(self) -> dict[str, float]: ...

    def bc_pretrain(self, obs: np.ndarray, actions: np.ndarray, steps: int) -> dict[str, float]: ...


class SACAlgorithm(Algorithm):
    """SAC with HIL-SERL's choices: a sparse success reward (or the task's shaped one, scaled),
    `utd` updates per real step, critic warm-up, and a behaviour-cloning term on the rows a human
    drove (demos and interventions)."""

    def __init__(self, agent: SACAgentLike, reward: Literal["success", "task", "classifier"] = "success",
                 reward_scale: float = 1.0):
        self.agent, self.reward, self.reward_scale = agent, reward, reward_scale
        self.cfg = agent.cfg

    @property
    def reward_key(self) -> str:
        # classifier: the success classifier's decision, a column the image profile's readers derive (loop/vision.py)
        return {"success": "success", "task": "reward", "classifier": "success_pred"}[self.reward]

    @property
    def updates(self) -> int:
        return self.agent.updates

    @property
    def actor_learning(self) -> bool:
        return self.agent.updates >= self.cfg.critic_warmup_updates

    def updates_for(self, new_real_steps: int) -> int:
        return new_real_steps * self.cfg.utd

    def prepare(self, batch: Batch) -> Batch:
        """The learner's view of a mixer batch: reward scale and the behaviour-cloning mask."""
        if self.reward == "task":
            batch["reward"] = batch["reward"] * self.reward_scale  # the store keeps the task's own reward
            if "mc_return" in batch:
                batch["mc_return"] = batch["mc_return"] * self.reward_scale
        imitate = np.isin(batch["source"], BC_SOURCES)
        if "chunk_human" in batch:  # an action chunk is imitated only if a human chose all of it
            imitate &= (batch["source"] != "intervention") | batch["chunk_human"]
        batch["bc_mask"] = imitate.astype(np.float32)
        return batch

    def update(self, batches: Iterable[Batch]) -> dict[str, float]:
        """`learner.updates_per_call` gradient steps per learner call. Batches may be drawn lazily:
        the mixer reads `actor_learning`, which the critic warm-up's end flips, so a call never spans
        that end and every batch is drawn with the value sequential updates would give it. The
        learner's metrics are reduced every `learner.metrics_every` calls and once at the end."""
        stats = MeanStats()
        it = iter(batches)
        while True:
            k = self.cfg.updates_per_call
            if not self.actor_learning:
                k = min(k, self.cfg.critic_warmup_updates - self.agent.updates)
            chunk = [self.prepare(b) for b in itertools.islice(it, k)]
            # calls without a report return {}, which must not count as an update with no values
            out = self.agent.update_many(chunk, report=None) if chunk else self.agent.report()
            if out:
                stats.add(out)
            if not chunk:
                return stats.mean()

    def pretrain(self, obs: np.ndarray, actions: np.ndarray) -> dict[str, float]:
        steps = self.cfg.bc_pretrain_steps
        if not steps or not len(actions):
            return {}
        return self.agent.bc_pretrain(obs, actions, steps)
