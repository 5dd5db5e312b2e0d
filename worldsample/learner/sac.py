"""SAC through RLlib's LearnerGroup, with batches composed outside RLlib.

RLlib's SAC training step samples its own env runners synchronously; a real robot cannot wait for
that, so we build only the LearnerGroup and call `update()` with batches from the PPL mixer. The
continuous SAC critic loss already multiplies each sample's Huber TD loss by the `weights` column,
which is where PPL's per-sample critic weights go. `PPLSACLearner` adds what the mixer needs
from the current networks: Q-values and the actor's entropy on given states.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.algorithms.sac import SACConfig
from ray.rllib.algorithms.sac.torch.sac_torch_learner import SACTorchLearner
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

from worldsample.learner.config import LearnerConfig
from worldsample.store.sampler import Batch

MODULE = "default_policy"


class PPLSACLearner(SACTorchLearner):
    """SAC learner with read-only probes for Policy-Paced Learning."""

    @torch.no_grad()
    def ppl_q_values(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        module = self.module[MODULE]
        batch = {"obs": torch.as_tensor(obs, device=self._device), "actions": torch.as_tensor(actions, device=self._device)}
        return module.compute_q_values(batch).cpu().numpy()

    @torch.no_grad()
    def ppl_entropy(self, obs: np.ndarray, samples: int = 4) -> float:
        """-E[log pi(a|s)] over the given states, by sampling the squashed Gaussian."""
        module = self.module[MODULE]
        out = module.forward_inference({"obs": torch.as_tensor(obs, device=self._device)})
        dist = module.get_train_action_dist_cls().from_logits(out["action_dist_inputs"])
        logp = torch.stack([dist.logp(dist.sample()) for _ in range(samples)])
        return float(-logp.mean())

    def actor_tensors(self) -> dict[str, np.ndarray]:
        """The actor's weights (pi encoder MLP + pi head) as numpy arrays, named as in RLlib."""
        sd = self.module[MODULE].state_dict()
        return {k: v.detach().cpu().float().numpy().copy() for k, v in sd.items() if k.startswith(("pi_encoder.", "pi.net."))}

    @torch.no_grad()
    def deterministic_actions(self, obs: np.ndarray) -> np.ndarray:
        module = self.module[MODULE]
        out = module.forward_inference({"obs": torch.as_tensor(obs, device=self._device)})
        mean = out["action_dist_inputs"].chunk(2, dim=-1)[0]
        # the squashed Gaussian's mode; RLlib's to_deterministic() would return it unsquashed
        low = torch.as_tensor(module.action_space.low, device=self._device)
        high = torch.as_tensor(module.action_space.high, device=self._device)
        return (low + (torch.tanh(mean) + 1.0) * 0.5 * (high - low)).cpu().numpy()


def flatten_obs(batch: Batch, keys: list[str], prefix: str = "obs/") -> np.ndarray:
    return np.concatenate([batch[f"{prefix}{k}"].reshape(len(batch[f"{prefix}{k}"]), -1) for k in keys], axis=1).astype(np.float32)


class SACAgent:
    """One SAC learner (local, or a group of remote Ray learners) behind a small numpy API."""

    def __init__(self, cfg: LearnerConfig, obs_dim: int, action_space: gym.spaces.Box):
        self.cfg = cfg
        self.obs_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        self.action_space = action_space
        self.target_entropy = cfg.target_entropy if cfg.target_entropy is not None else -float(np.prod(action_space.shape)) / 2
        torch.manual_seed(cfg.seed)
        algo = (
            SACConfig()
            .api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)
            .environment(observation_space=self.obs_space, action_space=action_space)
            .training(
                gamma=cfg.gamma,
                actor_lr=cfg.lr,
                critic_lr=cfg.lr,
                alpha_lr=cfg.lr,
                tau=cfg.tau,
                initial_alpha=cfg.initial_alpha,
                target_entropy=self.target_entropy,
                twin_q=True,
                train_batch_size_per_learner=cfg.batch_size,
            )
            .rl_module(
                model_config=DefaultModelConfig(
                    fcnet_hiddens=cfg.hidden, fcnet_activation="relu", fcnet_use_layernorm=cfg.layer_norm, head_fcnet_hiddens=[]
                )
            )
            .learners(num_learners=cfg.num_learners, learner_class=PPLSACLearner)
            .debugging(seed=cfg.seed)
        )
        self.group = algo.build_learner_group()
        self.updates = 0

    def _on_learner(self, fn, **kwargs):
        return self.group.foreach_learner(fn, **kwargs)[0].get() if self.cfg.num_learners else fn(self.group._learner, **kwargs)

    def update(self, batch: Batch) -> dict[str, float]:
        """One gradient step on a mixer batch (keys obs/<k>, next_obs/<k>, action, reward, done,
        n_step, weights). Returns the learner's scalar metrics."""
        n = len(batch["action"])
        sb = SampleBatch(
            {
                "obs": flatten_obs(batch, self.cfg.obs_keys),
                "new_obs": flatten_obs(batch, self.cfg.obs_keys, "next_obs/"),
                "actions": batch["action"].astype(np.float32),
                "rewards": batch["reward"].astype(np.float32),
                "terminateds": batch["done"].astype(bool),
                "truncateds": np.zeros(n, bool),
                "n_step": batch["n_step"].astype(np.int64),
                "weights": batch.get("weights", np.ones(n, np.float32)).astype(np.float32),
            }
        )
        results = self.group.update(batch=MultiAgentBatch({MODULE: sb}, env_steps=n))
        self.updates += 1
        return {k: _scalar(v) for k, v in results[0][MODULE].items() if _scalar(v) is not None}

    def q_values(self, batch: Batch) -> np.ndarray:
        obs = flatten_obs(batch, self.cfg.obs_keys)
        return self._on_learner(lambda learner, o, a: learner.ppl_q_values(o, a), o=obs, a=batch["action"].astype(np.float32))

    def entropy(self, batch: Batch) -> float:
        obs = flatten_obs(batch, self.cfg.obs_keys)
        return self._on_learner(lambda learner, o: learner.ppl_entropy(o), o=obs)

    def actor_tensors(self) -> dict[str, np.ndarray]:
        return self._on_learner(lambda learner: learner.actor_tensors())

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Deterministic action for one observation dict (evaluation)."""
        x = np.concatenate([np.asarray(obs[k], np.float32).reshape(-1) for k in self.cfg.obs_keys])[None]
        return self._on_learner(lambda learner, o: learner.deterministic_actions(o), o=x)[0]


def _scalar(v) -> float | None:
    try:
        x = v.peek() if hasattr(v, "peek") else v
        x = float(x.item() if hasattr(x, "item") else x)
    except (TypeError, ValueError, RuntimeError):
        return None
    return x
