"""The oracle imaginer: counterfactual branches played on the simulated arm instead of the world model.

A diagnostic, not a product path. Each real episode recorded by the lock-step simulated arm keeps its
reset seed (`extra.seed`) and its executed actions, and the arm is deterministic, so resetting a copy
of the run's arm with that seed and replaying the recorded actions up to the branch step restores
the exact state there; the perturbed actions are then played for real. The branches are what a
perfect world model would imagine, labelled by the arm itself (its reward, success and
termination), and go through the same bounds filter, pool and mixer as the world model's. Comparing
a run on these with a run on the world model's separates what the world model's errors cost from
what the branching scheme itself gives (`synth.imaginer: simulator`, docs/loop.md).

A branch point whose replayed observation differs from the stored one (an episode from another arm
configuration, or from a robot that is not this simulated arm) is an error: the oracle would then
branch from a state that never happened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from worldsample.synth.config import SynthConfig
from worldsample.synth.synthesiser import Synthesiser

if TYPE_CHECKING:
    from worldsample.sim.config import SimArmConfig


class ReplayMismatch(RuntimeError):
    """A replayed episode does not reproduce its stored observations."""


@dataclass
class Played:
    """What the synthesiser reads from an imagined rollout, here played on the arm."""

    frames: dict[str, np.ndarray]  # key -> (B, T, d): the observation after each action
    reward: np.ndarray  # (B, T)
    success_label: np.ndarray  # (B, T) bool
    done_label: np.ndarray  # (B, T) bool: the arm terminated
    uncertainty: None = None  # the arm is not uncertain: nothing to veto
    actions: np.ndarray | None = None  # (B, T, A) the actions played


class SimReplay:
    """Plays branches on a private copy of the run's simulated arm (vector observations only)."""

    def __init__(self, env_cfg: SimArmConfig, keys: list[str], horizon: int, atol: float = 1e-5):
        from worldsample.sim.env import SimArmEnv

        # cameras off (the state model reads vectors), and room past the episode's end for a branch
        # that runs beyond it (success focus): the arm's step limit would otherwise stop the replay
        cfg = env_cfg.model_copy(update={"cameras": [], "max_episode_steps": env_cfg.max_episode_steps + horizon + 1})
        self.env = SimArmEnv(cfg)
        self.keys, self.atol = keys, atol

    def play(self, seed: int, prefix: np.ndarray, expect: dict[str, np.ndarray], actions=None, policy=None,
             horizon: int | None = None):
        """Reset with `seed`, replay the recorded `prefix` actions, check the observation there
        against `expect` (key -> vector), then play `actions` (T, A), or for `horizon` steps what
        `policy` ((obs key -> (1, d), step) -> (1, A), a batch policy) does on the arm's observations.
        Returns per-step observations (key -> (T, d)), rewards, successes, terminations and the
        actions played; after a termination the last observation and labels are held."""
        obs, _ = self.env.reset(seed=int(seed))
        for a in prefix:
            obs, *_ = self.env.step(a)
        for k in self.keys:
            if not np.allclose(obs[k], expect[k], atol=self.atol):
                err = float(np.abs(obs[k] - expect[k]).max())
                raise ReplayMismatch(f"replaying seed {seed} for {len(prefix)} steps gives {k} off by {err:.3g} from "
                                     "the stored episode: it was not recorded by this simulated arm's configuration")
        t_len = len(actions) if policy is None else int(horizon)
        frames = {k: np.empty((t_len, *np.shape(obs[k])), np.float32) for k in self.keys}
        reward, success, done = np.zeros(t_len, np.float32), np.zeros(t_len, bool), np.zeros(t_len, bool)
        played = np.zeros((t_len, *self.env.action_space.shape), np.float32)
        over = False
        for t in range(t_len):
            if not over:
                a = actions[t] if policy is None else policy({k: np.asarray(v)[None] for k, v in obs.items()}, t)[0]
                played[t] = a
                obs, r, terminated, _, info = self.env.step(played[t])
                reward[t], success[t], done[t] = r, info["success"], terminated
                over = terminated
            else:  # past the end: hold the terminal observation and labels (the synthesiser cuts there)
                played[t] = played[t - 1]
                reward[t], success[t], done[t] = reward[t - 1], success[t - 1], done[t - 1]
            for k in self.keys:
                frames[k][t] = obs[k]
        return frames, reward, success, done, played

    def close(self) -> None:
        self.env.close()


class SimReplaySynthesiser(Synthesiser):
    """The synthesiser with the world model's imagination replaced by `SimReplay`: same branch
    points, perturbations, filters and pool; no uncertainty veto (the arm has nothing to veto)."""

    def __init__(self, store, imaginer, cfg: SynthConfig, action_low, action_high, env_cfg: SimArmConfig):
        if imaginer.cfg.image_keys:
            raise ValueError("synth.imaginer=simulator replays vector observations only; this world model reads "
                             f"images {imaginer.cfg.image_keys}")
        # the arm labels success and termination itself, and has nothing for the veto to cut on
        plain = cfg.model_copy(update={"max_uncertainty": None, "success_threshold": None})
        super().__init__(store, imaginer, plain, action_low, action_high)
        self.replay = SimReplay(env_cfg, list(imaginer.cfg.vector_keys), cfg.horizon)
        self._seeds: dict[tuple[str, int], int] = {}

    def _seed(self, group: str, episode: int) -> int:
        if (group, episode) not in self._seeds:
            rec = self.readers[group].records[episode]  # a branch point's episode is committed
            if "seed" not in rec.extra:
                raise ReplayMismatch(f"{group} episode {episode} has no reset seed (extra.seed): only episodes the "
                                     "lock-step simulated arm recorded (loop.robot=sim, demos) can be replayed")
            self._seeds[(group, episode)] = int(rec.extra["seed"])
        return self._seeds[(group, episode)]

    def _imagine(self, points, context, ctx_actions, actions, domain: int, policy=None) -> Played:
        out = []
        for b, (g, ep, t) in enumerate(points):
            prefix = self.readers[g].read_steps(ep, "action", 0, t)  # the context already holds the state at t
            expect = {k: context[k][b, -1] for k in self.keys}
            out.append(self.replay.play(self._seed(g, ep), prefix, expect, None if actions is None else actions[b],
                                        policy=policy, horizon=self.cfg.horizon + 1))
        frames = {k: np.stack([o[0][k] for o in out]) for k in self.keys}
        reward, success, done, played = (np.stack([o[i] for o in out]) for i in (1, 2, 3, 4))
        return Played(frames, reward, success, done, actions=played)

    def close(self) -> None:
        self.replay.close()
