"""The trainer's workers as plain classes; driver.py runs each one as a named Ray actor.

Evaluator      success of the latest exported policy on held-out states of the simulated arm;
SimWorker      an Evaluator that also steps the arm with the exploring policy and commits episodes
               into the store's `real` group (the lock-step stand-in for robot + bridge);
LearnerWorker  RLlib SAC learner fed by the PPL mixer; exports the actor to the policy registry;
WorldModelWorker  continual post-training of the world model on demo + real episodes;
SynthWorker    counterfactual branches from the latest world model into the `synthetic` group.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from worldsample.loop.config import LoopConfig
from worldsample.sim.config import InterventionConfig, SimArmConfig
from worldsample.store import EpisodeStore, GroupSampler, GroupSchema

log = logging.getLogger(__name__)


def _threads(n: int = 1) -> None:
    """Each actor gets one intra-op thread: on a small machine they share the cores."""
    import torch

    torch.set_num_threads(n)


class Evaluator:
    """Success of the latest exported policy, deterministic, on held-out initial states of the
    simulated arm; nothing is recorded. With `--robot bridge` on the simulated arm this is the
    trainer's own copy of the sim (for a physical arm set loop.eval_episodes=0)."""

    def __init__(self, run_dir: str, env_cfg: SimArmConfig, loop: LoopConfig):
        from worldsample.sim import make_env

        self.run_dir, self.loop = Path(run_dir), loop
        # the policy sees vectors only: evaluating needs no camera renders (about 60 ms a frame on CPU)
        self.eval_env = make_env(env_cfg.model_copy(update={"cameras": []}))
        self.rng = np.random.default_rng(loop.seed)
        self.policy, self.version = None, None

    def ready(self) -> bool:
        """Constructed: the driver waits for this before other actors open the store."""
        return True

    def _refresh_policy(self) -> None:
        """Swap to the newest exported policy, only between episodes."""
        from worldsample.policy import PolicyRegistry, load_actor

        latest = PolicyRegistry(self.run_dir).latest_version()
        if latest is not None and latest != self.version:
            self.policy, self.version = load_actor(self.run_dir, latest), latest

    def _action(self, obs, explore: bool) -> np.ndarray:
        if self.policy is None:
            return self.eval_env.action_space.sample().astype(np.float32)
        return self.policy.act(obs, explore=explore and self.loop.explore, rng=self.rng)

    def evaluate(self, episodes: int, seed0: int) -> dict:
        self._refresh_policy()
        wins, steps = 0, 0
        for i in range(episodes):
            obs, _ = self.eval_env.reset(seed=seed0 + i)
            while True:
                obs, _, terminated, truncated, info = self.eval_env.step(self._action(obs, explore=False))
                steps += 1
                if info["success"]:
                    wins += 1
                    break
                if terminated or truncated:
                    break
        return {"success_rate": wins / max(episodes, 1), "episodes": episodes, "policy_version": self.version, "mean_length": steps / max(episodes, 1)}

    def close(self) -> None:
        self.eval_env.close()


class SimWorker(Evaluator):
    """Steps the simulated arm in lock-step with the trainer and records into the `real` group."""

    def __init__(self, run_dir: str, env_cfg: SimArmConfig, loop: LoopConfig, intervention: InterventionConfig):
        from worldsample.sim import InterventionExpert, make_env

        super().__init__(run_dir, env_cfg, loop)
        self.env = make_env(env_cfg)
        self.store = EpisodeStore(run_dir, create=True)
        self.store.ensure_group("real", GroupSchema.from_spaces(self.env.observation_space, self.env.action_space))
        self.writer = self.store.writer("real")  # held for the worker's life: one writer per group
        self.expert = InterventionExpert(self.env, intervention, seed=loop.seed) if loop.interventions else None

    def episode(self, seed: int) -> dict:
        self._refresh_policy()
        obs, _ = self.env.reset(seed=seed)
        if self.expert:
            self.expert.reset()
        ep = self.writer.begin_episode()
        while True:
            action = self._action(obs, explore=True)
            intervened = False
            if self.expert:
                action, intervened = self.expert.filter(action)
            nobs, reward, terminated, truncated, info = self.env.step(action)
            ep.add_step({**obs, "action": action, "reward": np.float32(reward), "done": bool(terminated),
                         "intervention": intervened, "success": bool(info["success"])})
            obs = nobs
            if terminated or truncated:
                break
        rec = ep.commit(policy_version=self.version, domain="real", domain_info=self.env.unwrapped.domain_info(), extra={"seed": seed})
        return {"episode": rec.episode, "length": rec.length, "success": rec.success, "return": rec.episode_return,
                "interventions": rec.interventions, "policy_version": self.version}

    def close(self) -> None:
        self.writer.close()
        self.env.close()
        super().close()


class LearnerWorker:
    def __init__(self, run_dir: str, loop: LoopConfig, obs_dims: dict[str, int], low: np.ndarray, high: np.ndarray):
        import gymnasium as gym

        from worldsample.learner.sac import SACAgent

        _threads()
        self.run_dir, self.loop, self.obs_dims = Path(run_dir), loop, obs_dims
        self.store = EpisodeStore(run_dir)
        self.agent = SACAgent(loop.learner, sum(obs_dims.values()), gym.spaces.Box(np.asarray(low), np.asarray(high), dtype=np.float32))
        self.rng = np.random.default_rng(loop.seed)
        keys = [*obs_dims]
        self.reward_key = "success" if loop.reward == "success" else "reward"
        self.demo = GroupSampler(self.store.reader("demo", keys=keys), obs_keys=keys, reward_key=self.reward_key)
        real = self.store.reader("real", keys=keys)
        self.online = GroupSampler(real, obs_keys=keys, reward_key=self.reward_key)
        self.interventions = GroupSampler(real, obs_keys=keys, step_key="intervention", reward_key=self.reward_key)
        self.mixer = None
        self._synthetic_reader = None

    def _ensure_mixer(self) -> None:
        from worldsample.ppl.mixer import PPLMixer

        pos = neg = None
        if self.loop.ppl.mode != "off" and "synthetic" in self.store.groups:
            if self._synthetic_reader is None:
                self._synthetic_reader = self.store.reader("synthetic", keys=[*self.obs_dims])
            keys = [*self.obs_dims]
            pos = GroupSampler(self._synthetic_reader, obs_keys=keys, where=lambda r: r.success, reward_key=self.reward_key)
            neg = GroupSampler(self._synthetic_reader, obs_keys=keys, where=lambda r: not r.success, reward_key=self.reward_key)
        if self.mixer is None or (pos is not None and self.mixer.pos is None):
            state = self.mixer.state() if self.mixer else None
            self.mixer = PPLMixer(self.loop.ppl, self.demo, self.online, pos, neg, self.agent, self.agent.target_entropy,
                                  interventions=self.interventions)
            if state:
                self.mixer.load_state(state)

    def train(self, updates: int) -> dict:
        """`updates` gradient steps; returns the mean of the learner's and the mixer's metrics."""
        for s in (self.demo, self.online):
            s.refresh()
        self._ensure_mixer()
        if self._synthetic_reader is not None:
            self._synthetic_reader.refresh()
        if self.demo.num_transitions + self.online.num_transitions < self.loop.min_real_for_learning:
            return {}
        sums: dict[str, float] = {}
        for _ in range(updates):
            actor_learning = self.agent.updates >= self.loop.learner.critic_warmup_updates
            batch = self.mixer.sample(self.rng, self.loop.learner.batch_size, self.loop.learner.n_step, self.loop.learner.gamma,
                                      actor_learning=actor_learning)
            if self.loop.reward == "task":
                batch["reward"] = batch["reward"] * self.loop.reward_scale  # the store keeps the task's own reward
            batch["bc_mask"] = np.isin(batch["source"], ("demo", "intervention")).astype(np.float32)
            m = self.agent.update(batch)
            m.update(self.mixer.last)
            for k, v in m.items():
                if np.isfinite(v):
                    sums[k] = sums.get(k, 0.0) + v / updates
        sums["learner/updates"] = float(self.agent.updates)
        return sums

    def pretrain(self) -> dict:
        """Behaviour cloning of the actor on every demo transition (learner.bc_pretrain_steps)."""
        steps = self.loop.learner.bc_pretrain_steps
        self.demo.refresh()
        if not steps or not self.demo.num_transitions:
            return {}
        from worldsample.learner.sac import flatten_obs

        reader = self.demo.reader
        eps = [reader.episode(e) for e in range(reader.num_episodes)]
        obs = flatten_obs({f"obs/{k}": np.concatenate([ep[k] for ep in eps]) for k in self.obs_dims}, [*self.obs_dims])
        actions = np.concatenate([ep["action"] for ep in eps])
        losses = self.agent.bc_pretrain(obs, actions, steps)
        return {**{f"pretrain/{k}": v for k, v in losses.items()}, "pretrain/bc_steps": float(steps), "pretrain/transitions": float(len(actions))}

    def export(self, source: dict) -> int:
        from worldsample.learner.export import export_actor

        return export_actor(self.agent, self.run_dir, self.obs_dims, source={**source, "updates": self.agent.updates})

    def state(self) -> dict:
        return {"learner": self.agent.group.get_state(), "mixer": self.mixer.state() if self.mixer else None,
                "updates": self.agent.updates, "rng": self.rng.bit_generator.state}

    def load_state(self, st: dict) -> None:
        self.agent.group.set_state(st["learner"])
        self.agent.updates = int(st["updates"])
        self.rng.bit_generator.state = st["rng"]
        if st.get("mixer"):
            self._ensure_mixer()
            self.mixer.load_state(st["mixer"])


class WorldModelWorker:
    def __init__(self, run_dir: str, loop: LoopConfig):
        _threads()
        self.run_dir, self.loop = Path(run_dir), loop
        self.rounds = 0

    def train(self) -> dict:
        """One round: from scratch on the demos the first time, then continual on demo + real."""
        from worldsample.world_model import checkpoint
        from worldsample.world_model.modes import checkpoint_dir, fit_to_store, train_run

        store = EpisodeStore(self.run_dir)
        # an empty image_keys in the loop's config means a state-only model, cameras or not
        cfg = fit_to_store(self.loop.world_model, store, "demo", images=bool(self.loop.world_model.image_keys))
        mode = "loop" if checkpoint.latest_version(checkpoint_dir(self.run_dir)) is not None else "demo"
        _, path = train_run(self.run_dir, cfg, mode)
        self.rounds += 1
        return {"wm/version": float(checkpoint.latest_version(checkpoint_dir(self.run_dir))), "wm/rounds": float(self.rounds), "wm/mode_loop": float(mode == "loop")}


    def evaluate(self, horizons: list[int]) -> dict:
        """Fidelity of the latest model on held-out real episodes: PSNR per horizon with images,
        else the RMSE of the predicted state (each with copying the last observation as baseline)."""
        from worldsample.world_model import checkpoint
        from worldsample.world_model.data import WindowSource
        from worldsample.world_model.errors import NotEnoughDataError
        from worldsample.world_model.evaluate import evaluate, evaluate_vectors
        from worldsample.world_model.modes import checkpoint_dir
        from worldsample.world_model.train import cache_keys

        wm_dir = checkpoint_dir(self.run_dir)
        if checkpoint.latest_version(wm_dir) is None:
            return {}
        model, doc = checkpoint.load(wm_dir)
        store = EpisodeStore(self.run_dir)
        groups = [g for g in ("real", "demo") if g in store.groups]
        for g in groups:  # prefer the robot's own held-out episodes
            try:
                source = WindowSource(store, {g: 1.0}, cache_keys(model.cfg), model.cfg.train.holdout_every, split="heldout")
                fn = evaluate if model.cfg.image_keys else evaluate_vectors
                return {"version": doc["version"], "group": g, **fn(model, source, horizons)}
            except NotEnoughDataError:
                continue
        return {}


class SynthWorker:
    def __init__(self, run_dir: str, loop: LoopConfig, low: np.ndarray, high: np.ndarray):
        _threads()
        self.run_dir, self.loop = Path(run_dir), loop
        self.low, self.high = low, high
        self.version = None
        self.synth = None
        self.steps_written = 0

    def generate(self) -> dict:
        from worldsample.synth.synthesiser import Synthesiser
        from worldsample.world_model import Imaginer, checkpoint
        from worldsample.world_model.modes import checkpoint_dir

        wm_dir = checkpoint_dir(self.run_dir)
        latest = checkpoint.latest_version(wm_dir)
        if latest is None:
            return {}
        if latest != self.version:
            model, _ = checkpoint.load(wm_dir)
            self.synth = Synthesiser(EpisodeStore(self.run_dir), Imaginer(model), self.loop.synth, self.low, self.high)
            self.version = latest
        budget = self.loop.synth.ratio * self.synth.real_steps() - self.steps_written
        n = min(self.loop.synth_branches, int(budget // max(self.loop.synth.horizon, 1)))
        if n <= 0:
            return {"synth/rate_limited": 1.0}
        st = self.synth.generate(n, wm_version=self.version)
        self.steps_written += st.steps
        out = {"synth/branches": float(st.branches), "synth/written": float(st.written), "synth/steps": float(st.steps),
               "synth/successes": float(st.successes)}
        out.update({f"synth/dropped_{k}": float(v) for k, v in st.dropped.items()})
        return out

    def state(self) -> dict:
        return {"steps_written": self.steps_written}

    def load_state(self, st: dict) -> None:
        self.steps_written = int(st["steps_written"])
