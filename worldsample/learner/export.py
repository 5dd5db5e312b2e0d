"""Export the SAC actor into the run's policy registry, in the format the bridge loads without
torch or Ray (worldsample/policy/config.py): RLlib's pi encoder MLP (Linear, LayerNorm, ReLU per
layer) becomes `trunk`/`norm`, its head's two halves become `mean` and `log_std`."""

from __future__ import annotations

from typing import Any

import numpy as np

from worldsample.policy import ObsInput, PolicyConfig, PolicyRegistry


def actor_policy(
    tensors: dict[str, np.ndarray],
    obs_dims: dict[str, int],
    hidden: list[int],
    layer_norm: bool,
    low: np.ndarray,
    high: np.ndarray,
    source: dict[str, Any] | None = None,
    obs_norm: tuple[np.ndarray, np.ndarray, float] | None = None,
    action_chunk: int = 1,
) -> tuple[PolicyConfig, dict[str, np.ndarray]]:
    """`obs_norm`: (mean, std, clip) the learner normalised observations with (learner.obs_norm), or None;
    `action_chunk`: steps' actions per output (low and high cover the whole chunk)."""
    stride = 3 if layer_norm else 2  # Linear[, LayerNorm], ReLU
    out: dict[str, np.ndarray] = {}
    for i in range(len(hidden)):
        base = f"pi_encoder.net.mlp.{i * stride}"
        out[f"trunk.{i}.weight"], out[f"trunk.{i}.bias"] = tensors[f"{base}.weight"], tensors[f"{base}.bias"]
        if layer_norm:
            norm = f"pi_encoder.net.mlp.{i * stride + 1}"
            out[f"norm.{i}.weight"], out[f"norm.{i}.bias"] = tensors[f"{norm}.weight"], tensors[f"{norm}.bias"]
    w, b = tensors["pi.net.mlp.0.weight"], tensors["pi.net.mlp.0.bias"]
    a = len(low)
    out["mean.weight"], out["mean.bias"] = w[:a], b[:a]
    out["log_std.weight"], out["log_std.bias"] = w[a:], b[a:]
    if obs_norm is not None:
        out["obs_mean"], out["obs_std"] = obs_norm[0], obs_norm[1]
    cfg = PolicyConfig(
        obs=[ObsInput(key=k, dim=d) for k, d in obs_dims.items()],
        action_dim=a,
        hidden=list(hidden),
        activation="relu",
        action_low=[float(x) for x in low],
        action_high=[float(x) for x in high],
        layer_norm=layer_norm,
        layer_norm_eps=1e-3,  # RLlib's TorchMLP LayerNorm
        stochastic=True,
        obs_normalization=obs_norm is not None,
        action_chunk=action_chunk,
        obs_clip=float(obs_norm[2]) if obs_norm is not None else None,
        source=source or {},
    )
    return cfg, {k: np.ascontiguousarray(v, np.float32) for k, v in out.items()}


def agent_policy(agent, obs_dims: dict[str, int], source: dict[str, Any] | None = None):
    """(config, tensors) of a SACAgent's current actor, with its observation statistics when it has them."""
    norm = (agent.obs_mean, agent.obs_std, agent.cfg.obs_clip) if agent.obs_mean is not None else None
    return actor_policy(agent.actor_tensors(), obs_dims, agent.cfg.hidden, agent.cfg.layer_norm,
                        agent.action_space.low, agent.action_space.high, source, obs_norm=norm,
                        action_chunk=agent.cfg.action_chunk)


def export_actor(agent, run_dir, obs_dims: dict[str, int], source: dict[str, Any] | None = None) -> int:
    """Publish the agent's current actor as the next policy version; returns the version."""
    cfg, tensors = agent_policy(agent, obs_dims, source)
    return PolicyRegistry(run_dir).publish(cfg, tensors)
