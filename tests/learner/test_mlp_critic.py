"""`learner.critic: mlp`: each critic is one MLP of the learner's sizes on [obs, action]
(HIL-SERL/RLPD), inside RLlib's SAC module and learner, twin and ensemble."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from worldsample.learner import LearnerConfig, sac

B, OBS, ACT = 32, 3, 2


def agent(critics: int, critic: str = "mlp") -> sac.SACAgent:
    torch.manual_seed(0)
    cfg = LearnerConfig(obs_keys=["proprio"], hidden=[32, 32], batch_size=B, critic_warmup_updates=0,
                        critics=critics, critic=critic)
    return sac.SACAgent(cfg, OBS, gym.spaces.Box(-1, 1, (ACT,), np.float32))


def batch(syn_reward: float, syn_weight: float) -> dict:
    rng = np.random.default_rng(0)
    reward = np.ones(B, np.float32)
    reward[B // 2:] = syn_reward
    weights = np.ones(B, np.float32)
    weights[B // 2:] = syn_weight
    return {"obs/proprio": rng.normal(size=(B, OBS)).astype(np.float32),
            "next_obs/proprio": rng.normal(size=(B, OBS)).astype(np.float32),
            "action": rng.uniform(-1, 1, (B, ACT)).astype(np.float32), "reward": reward,
            "done": np.zeros(B, bool), "n_step": np.ones(B, np.int64), "weights": weights}


def critic_layers(a: sac.SACAgent) -> list[torch.nn.Linear]:
    m = a.group._learner.module[sac.MODULE]
    return [x for x in [*m.qf_encoder.modules(), *m.qf.modules()] if isinstance(x, torch.nn.Linear)]


@pytest.mark.parametrize("critics", [2, 3])
def test_the_critic_is_an_mlp_on_observation_and_action(critics):
    layers = critic_layers(agent(critics))
    assert [(x.in_features, x.out_features) for x in layers] == [(OBS + ACT, 32), (32, 32), (32, 1)]
    # RLlib's own critic is the multi-stream one: more layers, fusion widths of 256
    assert len(critic_layers(agent(critics, "rllib"))) > len(layers)


def test_q_depends_on_the_action():
    a = agent(2)
    b = batch(0.0, 1.0)
    q1 = a.q_values(b)
    b2 = {**b, "action": -b["action"]}
    assert np.abs(q1 - a.q_values(b2)).max() > 1e-4


@pytest.mark.parametrize("critics", [2, 3])
def test_zero_weight_rows_do_not_move_the_critic_and_weighted_ones_do(critics):
    def q_after(b):
        a = agent(critics)
        for _ in range(3):
            torch.manual_seed(1)
            assert np.isfinite(a.update(b)["qf_loss"])
        return a.q_values(batch(0.0, 1.0))

    np.testing.assert_allclose(q_after(batch(50.0, 0.0)), q_after(batch(-50.0, 0.0)), rtol=0, atol=1e-6)
    assert (q_after(batch(50.0, 1.0)) - q_after(batch(-50.0, 1.0))).mean() > 1e-3
