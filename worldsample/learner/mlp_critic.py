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

from worldsample.learner.ensemble import EnsembleSACTorchRLModule


class MLPCriticSACCatalog(SACCatalog):
    def _build_qf_encoder_continuous(self, framework: str):
        dim = int(self.observation_space.shape[0]) + int(self.action_space.shape[0])
        self.qf_encoder_config = dataclasses.replace(self._encoder_config, input_dims=(dim,))
        return self.qf_encoder_config.build(framework=framework)


class _ConcatCritic:
    """Feeds [obs, action] to the critic's MLP encoder (RLlib's helper hands it the two apart)."""

    def _qf_forward_train_helper(self, batch: dict[str, Any], encoder, head, squeeze: bool = True) -> torch.Tensor:
        x = torch.cat([batch[Columns.OBS], batch[Columns.ACTIONS]], dim=-1)
        out = head(encoder({Columns.OBS: x})[ENCODER_OUT])
        return out.squeeze(-1) if squeeze else out


class MLPCriticSACModule(_ConcatCritic, DefaultSACTorchRLModule):
    """RLlib's twin-Q SAC module with MLP critics."""


class MLPCriticEnsembleModule(_ConcatCritic, EnsembleSACTorchRLModule):
    """The critic ensemble (ensemble.py) with MLP critics."""
