"""The torch actor the learner trains and exports: an MLP over vector observations with a
tanh-squashed deterministic mean action (the SAC actor's mean, without sampling)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from worldsample.policy.config import PolicyConfig

_ACT = {"relu": nn.functional.relu, "tanh": torch.tanh, "elu": nn.functional.elu, "silu": nn.functional.silu}


class MLPActor(nn.Module):
    def __init__(self, config: PolicyConfig):
        super().__init__()
        self.config = config
        sizes = [config.obs_dim, *config.hidden]
        self.trunk = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:], strict=True))
        if config.layer_norm:
            self.norm = nn.ModuleList(nn.LayerNorm(h, eps=config.layer_norm_eps) for h in config.hidden)
        else:
            self.norm = None
        self.mean = nn.Linear(sizes[-1], config.action_dim)
        self.log_std = nn.Linear(sizes[-1], config.action_dim) if config.stochastic else None
        if config.obs_normalization:
            self.register_buffer("obs_mean", torch.zeros(config.obs_dim))
            self.register_buffer("obs_std", torch.ones(config.obs_dim))
        self.register_buffer("_low", torch.tensor(config.action_low), persistent=False)
        self.register_buffer("_high", torch.tensor(config.action_high), persistent=False)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The trunk's output h for observations x (normalised first when the config says so)."""
        if self.config.obs_normalization:
            x = (x - self.obs_mean) / self.obs_std
            if self.config.obs_clip is not None:
                x = x.clamp(-self.config.obs_clip, self.config.obs_clip)
        act = _ACT[self.config.activation]
        for i, layer in enumerate(self.trunk):
            x = layer(x)
            if self.norm is not None:
                x = self.norm[i](x)
            x = act(x)
        return x

    def squash(self, u: torch.Tensor) -> torch.Tensor:
        """The action for pre-tanh values u: low + (tanh(u) + 1) / 2 * (high - low)."""
        return self._low + (torch.tanh(u) + 1.0) * 0.5 * (self._high - self._low)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.squash(self.mean(self.features(x)))

    def export_tensors(self) -> dict[str, np.ndarray]:
        """The registry's tensor layout (see config.py)."""
        return {k: v.detach().cpu().float().numpy().copy() for k, v in self.state_dict().items()}

    @classmethod
    def from_tensors(cls, config: PolicyConfig, tensors: dict[str, np.ndarray]) -> MLPActor:
        actor = cls(config)
        actor.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in tensors.items()})
        return actor
