"""An MLP critic on [observation, action] for RLlib's SAC RLModule: HIL-SERL's and RLPD's Q-network.

RLlib 2.60's SAC builds each Q-network as a multi-stream encoder: the policy's observation MLP,
a separate action MLP (no LayerNorm), and fusion layers of `fusionnet_hiddens` units ([256, 256]
by default, tanh) whatever `fcnet_hiddens` says; bench/learner.py counts its parameters. With
`learner.critic: mlp` each critic is instead one MLP of the learner's `hidden` sizes (LayerNorm
and ReLU as the actor's) on the concatenated observation and action, with a linear head: the
network the published SAC setups use, and the one the benchmark's plain torch baseline times.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from ray.rllib.algorithms.sac.sac_catalog import SACCatalog
from ray.rllib.algorithms.sac.torch.default_sac_torch_rl_module import DefaultSACTorchRLModule
from ray.rllib.core.columns import Columns
from ray.rllib.core.models.base import ENCODER_OUT
from ray.rllib.core.rl_module.rl_module import RLModule

from worldsample.learner.ensemble import EnsembleSACTorchRLModule


class MLPCriticSACCatalog(SACCatalog):
    def _build_qf_encoder_continuous(self, framework: str):
        dim = int(self.observation_space.shape[0]) + int(self.action_space.shape[0])
        self.qf_encoder_config = dataclasses.replace(self._encoder_config, input_dims=(dim,))
        return self.qf_encoder_config.build(framework=framework)


class _TrainModeOnce:
    """RLlib's TorchRLModule.forward_train calls `self.train()` on every update, a walk over every submodule
    (about 60 at [128, 128] with twin targets); here only when the module is not already in training mode.
    The networks hold no layer whose output depends on the mode (Linear, LayerNorm, ReLU)."""

    def forward_train(self, batch, **kwargs):
        if not self.training:
            self.train()
        return RLModule.forward_train(self, batch, **kwargs)


class _ConcatCritic:
    """Feeds [obs, action] to the critic's MLP encoder (RLlib's helper hands it the two apart). With
    `critic_obs_norm` ([mean, std, clip] in the model config, learner.obs_norm: critics) the critics see
    the observation standardised and clipped, the actor the raw one; the statistics are buffers, so they
    travel with the module's state (checkpoints, remote learners)."""

    def setup(self):
        super().setup()
        norm = self.model_config.get("critic_obs_norm")
        self._critic_clip = float(norm[2]) if norm else None
        if norm:
            self.register_buffer("critic_obs_mean", torch.tensor(norm[0], dtype=torch.float32))
            self.register_buffer("critic_obs_std", torch.tensor(norm[1], dtype=torch.float32))

    def _critic_input(self, batch: dict[str, Any]) -> torch.Tensor:
        obs = batch[Columns.OBS]
        if self._critic_clip is not None:
            obs = ((obs - self.critic_obs_mean) / self.critic_obs_std).clamp(-self._critic_clip, self._critic_clip)
        return torch.cat([obs, batch[Columns.ACTIONS]], dim=-1)

    def _qf_forward_train_helper(self, batch: dict[str, Any], encoder, head, squeeze: bool = True) -> torch.Tensor:
        x = self._critic_input(batch)
        out = head(encoder({Columns.OBS: x})[ENCODER_OUT])
        return out.squeeze(-1) if squeeze else out


class MLPCriticSACModule(_TrainModeOnce, _ConcatCritic, DefaultSACTorchRLModule):
    """RLlib's twin-Q SAC module with MLP critics."""


class BatchedMLP(torch.nn.Module):
    """k MLPs of one shape, evaluated together: one batched matmul per layer for all of them.

    Per member: Linear, LayerNorm (eps 1e-3, as RLlib's TorchMLP) and ReLU per hidden layer, then a
    linear output; initialised as torch.nn.Linear is. Weights are stacked: `weights.i` is
    (k, in, out), `biases.i` (k, 1, out), `norm_weights.i` / `norm_biases.i` (k, 1, out)."""

    def __init__(self, k: int, in_dim: int, hidden: list[int], layer_norm: bool, out_dim: int = 1):
        super().__init__()
        dims = [in_dim, *hidden, out_dim]
        self.weights = torch.nn.ParameterList()
        self.biases = torch.nn.ParameterList()
        for i, o in zip(dims[:-1], dims[1:]):
            bound = 1.0 / i**0.5  # torch.nn.Linear's default (kaiming uniform, a = sqrt(5)) and its bias
            self.weights.append(torch.nn.Parameter(torch.empty(k, i, o).uniform_(-bound, bound)))
            self.biases.append(torch.nn.Parameter(torch.empty(k, 1, o).uniform_(-bound, bound)))
        self.norm_weights = torch.nn.ParameterList([torch.nn.Parameter(torch.ones(k, 1, h)) for h in hidden]
                                                   if layer_norm else [])
        self.norm_biases = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(k, 1, h)) for h in hidden]
                                                  if layer_norm else [])

    def forward(self, x: torch.Tensor, members: list[int] | None = None) -> torch.Tensor:
        """x (B, in) -> (k', B, out) for the given members (all when None)."""
        def pick(p: torch.Tensor) -> torch.Tensor:
            return p if members is None else p[members]

        last = len(self.weights) - 1
        h = x
        for j, (w, b) in enumerate(zip(self.weights, self.biases)):
            w, b = pick(w), pick(b)
            h = torch.baddbmm(b, h.expand(len(w), *h.shape[-2:]), w)
            if j == last:
                break
            if len(self.norm_weights):
                h = torch.nn.functional.layer_norm(h, h.shape[-1:], eps=1e-3)
                h = torch.addcmul(pick(self.norm_biases[j]), h, pick(self.norm_weights[j]))
            h = torch.relu(h)
        return h


class MLPCriticEnsembleModule(_TrainModeOnce, _ConcatCritic, EnsembleSACTorchRLModule):
    """The critic ensemble (ensemble.py) with MLP critics: the twin is RLlib's two critic networks,
    critics 2..N-1 one BatchedMLP, so the ensemble costs a few batched matmuls, not N - 2 networks."""

    def _build_extra_critics(self, n: int) -> None:
        cfg = self.catalog.qf_encoder_config  # the twin's MLP encoder (MLPCriticSACCatalog), built just before
        if cfg.hidden_layer_activation != "relu":
            raise ValueError(f"the batched critic ensemble uses ReLU; the model asks for {cfg.hidden_layer_activation}")
        self.qf_extra = BatchedMLP(n, int(cfg.input_dims[0]), list(cfg.hidden_layer_dims),
                                   bool(cfg.hidden_layer_use_layernorm))

    def extra_critic_attrs(self) -> list[str]:
        return ["qf_extra"]

    def _extra_q(self, batch: dict, target: bool, members: list[int] | None = None,
                 squeeze: bool = True) -> torch.Tensor:
        net = self.target_qf_extra if target else self.qf_extra
        out = net(self._critic_input(batch), members)
        return out.squeeze(-1) if squeeze else out
