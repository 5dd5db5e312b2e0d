"""The learn, export and pretrain steps' object: store samplers, the data mixer and the algorithm.

Each learn step refreshes the samplers (new commits), attaches the synthetic pools once they exist
(mixers that use them), draws `algorithm.updates_for(new real steps)` batches from the mixer and
hands them to the algorithm. Ray and torch load on construction (RLlib's SAC learner).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from worldsample.learner.algorithm import MeanStats, SACAlgorithm
from worldsample.loop.config import LATENT_KEY, LoopConfig
from worldsample.loop.relabel import relabel_goals
from worldsample.loop.shaping import make_potential, shape
from worldsample.ppl.mixer import make_mixer
from worldsample.store import EpisodeStore, GroupSampler

SYNTHETIC = "synthetic"
log = logging.getLogger(__name__)


def learner_spaces(store: EpisodeStore, loop: LoopConfig) -> tuple[dict[str, int], np.ndarray, np.ndarray]:
    """(observation sizes per learner key, action low, action high) from the demonstrations' schema."""
    schema = store.schema("demo")
    # the image profile's `latent` is no stored key: its size is the encoder's (loop.vision)
    derived = {LATENT_KEY: loop.vision.latent_dim} if loop.vision.enabled else {}
    obs_dims = {k: derived[k] if k in derived else int(np.prod(schema.keys[k].shape)) for k in loop.learner.obs_keys}
    return obs_dims, -np.ones(schema.action_dim, np.float32), np.ones(schema.action_dim, np.float32)


def won_alone(reader):
    """Whether an episode ended in success (the operator's label where there is one) without a human step."""
    def won(rec) -> bool:
        label = reader.labels.get(rec.episode)
        return (label.success if label is not None else rec.success) and rec.interventions == 0
    return won


def chunk_actions(actions: np.ndarray, lengths: np.ndarray, k: int) -> np.ndarray:
    """(N, A) actions of consecutive episodes of `lengths` -> (N, k * A): each step's action and the
    k - 1 after it in its episode, the episode's last action repeated past its end. k = 1: a copy."""
    if k == 1:
        return np.array(actions, copy=True)
    ends = np.repeat(np.cumsum(lengths), lengths)
    rows = np.minimum(np.arange(len(actions))[:, None] + np.arange(k), ends[:, None] - 1)
    return actions[rows].reshape(len(actions), -1)


class Learning:
    def __init__(
        self, run_dir: str | Path, loop: LoopConfig, obs_dims: dict[str, int], low: np.ndarray, high: np.ndarray
    ):
        import gymnasium as gym

        from worldsample.learner.sac import SACAgent

        self.run_dir, self.loop, self.obs_dims = Path(run_dir), loop, obs_dims
        self.store = EpisodeStore(run_dir)
        k = loop.learner.action_chunk  # the actor proposes k steps' actions at once
        space = gym.spaces.Box(np.tile(np.asarray(low), k), np.tile(np.asarray(high), k), dtype=np.float32)
        self.rng = np.random.default_rng(loop.seed)
        self.keys = [*obs_dims]
        self.encoder, self.success_classifier, self._vision_metrics = None, None, {}
        if loop.vision.enabled:  # the image profile: `latent` from the run's frozen encoder (loop/vision.py)
            from worldsample.loop.vision import ensure_encoder, ensure_success_classifier

            self.encoder, self._vision_metrics = ensure_encoder(self.run_dir, loop)
            if loop.reward == "classifier":  # the reward: its decision on each step's [latent, proprio]
                self.success_classifier, m = ensure_success_classifier(self.run_dir, loop, self.encoder)
                self._vision_metrics = {**self._vision_metrics, **m}
        demo = self._reader("demo")
        stats = self._obs_stats(demo) if loop.learner.obs_norm != "off" else None
        self.agent = SACAgent(loop.learner, sum(obs_dims.values()), space, obs_stats=stats)
        self.algorithm = SACAlgorithm(self.agent, loop.reward, loop.reward_scale)
        self.demo = self._sampler(demo)
        real = self._reader("real")
        penalty = loop.intervention_penalty  # only the robot's own steps can hand over to a human
        self.online = self._sampler(real, intervention_penalty=penalty)
        self.interventions = self._sampler(real, step_key="intervention", intervention_penalty=penalty)
        # loop.imitate_successes: the episodes the policy won with no human step, imitated like demos
        self.successes = self._sampler(real, where=won_alone(real)) if loop.imitate_successes else None
        self.mixer = make_mixer(loop.ppl, self.demo, self.online, self.interventions, critic=self.agent,
                                entropy_min=self.agent.target_entropy, action_dim=int(np.prod(space.shape)),
                                successes=self.successes)
        self._synthetic_reader = None
        self._success_trained_at = 0  # real episodes the success classifier was last trained with
        self._success_retrains = 0
        self.potential = make_potential(loop, self.keys)  # shapes every learner batch (loop.shaping)
        self._potential_fitted_at = None  # shaping=progress: real episodes when it was last fitted

    def _reader(self, group: str):
        if self.encoder is None:
            return self.store.reader(group, keys=self.keys)
        from worldsample.loop.vision import LatentReader

        return LatentReader(self.store, group, self.encoder, self.keys, classifier=self.success_classifier)

    def _sampler(self, reader, **kw) -> GroupSampler:
        return GroupSampler(reader, obs_keys=self.keys, reward_key=self.algorithm.reward_key,
                            action_chunk=self.loop.learner.action_chunk,
                            returns_to_go=self.loop.learner.cql_calibrated, **kw)

    def _attach_synthetic(self) -> None:
        """The success and failure pools of the synthetic group, once it exists and the mixer uses it."""
        if not self.mixer.uses_synthetic or self._synthetic_reader is not None or SYNTHETIC not in self.store.groups:
            return
        self._synthetic_reader = self._reader(SYNTHETIC)
        self.mixer.attach_synthetic(self._sampler(self._synthetic_reader, where=lambda r: r.success),
                                    self._sampler(self._synthetic_reader, where=lambda r: not r.success))

    def learn(self, new_real_steps: int) -> dict[str, float]:
        """`algorithm.updates_for(new_real_steps)` updates; the mean of the learner's and the mixer's metrics."""
        for s in (self.demo, self.online):
            s.refresh()
        self._attach_synthetic()
        if self._synthetic_reader is not None:
            self._synthetic_reader.refresh()
        retrained = {**self._retrain_success(), **self._fit_progress()}
        if self.demo.num_transitions + self.online.num_transitions < self.loop.min_real_for_learning:
            return retrained
        mixed = MeanStats()
        cfg = self.loop.learner

        def batches(n: int):
            for _ in range(n):
                batch = self.mixer.sample(self.rng, cfg.batch_size, cfg.backup_steps, cfg.gamma,
                                          actor_learning=self.algorithm.actor_learning)
                row_stats = self.mixer.last
                if self.loop.relabel_goals:  # before the shaping, which reads the goal
                    batch, relabelled = relabel_goals(batch, self.online.reader.cache, self.keys, self.rng,
                                                      self.loop.relabel_goals, self.loop.relabel_radius,
                                                      cfg.backup_steps, cfg.gamma,
                                                      moved_only=self.loop.relabel_moved_only)
                    row_stats = {**row_stats, **relabelled}
                if self.potential is not None:
                    batch = shape(batch, self.potential, cfg.gamma)
                mixed.add(row_stats)
                yield batch

        stats = {**self.algorithm.update(batches(self.algorithm.updates_for(new_real_steps))), **mixed.mean()}
        stats["learner/updates"] = float(self.algorithm.updates)
        return {**stats, **retrained}

    def _fit_progress(self) -> dict[str, float]:
        """loop.shaping=progress: fit the potential on the successful demo and real episodes, first at the
        first learn step, then once `shaping_every_episodes` new real episodes came in. The fit is not
        checkpointed: a resumed run fits again, on everything committed, at its first learn step."""
        if self.loop.shaping != "progress":
            return {}
        episodes = self.online.reader.num_episodes
        last = self._potential_fitted_at
        if last is not None and episodes - last < self.loop.shaping_every_episodes:
            return {}
        self._potential_fitted_at = episodes
        return self.potential.fit([self.demo.reader.cache, self.online.reader.cache])

    def _retrain_success(self) -> dict[str, float]:
        """loop.vision.success_retrain_every_episodes: once that many real episodes came in since it was
        last trained, the success classifier learns again from demo + real (the robot's success and the
        operator's marks, as the readers apply them), and every cached step's reward is derived from it."""
        every = self.loop.vision.success_retrain_every_episodes
        if self.success_classifier is None or not every:
            return {}
        episodes = self.online.reader.num_episodes
        if episodes - self._success_trained_at < every:
            return {}
        from worldsample.loop.vision import train_success, use_classifier

        labelled = ("real",) if self.loop.vision.success_labelled_only else ()
        clf, metrics = train_success(self.run_dir, self.loop, self.encoder, ["demo", "real"], labelled)
        readers = [self.demo.reader, self.online.reader]  # the interventions sampler shares the real reader
        use_classifier(readers + ([self._synthetic_reader] if self._synthetic_reader is not None else []), clf)
        self.success_classifier, self._success_trained_at = clf, episodes
        self._success_retrains += 1
        return {**metrics, "vision/success_retrains": float(self._success_retrains)}

    def _demo_steps(self, reader) -> tuple[np.ndarray, np.ndarray]:
        """(flattened observations, actions) of every committed demo step; with learner.action_chunk,
        each step's action is the chunk played from it (`chunk_actions`)."""
        from worldsample.learner.sac import flatten_obs

        k = self.loop.learner.action_chunk
        if self.encoder is not None:  # `latent` exists only in the reader's cache (every committed demo step)
            c = reader.cache
            actions = chunk_actions(c.view("action"), c.ep_len, k)
            return flatten_obs({f"obs/{k_}": c.view(k_) for k_ in self.keys}, self.keys), actions
        eps = [reader.episode(e) for e in range(reader.num_episodes)]
        obs = flatten_obs({f"obs/{k_}": np.concatenate([ep[k_] for ep in eps]) for k_ in self.keys}, self.keys)
        actions = np.concatenate([ep["action"] for ep in eps])
        return obs, chunk_actions(actions, np.array([len(ep["action"]) for ep in eps]), k)

    def _obs_stats(self, reader) -> tuple[np.ndarray, np.ndarray]:
        """learner.obs_norm: the demonstrations' per-dimension mean and std, fixed for the run."""
        reader.refresh()
        if not reader.num_episodes:
            raise ValueError("learner.obs_norm needs demonstrations to take the observation statistics from")
        obs, _ = self._demo_steps(reader)
        return obs.mean(0), obs.std(0)

    def pretrain(self) -> dict[str, float]:
        """The algorithm's warm start on every demo transition (behaviour cloning for SAC)."""
        self.demo.refresh()
        if not self.loop.learner.bc_pretrain_steps or not self.demo.num_transitions:
            return {}
        obs, actions = self._demo_steps(self.demo.reader)
        losses = self.algorithm.pretrain(obs, actions)
        return {
            **{f"pretrain/{k}": v for k, v in losses.items()},
            "pretrain/bc_steps": float(self.loop.learner.bc_pretrain_steps),
            "pretrain/transitions": float(len(actions)),
            **self._vision_metrics,  # the encoder's own pretraining, when this run did it
        }

    def export(self, source: dict) -> int:
        """Publish the actor to the policy registry; its version."""
        from worldsample.learner.export import export_actor

        source = {**source, "updates": self.agent.updates}
        if self.encoder is None:
            return export_actor(self.agent, self.run_dir, self.obs_dims, source=source)
        # the image profile: policy.onnx (frozen encoder + actor) for onnxruntime, beside the usual files
        from worldsample.learner.export import agent_policy
        from worldsample.policy.onnx_export import publish_vision_policy

        cfg, tensors = agent_policy(self.agent, self.obs_dims, source)
        return publish_vision_policy(self.run_dir, self.encoder, cfg, tensors, latent_key=LATENT_KEY)

    def state(self) -> dict:
        return {"learner": self.agent.group.get_state(), "mixer": self.mixer.state(),
                "updates": self.agent.updates, "rng": self.rng.bit_generator.state,
                "success_trained_at": self._success_trained_at, "success_retrains": self._success_retrains,
                "obs_stats": None if self.agent.obs_mean is None else [self.agent.obs_mean, self.agent.obs_std],
                "anchor": self.agent.anchor_state(), "actor_ema": self.agent.ema_state()}

    def load_state(self, st: dict) -> None:
        self.agent.group.set_state(st["learner"])
        self.agent.updates = int(st["updates"])
        self.rng.bit_generator.state = st["rng"]
        self._success_trained_at = int(st.get("success_trained_at", 0))
        self._success_retrains = int(st.get("success_retrains", 0))
        if st.get("obs_stats") is not None:  # obs_norm all: the run's own statistics, even if demos came since
            self.agent.set_obs_stats(*(np.asarray(x, np.float32) for x in st["obs_stats"]))
        if st.get("mixer"):
            self.mixer.load_state(st["mixer"])
        self.agent.load_ema(st.get("actor_ema") or {})  # learner.actor_ema: the average the robot ran
        if st.get("anchor"):  # learner.anchor_weight: the behaviour-cloned copy taken before the checkpoint
            self.agent.load_anchor(st["anchor"])
        elif self.loop.learner.anchor_weight:
            log.warning("learner.anchor_weight is set but the checkpoint holds no behaviour-cloned copy (the run "
                        "started without it): the actor as restored is the anchor from here on")
            self.agent.take_anchor()
