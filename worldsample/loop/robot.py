"""The robot side of a lock-step loop, on the simulated arm: no bridge, no DDS.

Evaluator     success of the latest exported policy, deterministic, on held-out initial states;
              nothing is recorded (with the bridge on the simulated arm this is the trainer's own copy
              of the sim; on a physical arm set loop.eval_episodes=0);
SimCollector  an Evaluator that also steps the arm with the exploring policy (and the simulated
              human, when interventions are on) and commits one episode per call into `real`.

With `loop.search` both act through Best-of-N in the run's world model (worldsample/loop/search.py)
once the run has a world model and a trainer checkpoint: evaluations with `search.evaluate`, the
collector with `search.collect` (its candidates, the action plus noise, are then its exploration).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from worldsample.loop.config import LoopConfig
from worldsample.paths import RunFiles
from worldsample.sim.config import InterventionConfig, SimArmConfig
from worldsample.store import EpisodeRecord, EpisodeStore, GroupSchema
from worldsample.versioned import VersionedDir, VersionWatcher


class Evaluator:
    def __init__(self, run_dir: str | Path, env_cfg: SimArmConfig, loop: LoopConfig):
        from worldsample.sim import make_env

        self.run_dir, self.loop = Path(run_dir), loop
        # the state policy sees vectors only: evaluating needs no camera renders; the image profile's
        # policy renders the encoder's cameras
        cameras = list(loop.vision.cameras) if loop.vision.enabled else []
        self.eval_env = make_env(env_cfg.model_copy(update={"cameras": cameras}))
        self.rng = np.random.default_rng(loop.seed)
        self.policy, self.version = None, None
        self.noise_scale = loop.explore_scale  # the collector's, by the real steps committed (explore_scale_at)
        self._queue: list[np.ndarray] = []  # the rest of the policy's action chunk (learner.action_chunk)
        self._policies = VersionWatcher(VersionedDir(RunFiles.of(run_dir).policies))
        self.search = None
        if loop.search.n:
            from worldsample.loop.search import LoopSearch

            self.search = LoopSearch(run_dir, loop.search, loop.seed)

    def ready(self) -> bool:
        """Constructed: the loop waits for this before other parts open the store."""
        return True

    def _refresh_policy(self) -> None:
        """Swap to the newest exported policy, only between episodes."""
        from worldsample.policy import load_actor

        version = self._policies.poll()
        if version is not None:
            vision = self.loop.vision.enabled
            self.policy = self._load(version) if vision else load_actor(self.run_dir, version, chunks=True)
            self.version = version
            self._policies.accept(version)
        if self.search is not None:
            self.search.refresh(self.policy)

    def _load(self, version: int):
        """The image profile: the version's policy.onnx (frozen encoder + actor) through onnxruntime,
        the same runner the bridge uses on the robot PC."""
        from worldsample.policy import PolicyRegistry
        from worldsample.policy.onnx_actor import ONNX_FILE, OnnxActor

        reg = PolicyRegistry(self.run_dir)
        config, _ = reg.load(version)
        return OnnxActor(reg.dir.path(version) / ONNX_FILE, config=config,
                         expect={k: tuple(v.shape) for k, v in self.eval_env.observation_space.spaces.items()})

    def _action(self, obs, explore: bool) -> np.ndarray:
        """The policy's next action: a chunking policy (learner.action_chunk) is asked again only once
        the actions of its last output are played (open-loop); `_queue` is emptied at every episode
        start and whenever the human takes over."""
        if self.policy is None:
            return self.eval_env.action_space.sample().astype(np.float32)
        if self._searching(explore):
            return self.search.act(obs)
        if not self._queue:
            if explore and self.loop.explore:
                out = self.policy.act(obs, explore=True, rng=self.rng, noise_scale=self.noise_scale)
            else:
                out = self.policy.act(obs, rng=self.rng)
            self._queue = list(out.reshape(-1, self.eval_env.action_space.shape[0]))
        return self._queue.pop(0)

    def _searching(self, explore: bool) -> bool:
        s = self.search
        return s is not None and s.active and (s.cfg.collect if explore else s.cfg.evaluate)

    def _start(self, obs, explore: bool) -> None:
        """A new episode at `obs`: no chunk left, the search's imagined history empty."""
        self._queue = []
        if self._searching(explore):
            self.search.reset(obs)

    def evaluate(self, episodes: int, seed0: int) -> dict:
        self._refresh_policy()
        wins, steps = 0, 0
        searched = self.search.decisions if self.search else 0
        for i in range(episodes):
            obs, _ = self.eval_env.reset(seed=seed0 + i)
            self._start(obs, explore=False)
            while True:
                obs, _, terminated, truncated, info = self.eval_env.step(self._action(obs, explore=False))
                steps += 1
                if info["success"]:
                    wins += 1
                    break
                if terminated or truncated:
                    break
        n = max(episodes, 1)
        return {
            "success_rate": wins / n,
            "episodes": episodes,
            "successes": wins,
            "policy_version": self.version,
            "mean_length": steps / n,
            "searched_steps": (self.search.decisions - searched) if self.search else 0,
        }

    def close(self) -> None:
        self.eval_env.close()


class SimCollector(Evaluator):
    """Steps the simulated arm in lock-step with the loop and records into the `real` group."""

    def __init__(self, run_dir: str | Path, env_cfg: SimArmConfig, loop: LoopConfig, intervention: InterventionConfig):
        from worldsample.sim import InterventionExpert, make_env

        super().__init__(run_dir, env_cfg, loop)
        self.env = make_env(env_cfg)
        self.store = EpisodeStore(run_dir, create=True)
        self.store.ensure_group("real", GroupSchema.from_spaces(self.env.observation_space, self.env.action_space))
        self.writer = self.store.writer("real")  # held for the collector's life: one writer per group
        self.expert = InterventionExpert(self.env, intervention, seed=loop.seed) if loop.interventions else None
        reader = self.store.reader("real")
        self.committed = reader.num_steps  # a resumed run goes on where it was
        # loop.retry_failed: the start the next episode repeats, and how often it has been tried again
        self._retry: tuple[int, int] | None = None
        if loop.retry_failed and reader.num_episodes:
            self._retry = self._next_retry(reader.episode_records()[-1])

    def _next_retry(self, rec: EpisodeRecord) -> tuple[int, int] | None:
        """After `rec`: (its start, the retries so far + 1) when it was not won alone and has retries left.
        Won alone is read off the record as committed (loop/learning.py's `won_alone` also takes an operator's
        label, which cannot exist yet when the arm resets for the next episode)."""
        seed, tries = rec.extra.get("seed"), int(rec.extra.get("retry", 0))
        if seed is None or (rec.success and rec.interventions == 0) or tries >= self.loop.retry_failed:
            return None
        return int(seed), tries + 1

    def episode(self, seed: int) -> dict:
        """One episode from `seed`'s initial state, or from the last one's under loop.retry_failed."""
        retry = 0
        if self._retry is not None:
            seed, retry = self._retry
        rec = self._episode(seed, retry)
        ep = {"episode": rec.episode, "length": rec.length, "success": rec.success, "return": rec.episode_return,
              "interventions": rec.interventions, "policy_version": self.version}
        if self.loop.retry_failed:
            self._retry = self._next_retry(rec)
            ep["retry"] = retry
        return ep

    def _episode(self, seed: int, retry: int) -> EpisodeRecord:
        self._refresh_policy()
        self.noise_scale = self.loop.explore_scale_at(self.committed)
        obs, _ = self.env.reset(seed=seed)
        if self.expert:
            self.expert.reset()
        ep = self.writer.begin_episode()
        self._start(obs, explore=True)
        searched = self.search.decisions if self.search else 0
        while True:
            action = self._action(obs, explore=True)
            intervened = False
            if self.expert:
                action, intervened = self.expert.filter(action)
                if intervened:  # the human has the controls: the rest of the chunk is not played
                    self._queue = []
                    if self._searching(True):
                        self.search.executed(action)
            nobs, reward, terminated, truncated, info = self.env.step(action)
            ep.add_step({**obs, "action": action, "reward": np.float32(reward), "done": bool(terminated),
                         "intervention": intervened, "success": bool(info["success"])})
            obs = nobs
            if terminated or truncated:
                break
        extra = {"seed": seed, "retry": retry} if retry else {"seed": seed}
        if self.search:  # the steps whose action Best-of-N chose
            extra["searched_steps"] = self.search.decisions - searched
        rec = ep.commit(policy_version=self.version, domain="real", domain_info=self.env.unwrapped.domain_info(),
                        extra=extra)
        self.committed += rec.length
        return rec

    def close(self) -> None:
        self.writer.close()
        self.env.close()
        super().close()
