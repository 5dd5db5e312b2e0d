"""RLlib's SAC learner fed with externally composed, weighted batches."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from worldsample.learner import LearnerConfig

sac = pytest.importorskip("worldsample.learner.sac")

B = 32


def agent():
    torch.manual_seed(0)
    cfg = LearnerConfig(obs_keys=["proprio"], hidden=[32, 32], batch_size=B, critic_warmup_updates=0)
    return sac.SACAgent(cfg, 3, gym.spaces.Box(-1, 1, (2,), np.float32))


def batch(syn_reward: float, syn_weight: float):
    rng = np.random.default_rng(0)
    reward = np.ones(B, np.float32)
    reward[B // 2 :] = syn_reward  # the second half plays the synthetic samples
    weights = np.ones(B, np.float32)
    weights[B // 2 :] = syn_weight
    return {
        "obs/proprio": rng.normal(size=(B, 3)).astype(np.float32),
        "next_obs/proprio": rng.normal(size=(B, 3)).astype(np.float32),
        "action": rng.uniform(-1, 1, (B, 2)).astype(np.float32),
        "reward": reward,
        "done": np.zeros(B, bool),
        "n_step": np.ones(B, np.int64),
        "weights": weights,
    }


def q_after_update(b, steps=3):
    a = agent()
    for _ in range(steps):
        torch.manual_seed(1)
        metrics = a.update(b)
    assert np.isfinite(metrics["qf_loss"])
    return a.q_values(batch(0.0, 1.0))


def test_zero_weight_samples_do_not_move_the_critic_and_weighted_ones_do():
    q_plus = q_after_update(batch(+50.0, 0.0))
    q_minus = q_after_update(batch(-50.0, 0.0))
    np.testing.assert_allclose(q_plus, q_minus, rtol=0, atol=1e-6)
    q_plus_w = q_after_update(batch(+50.0, 1.0))
    q_minus_w = q_after_update(batch(-50.0, 1.0))
    assert (q_plus_w - q_minus_w).mean() > 1e-3


def test_probes_for_ppl():
    a = agent()
    b = batch(0.0, 1.0)
    q = a.q_values(b)
    assert q.shape == (B,) and np.isfinite(q).all()
    h = a.entropy(b)
    assert np.isfinite(h)
    act = a.act({"proprio": np.zeros(3)})
    assert act.shape == (2,) and (np.abs(act) <= 1).all()


def test_exported_actor_matches_rllib_and_loads_without_torch(tmp_path):
    from worldsample.learner.export import export_actor
    from worldsample.policy import load_actor

    a = agent()
    for _ in range(2):
        a.update(batch(0.0, 1.0))
    v = export_actor(a, tmp_path, {"proprio": 3}, source={"updates": a.updates})
    actor = load_actor(tmp_path)
    assert actor.version == v and actor.config.stochastic and actor.config.layer_norm
    rng = np.random.default_rng(0)
    for _ in range(5):
        obs = {"proprio": rng.normal(size=3).astype(np.float32)}
        np.testing.assert_allclose(actor.act(obs), a.act(obs), atol=1e-5)
    samples = np.stack([actor.act(obs, explore=True, rng=rng) for _ in range(200)])
    assert samples.std(axis=0).min() > 1e-3 and (np.abs(samples) <= 1).all()


def _actor_gap(a, b):
    """Mean squared distance of the deterministic actions from the batch's actions."""
    obs = b["obs/proprio"]
    pred = np.stack([a.act({"proprio": o}) for o in obs])
    return float(((pred - b["action"]) ** 2).sum(-1).mean())


def test_critic_warmup_keeps_actor_and_temperature_then_releases_them():
    torch.manual_seed(0)
    a = sac.SACAgent(LearnerConfig(obs_keys=["proprio"], hidden=[32, 32], batch_size=B, critic_warmup_updates=3), 3,
                     gym.spaces.Box(-1, 1, (2,), np.float32))
    b = batch(1.0, 1.0)
    before, q0 = a.actor_tensors(), a.q_values(b)
    for _ in range(3):
        m = a.update(b)
    after = a.actor_tensors()
    assert all(np.array_equal(before[k], after[k]) for k in before)
    assert m["alpha_value"] == pytest.approx(0.01) and not np.allclose(a.q_values(b), q0)
    a.update(b)
    moved = a.actor_tensors()
    assert any(not np.array_equal(after[k], moved[k]) for k in after)


def _gap_after_updates(weight: float) -> tuple[float, float, dict]:
    torch.manual_seed(0)
    cfg = LearnerConfig(obs_keys=["proprio"], hidden=[32, 32], batch_size=B, bc_weight=weight, critic_warmup_updates=0)
    a = sac.SACAgent(cfg, 3, gym.spaces.Box(-1, 1, (2,), np.float32))
    b = {**batch(1.0, 1.0), "bc_mask": np.ones(B, np.float32)}
    gap0 = _actor_gap(a, b)
    for _ in range(60):
        m = a.update(b)
    return gap0, _actor_gap(a, b), m


def test_bc_term_pulls_the_actor_towards_demo_actions():
    gap0, plain, m0 = _gap_after_updates(0.0)
    gap0_bc, with_bc, m = _gap_after_updates(5.0)
    assert gap0 == pytest.approx(gap0_bc)  # same seed, same start
    assert "bc_mse" not in m0 and "bc_mse" in m
    assert with_bc < 0.7 * gap0 and with_bc < 0.7 * plain


def test_bc_pretraining_fits_the_demo_actions():
    a = agent()
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(64, 3)).astype(np.float32)
    actions = np.tanh(obs[:, :2] * 2).astype(np.float32)  # a smooth expert
    b = {"obs/proprio": obs, "action": actions}
    gap0 = _actor_gap(a, b)
    losses = a.bc_pretrain(obs, actions, 300)
    assert np.isfinite(losses["bc_nll"]) and losses["bc_mse"] < 0.1 * gap0 and _actor_gap(a, b) < 0.1 * gap0
