"""The critic ensemble (RLPD): N critics with their own targets, weighted losses, exported actor unchanged."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from worldsample.learner import LearnerConfig, sac

B = 32


def agent(critics: int, critic: str = "mlp", **kw):
    torch.manual_seed(0)
    cfg = LearnerConfig(obs_keys=["proprio"], hidden=[32, 32], batch_size=B, critics=critics, critic=critic,
                        critic_warmup_updates=0, **kw)
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


def extra_critic_tensors(a, i: int, target: bool) -> dict[str, np.ndarray]:
    """Extra critic i's weights, whichever way the module holds them: RLlib's encoder/head pairs
    (`qf_extra_heads.i.*`) or member i of the batched MLP (`qf_extra.*[i]`)."""
    pre = "target_" if target else ""
    out = {}
    for k, v in critic_params(a).items():
        if k.startswith(f"{pre}qf_extra_heads.{i}.") or k.startswith(f"{pre}qf_extra_encoders.{i}."):
            out[k] = v
        elif k.startswith(f"{pre}qf_extra.") and i < len(v):
            out[k] = v[i]
    return out


@pytest.mark.parametrize("critic", ["mlp", "rllib"])
def test_ensemble_has_n_critics_and_targets_and_trains_them_all(critic):
    a = agent(5, critic, target_subset=2)
    module = a.group._learner.module["default_policy"]
    assert module._all_q({"obs": torch.zeros(B, 3), "actions": torch.zeros(B, 2)}).shape == (5, B)
    before = [(extra_critic_tensors(a, i, False), extra_critic_tensors(a, i, True)) for i in range(3)]
    assert all(b[0] and b[1] for b in before) and not extra_critic_tensors(a, 3, False)
    for _ in range(3):
        m = a.update(batch())
    for i, (online, target) in enumerate(before):  # every extra critic and its target moved
        now, now_target = extra_critic_tensors(a, i, False), extra_critic_tensors(a, i, True)
        assert any(not np.array_equal(online[k], now[k]) for k in online), i
        assert any(not np.array_equal(target[k], now_target[k]) for k in target), i
    assert np.isfinite(m["qf_extra_loss"]) and np.isfinite(m["qf_loss"])
    q = a.q_values(batch())
    assert q.shape == (B,) and np.isfinite(q).all()


def ensemble_q_after(reward: float, weight: float, critic: str) -> np.ndarray:
    """Every critic's Q on a fixed probe batch after 3 updates on `batch(reward, weight)`: (critics, B)."""
    a = agent(4, critic)
    for _ in range(3):
        torch.manual_seed(1)
        a.update(batch(reward, weight))
    mod = a.group._learner.module["default_policy"]
    obs = torch.as_tensor(batch()["obs/proprio"])
    act = torch.as_tensor(batch()["action"])
    return mod._all_q({"obs": obs, "actions": act}).detach().numpy()


@pytest.mark.parametrize("critic", ["mlp", "rllib"])
def test_zero_weight_samples_leave_every_critic_of_the_ensemble_unchanged_and_weighted_ones_move_each(critic):
    np.testing.assert_allclose(ensemble_q_after(+50.0, 0.0, critic), ensemble_q_after(-50.0, 0.0, critic),
                               rtol=0, atol=1e-6)
    # the positive control: the same rows with weight 1 do move every critic, each towards its reward
    q_plus, q_minus = ensemble_q_after(+50.0, 1.0, critic), ensemble_q_after(-50.0, 1.0, critic)
    assert q_plus.shape[0] == 4
    gap = (q_plus - q_minus).mean(axis=1)
    assert (gap > 1e-3).all(), gap


def test_ensemble_config_is_checked_and_two_critics_is_rllibs_twin():
    with pytest.raises(ValueError, match="target_subset"):
        LearnerConfig(critics=3, target_subset=4)
    a = agent(2)
    module = a.group._learner.module["default_policy"]
    assert not hasattr(module, "qf_extra_heads") and not hasattr(module, "qf_extra")


def test_ensemble_actor_exports_like_the_twin(tmp_path):
    from worldsample.learner.export import export_actor
    from worldsample.policy import load_actor

    a = agent(3)
    a.update(batch())
    export_actor(a, tmp_path, {"proprio": 3}, source={})
    actor = load_actor(tmp_path)
    obs = {"proprio": np.array([0.1, -0.2, 0.3], np.float32)}
    np.testing.assert_allclose(actor.act(obs), a.act(obs), atol=1e-5)


@pytest.mark.parametrize("critic", ["mlp", "rllib"])
@pytest.mark.parametrize("actor_q", ["mean", "min"])
def test_the_actor_climbs_the_ensembles_mean_or_its_minimum(critic, actor_q):
    from ray.rllib.core.columns import Columns

    a = agent(5, critic, actor_q=actor_q)
    module = a.group._learner.module["default_policy"]
    b = batch()
    obs = torch.as_tensor(b["obs/proprio"])
    fwd = {Columns.OBS: obs, Columns.NEXT_OBS: torch.as_tensor(b["next_obs/proprio"]),
           Columns.ACTIONS: torch.as_tensor(b["action"])}
    torch.manual_seed(1)
    out = module._forward_train_continuous(fwd)
    torch.manual_seed(1)  # the same resampled actions: the actor's are drawn first
    logits = module.pi(module.pi_encoder({Columns.OBS: obs})["encoder_out"])
    actions = module.get_train_action_dist_cls().from_logits(logits).rsample()
    q = module._all_q({Columns.OBS: obs, Columns.ACTIONS: actions}).detach()
    assert q.shape == (5, B) and q.std(0).min() > 0  # five critics that disagree
    want = q.min(0).values if actor_q == "min" else q.mean(0)
    torch.testing.assert_close(out["q_curr"].detach(), want)
    torch.testing.assert_close(module.compute_q_values({Columns.OBS: obs, Columns.ACTIONS: actions}).detach(),
                               q.mean(0))  # PPL's probes read the mean either way
