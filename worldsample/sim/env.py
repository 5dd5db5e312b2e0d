"""The simulated arm: a Meta-World Sawyer task behind a camera-image + proprioception interface.

Two domains share the task: "real" stands in for the deployment robot (nominal scene, noisy
proprioception, optional action latency) and "sim" is the randomised simulator used for
co-training (new camera pose, friction, object mass and lighting every episode, clean sensors).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from worldsample.sim.cameras import level_world_cameras
from worldsample.sim.config import SimArmConfig
from worldsample.sim.layout import GOAL, HAND, OBJECT, STATE_DIM  # noqa: F401 (re-exported: expert, benches)
from worldsample.sim.randomization import DomainRandomizer, Perturbation
from worldsample.sim.registry import ENV_ID
from worldsample.sim.rendering import CameraRenderer
from worldsample.sim.tasks import task_env_class

__all__ = ["ENV_ID", "SimArmEnv", "make_env"]

PROPRIO_DIM = 4  # hand xyz + gripper opening, the first four entries of the state


def _load_task(task: str):
    """A Meta-World env with the goal observable and object/goal placement drawn from its own seeded RNG."""
    arm = task_env_class(task)()
    arm._partially_observable = False  # the expert needs the goal position in the state
    del arm.sawyer_observation_space  # cached with the goal hidden; observations are clipped to it
    arm._set_task_called = True  # we place objects per reset instead of using Meta-World's task list
    arm._freeze_rand_vec = False
    arm.seeded_rand_vec = True  # draw placements from arm.np_random, not the global numpy RNG
    return arm


class SimArmEnv(gymnasium.Env):
    metadata = {"render_modes": []}

    def __init__(self, config: SimArmConfig | None = None, seed: int | None = None) -> None:
        self.config = cfg = config or SimArmConfig()
        self._arm = _load_task(cfg.task)
        self._arm.max_path_length = cfg.max_episode_steps
        model = self._arm.model
        level_world_cameras(model, cfg.cameras)
        self._randomizer = DomainRandomizer(model, cfg.cameras, cfg.randomization)
        self._renderer = CameraRenderer(model, cfg.cameras, cfg.image_size, cfg.render) if cfg.cameras else None

        size = cfg.image_size
        obs_spaces: dict[str, spaces.Space] = {
            f"image_{c}": spaces.Box(0, 255, (size, size, 3), np.uint8) for c in cfg.cameras
        }
        obs_spaces["proprio"] = spaces.Box(-np.inf, np.inf, (PROPRIO_DIM,), np.float32)
        if cfg.include_state:
            obs_spaces["state"] = spaces.Box(-np.inf, np.inf, (STATE_DIM,), np.float32)
        self.observation_space = spaces.Dict(obs_spaces)
        self.action_space = spaces.Box(-1.0, 1.0, (4,), np.float32)
        if seed is not None:
            self.action_space.seed(seed)

        self._first_seed = seed  # used by the first reset() that is not given a seed
        self._seeded = False
        self._noise_rng = np.random.default_rng()
        self._domain_rng = np.random.default_rng()
        self._perturbation: Perturbation = self._randomizer.nominal()
        self._pending: deque[np.ndarray] = deque()
        self._state = np.zeros(STATE_DIM)
        self._steps = 0

    # -- gymnasium API ---------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is None and not self._seeded:
            seed = self._first_seed
        super().reset(seed=seed)
        if seed is not None or not self._seeded:
            self._seed_streams(seed)

        cfg = self.config
        if cfg.domain == "sim":
            self._perturbation = self._randomizer.sample(self._domain_rng)
        else:
            self._perturbation = self._randomizer.nominal()
        # Before the arm's reset, which already simulates (it settles the hand) with these physics.
        self._randomizer.apply(self._perturbation)

        state, _ = self._arm.reset()
        self._state = state
        self._steps = 0
        zero = np.zeros(4, dtype=np.float32)
        self._pending = deque([zero] * self._delay_steps())
        return self._observation(), {"success": False}

    def step(self, action):
        action = np.clip(np.asarray(action, dtype=np.float32).reshape(4), -1.0, 1.0)
        # With latency the arm executes the action from `delay` steps ago.
        self._pending.append(action)
        executed = self._pending.popleft()

        state, reward, _, _, arm_info = self._arm.step(executed)
        self._state = state
        self._steps += 1
        success = bool(arm_info["success"])
        terminated = success and self.config.terminate_on_success
        truncated = self._steps >= self.config.max_episode_steps
        info = {k: float(v) for k, v in arm_info.items() if k != "success"}
        info["success"] = success
        return self._observation(), float(reward), terminated, truncated, info

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        self._arm.close()

    # -- extras used by the expert and the recorder ----------------------------------------------

    def expert_state(self) -> np.ndarray:
        """The noise-free 39-dim Meta-World state of the last reset/step (a copy)."""
        return self._state.copy()

    def domain_info(self) -> dict[str, Any]:
        """JSON-ready description of this episode's domain: nominal values in "real", samples in "sim"."""
        cfg = self.config
        info: dict[str, Any] = {"domain": cfg.domain, "task": cfg.task}
        info.update(self._perturbation.to_dict())
        info["proprio_noise_std"] = self._noise_std()
        info["action_delay_steps"] = self._delay_steps()
        return info

    # -- internals -------------------------------------------------------------------------------

    def _seed_streams(self, seed: int | None) -> None:
        # Independent streams, so e.g. adding sensor noise never moves the object placement.
        placement, noise, domain = np.random.SeedSequence(seed).spawn(3)
        self._arm.seed(int(placement.generate_state(1)[0]))
        self._noise_rng = np.random.default_rng(noise)
        self._domain_rng = np.random.default_rng(domain)
        self._seeded = True

    def _noise_std(self) -> float:
        return self.config.proprio_noise_std if self.config.domain == "real" else 0.0

    def _delay_steps(self) -> int:
        return self.config.action_delay_steps if self.config.domain == "real" else 0

    def _observation(self) -> dict[str, np.ndarray]:
        obs: dict[str, np.ndarray] = {}
        if self._renderer is not None:
            for cam, image in self._renderer.render(self._arm.data).items():
                obs[f"image_{cam}"] = image
        proprio = self._state[:PROPRIO_DIM].copy()
        if self._noise_std() > 0:
            proprio += self._noise_rng.normal(0.0, self._noise_std(), PROPRIO_DIM)
        obs["proprio"] = proprio.astype(np.float32)
        if self.config.include_state:
            obs["state"] = self._state.astype(np.float32)
        return obs


def make_env(cfg: SimArmConfig, seed: int | None = None) -> gymnasium.Env:
    """Make the registered env; `seed` fixes the first reset (and action-space sampling) when reset gets none."""
    return gymnasium.make(ENV_ID, config=cfg, seed=seed)
