"""The critic ensemble (RLPD): N critics with their own targets, weighted losses, exported actor unchanged."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from worldsample.learner import LearnerConfig, sac

B = 32


def agent(critics: int, **kw):
    torch.manual_seed(0)
    cfg = LearnerConfig(
        obs_keys=["proprio"], hidden=[32, 32], batch_size=B, critics=critics, critic_warmup_updates=0, **kw
    )
    return sac.SACAgent(cfg, 3, gym.spaces.Box(-1, 1, (2,), np.float32))


def batch(syn_reward: float = 0.0, syn_weight: float = 1.0):
    rng = np.random.default_rng(0)
    reward = np.ones(B, np.float32)
    reward[B // 2 :] = syn_reward
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


def critic_params(a) -> dict[str, np.ndarray]:
    sd = a.group._learner.module["default_policy"].state_dict()
    return {k: v.detach().numpy().copy() for k, v in sd.items() if k.startswith(("qf", "target_qf"))}


def test_ensemble_has_n_critics_and_targets_and_trains_them_all():
    a = agent(5, target_subset=2)
    module = a.group._learner.module["default_policy"]
    assert len(module.qf_extra_heads) == 3 and len(module.target_qf_extra_heads) == 3
    before = critic_params(a)
    for _ in range(3):
        m = a.update(batch())
    after = critic_params(a)
    for i in range(3):  # every extra critic and its target moved
        assert any(not np.array_equal(before[k], after[k]) for k in before if k.startswith(f"qf_extra_heads.{i}."))
        assert any(
            not np.array_equal(before[k], after[k]) for k in before if k.startswith(f"target_qf_extra_heads.{i}.")
        )
    assert np.isfinite(m["qf_extra_loss"]) and np.isfinite(m["qf_loss"])
    q = a.q_values(batch())
    assert q.shape == (B,) and np.isfinite(q).all()


def ensemble_q_after(reward: float, weight: float) -> np.ndarray:
    """Every critic's Q on a fixed probe batch after 3 updates on `batch(reward, weight)`: (critics, B)."""
    a = agent(4)
    for _ in range(3):
        torch.manual_seed(1)
        a.update(batch(reward, weight))
    mod = a.group._learner.module["default_policy"]
    obs = torch.as_tensor(batch()["obs/proprio"])
    act = torch.as_tensor(batch()["action"])
    return np.stack(
        [
            mod._qf_forward_train_helper({"obs": obs, "actions": act}, e, h).detach().numpy()
            for e, h in mod._critics()
        ]
    )


def test_zero_weight_samples_leave_every_critic_of_the_ensemble_unchanged_and_weighted_ones_move_each():
    np.testing.assert_allclose(ensemble_q_after(+50.0, 0.0), ensemble_q_after(-50.0, 0.0), rtol=0, atol=1e-6)
    # the positive control: the same rows with weight 1 do move every critic, each towards its reward
    q_plus, q_minus = ensemble_q_after(+50.0, 1.0), ensemble_q_after(-50.0, 1.0)
    assert q_plus.shape[0] == 4
    gap = (q_plus - q_minus).mean(axis=1)
    assert (gap > 1e-3).all(), gap


def test_ensemble_config_is_checked_and_two_critics_is_rllibs_twin():
    with pytest.raises(ValueError, match="target_subset"):
        LearnerConfig(critics=3, target_subset=4)
    a = agent(2)
    assert not hasattr(a.group._learner.module["default_policy"], "qf_extra_heads")


def test_ensemble_actor_exports_like_the_twin(tmp_path):
    from worldsample.learner.export import export_actor
    from worldsample.policy import load_actor

    a = agent(3)
    a.update(batch())
    export_actor(a, tmp_path, {"proprio": 3}, source={})
    actor = load_actor(tmp_path)
    obs = {"proprio": np.array([0.1, -0.2, 0.3], np.float32)}
    np.testing.assert_allclose(actor.act(obs), a.act(obs), atol=1e-5)
