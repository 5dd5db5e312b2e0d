"""Scripted experts on the simulated arm: Meta-World's hand-written policy, and a simulated human
who watches another policy and takes over when it strays."""

from __future__ import annotations

import warnings

import numpy as np

from worldsample.sim.config import ExpertConfig, InterventionConfig
from worldsample.sim.env import GOAL, HAND, OBJECT
from worldsample.sim.tasks import expert_policy_class


def _as_action(a: np.ndarray) -> np.ndarray:
    return np.clip(np.asarray(a, dtype=np.float32), -1.0, 1.0)


class ScriptedExpert:
    """Acts from the env's noise-free state, so sensor noise in the "real" domain does not hurt it."""

    def __init__(self, env, cfg: ExpertConfig | None = None, seed: int | None = None) -> None:
        self._env = env.unwrapped
        self.cfg = cfg or ExpertConfig()
        self._policy = expert_policy_class(self._env.config.task)()
        self._rng = np.random.default_rng(seed)

    def nominal_action(self) -> np.ndarray:
        """The policy's action for the current state, without exploration noise."""
        with warnings.catch_warnings():
            # Meta-World warns whenever its P-controller saturates, which is most steps; clipping is intended.
            warnings.filterwarnings("ignore", message=r"Constant\(s\) may be too high")
            action = self._policy.get_action(self._env.expert_state())
        return _as_action(action)

    def act(self) -> np.ndarray:
        action = self.nominal_action()
        if self.cfg.action_noise_std > 0:
            action = _as_action(action + self._rng.normal(0.0, self.cfg.action_noise_std, action.shape))
        return action


class InterventionExpert:
    """Simulated human supervisor (see `InterventionConfig` for the three triggers).

    Call `reset()` after every env reset and `filter(policy_action)` before every step. The human
    lets the policy act while it agrees with the expert (trigger `deviation`), makes progress
    (trigger `stall`) or does either (trigger `lost`), and tolerates `patience_steps` (`stall_steps`,
    `lost_steps`) consecutive straying steps;
    at the next one the expert drives for `takeover_steps` steps (starting with that step), then
    hands control back with a fresh count.
    """

    def __init__(
        self,
        env,
        cfg: InterventionConfig | None = None,
        expert_cfg: ExpertConfig | None = None,
        seed: int | None = None,
    ) -> None:
        self.cfg = cfg or InterventionConfig()
        self._env = env.unwrapped
        self.expert = ScriptedExpert(env, expert_cfg, seed=seed)
        self.last_deviation = 0.0
        self.reset()

    @property
    def in_control(self) -> bool:
        """Whether the expert will drive the next step regardless of the policy."""
        return self._takeover_left > 0

    def reset(self) -> None:
        self._streak = 0
        self._takeover_left = 0
        self._progress_mark = float("inf")  # distance to go when progress last counted

    def to_go(self) -> float:
        """Distance still to go (m): hand to the task's object plus object to the goal, noise-free."""
        s = self._env.expert_state()
        return float(np.linalg.norm(s[HAND] - s[OBJECT]) + np.linalg.norm(s[OBJECT] - s[GOAL]))

    def _stalled(self) -> bool:
        """Whether the arm is no closer to done than at the last progress (updates the mark)."""
        to_go = self.to_go()
        if to_go < self._progress_mark - self.cfg.stall_progress:
            self._progress_mark = to_go
            return False
        return True

    def filter(self, policy_action: np.ndarray) -> tuple[np.ndarray, bool]:
        """The action to execute this step and whether the expert chose it."""
        policy_action = _as_action(policy_action)
        # Judged against the noise-free expert, so the expert's own noise never counts as straying.
        reference = self.expert.nominal_action()
        self.last_deviation = float(np.linalg.norm(policy_action[:3] - reference[:3]))
        deviates = self.last_deviation > self.cfg.deviation_threshold
        if self.cfg.trigger == "stall":  # checked during takeovers too: the mark follows the expert's progress
            strays, tolerated = self._stalled(), self.cfg.stall_steps
        elif self.cfg.trigger == "lost":
            # _stalled() first, every step: it moves the progress mark
            strays, tolerated = self._stalled() and deviates, self.cfg.lost_steps
        else:
            strays, tolerated = deviates, self.cfg.patience_steps

        if self._takeover_left == 0:
            self._streak = self._streak + 1 if strays else 0
            if self._streak <= tolerated:
                return policy_action, False
            self._streak = 0
            self._takeover_left = self.cfg.takeover_steps

        self._takeover_left -= 1
        return self.expert.act(), True
