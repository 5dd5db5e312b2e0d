"""Inference of an exported actor with numpy only: the robot PC needs neither torch nor Ray.
Must compute exactly what `actor.MLPActor` computes (tests/bridge/test_policy.py checks)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from worldsample.policy.config import PolicyConfig
from worldsample.policy.errors import PolicyError

_ACT = {
    "relu": lambda x: np.maximum(x, 0.0),
    "tanh": np.tanh,
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
}


class NumpyActor:
    def __init__(self, config: PolicyConfig, tensors: Mapping[str, np.ndarray]):
        self.config = config
        self.version = config.version
        n = len(config.hidden)
        self._layers = [(tensors[f"trunk.{i}.weight"], tensors[f"trunk.{i}.bias"]) for i in range(n)]
        if config.layer_norm:
            self._norms = [(tensors[f"norm.{i}.weight"], tensors[f"norm.{i}.bias"]) for i in range(n)]
        else:
            self._norms = None
        self._mean = (tensors["mean.weight"], tensors["mean.bias"])
        self._log_std = (tensors["log_std.weight"], tensors["log_std.bias"]) if config.stochastic else None
        self._norm = (tensors["obs_mean"], tensors["obs_std"]) if config.obs_normalization else None
        self._act = _ACT[config.activation]
        self._low = np.asarray(config.action_low, np.float32)
        self._high = np.asarray(config.action_high, np.float32)

    def check_obs(self, specs: Mapping[str, tuple[int, ...]]) -> None:
        """Raise PolicyError unless every input key exists in `specs` with the right size."""
        for o in self.config.obs:
            shape = specs.get(o.key)
            if shape is None or int(np.prod(shape)) != o.dim:
                raise PolicyError(f"policy v{self.version} wants {o.key} of size {o.dim}; the robot has {shape}")

    def _features(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        x = np.concatenate([np.asarray(obs[o.key], np.float32).reshape(-1) for o in self.config.obs])
        if self._norm is not None:
            x = (x - self._norm[0]) / self._norm[1]
            if self.config.obs_clip is not None:
                x = np.clip(x, -self.config.obs_clip, self.config.obs_clip)
        for i, (w, b) in enumerate(self._layers):
            x = w @ x + b
            if self._norms is not None:
                g, beta = self._norms[i]
                x = (x - x.mean()) / np.sqrt(x.var() + self.config.layer_norm_eps) * g + beta
            x = self._act(x)
        return x

    def distribution(self, obs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(mean, log-std) of the Gaussian before the tanh squash, log-std clipped as sampling clips it."""
        if self._log_std is None:
            raise PolicyError(f"policy v{self.version} is deterministic; it has no spread and cannot explore")
        x = self._features(obs)
        return self._mean[0] @ x + self._mean[1], np.clip(self._log_std[0] @ x + self._log_std[1], -5.0, 2.0)

    def act(
        self, obs: Mapping[str, np.ndarray], explore: bool = False, rng: np.random.Generator | None = None,
        noise_scale: float = 1.0,
    ) -> np.ndarray:
        """The deterministic action, or with `explore` a sample of a stochastic policy, its spread before the
        squash times `noise_scale` (1: the policy's own)."""
        if explore:
            mean, log_std = self.distribution(obs)
            noise = (rng or np.random.default_rng()).standard_normal(mean.shape)
            u = mean + noise_scale * np.exp(log_std) * noise
        else:
            x = self._features(obs)
            u = self._mean[0] @ x + self._mean[1]
        squashed = np.tanh(u)
        return (self._low + (squashed + 1.0) * 0.5 * (self._high - self._low)).astype(np.float32)
