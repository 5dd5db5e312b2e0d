"""RLlib's SAC learner fed with externally composed, weighted batches."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from worldsample.learner import LearnerConfig, sac

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


def all_params(a) -> dict[str, np.ndarray]:
    """Every learned tensor: actor, critics, their targets, and log_alpha."""
    learner = a.group._learner
    out = {k: v.detach().numpy().copy() for k, v in learner.module[sac.MODULE].state_dict().items()}
    out["log_alpha"] = learner.curr_log_alpha[sac.MODULE].detach().numpy().copy()
    return out


def with_other_zero_weight_rows(b: dict, seed: int) -> dict:
    """The same batch with observations, next observations, actions and rewards replaced in its zero-weight rows."""
    rng = np.random.default_rng(seed)
    out = {k: v.copy() for k, v in b.items()}
    zero = out["weights"] == 0
    n = int(zero.sum())
    out["obs/proprio"][zero] = rng.normal(3.0, 2.0, (n, 3))
    out["next_obs/proprio"][zero] = rng.normal(-3.0, 2.0, (n, 3))
    out["action"][zero] = rng.uniform(-1, 1, (n, 2))
    out["reward"][zero] = rng.uniform(-50, 50, n)
    return out


@pytest.mark.parametrize("critics", [2, 4])
def test_zero_weight_samples_leave_actor_critics_and_temperature_unchanged(critics):
    base = {**batch(1.0, 0.0), "bc_mask": np.r_[np.ones(B // 4), np.zeros(B - B // 4)].astype(np.float32)}
    other = with_other_zero_weight_rows(base, seed=7)
    assert not np.allclose(base["obs/proprio"][B // 2 :], other["obs/proprio"][B // 2 :])

    def after_updates(b):
        torch.manual_seed(0)
        cfg = LearnerConfig(obs_keys=["proprio"], hidden=[32, 32], batch_size=B, critic_warmup_updates=0,
                            critics=critics, bc_weight=1.0)
        a = sac.SACAgent(cfg, 3, gym.spaces.Box(-1, 1, (2,), np.float32))
        start = all_params(a)
        for _ in range(2):
            torch.manual_seed(1)  # the same reparameterisation noise and target subsets for both batches
            metrics = a.update(b)
        return start, all_params(a), metrics

    start, p_base, m_base = after_updates(base)
    start_other, p_other, m_other = after_updates(other)
    assert all(np.array_equal(start[k], start_other[k]) for k in start)  # same seed, same start
    moved = [k for k in start if not np.array_equal(start[k], p_base[k])]
    assert "log_alpha" in moved and any(k.startswith("pi") for k in moved) and any(k.startswith("qf") for k in moved)
    for k in p_base:
        np.testing.assert_array_equal(p_base[k], p_other[k], err_msg=k)
    for key in ("policy_loss", "alpha_loss", "qf_loss", "bc_mse"):
        assert m_base[key] == m_other[key], key


def test_actor_and_alpha_losses_are_rllibs_means_over_the_weighted_rows():
    from ray.rllib.algorithms.sac.torch.sac_torch_learner import SACTorchLearner

    learner = agent().group._learner
    conf = learner.config.get_config_for_module(sac.MODULE)
    b = batch(1.0, 1.0)
    cols = {
        "obs": b["obs/proprio"], "new_obs": b["next_obs/proprio"], "actions": b["action"], "rewards": b["reward"],
        "terminateds": b["done"], "n_step": b["n_step"], "weights": b["weights"],
    }
    cols = {k: torch.as_tensor(v) for k, v in cols.items()}
    torch.manual_seed(1)
    fwd = learner.module[sac.MODULE].forward_train(cols)

    def losses(fn, batch_cols, fwd_out):
        fn(module_id=sac.MODULE, config=conf, batch=batch_cols, fwd_out=fwd_out)
        out = {name: float(learner._temp_losses[(sac.MODULE, name)].detach()) for name in ("policy_loss", "alpha_loss")}
        learner._temp_losses.clear()
        return out

    def rllib(batch_cols, fwd_out):
        return losses(lambda **kw: SACTorchLearner._compute_loss_for_module_continuous(learner, **kw),
                      batch_cols, fwd_out)

    ours = learner._compute_loss_for_module_continuous
    # every weight 1: exactly RLlib's unweighted means
    assert losses(ours, cols, fwd) == pytest.approx(rllib(cols, fwd), rel=1e-6)
    # weights 0/1: RLlib's means over the kept rows only
    keep = torch.as_tensor(np.random.default_rng(3).random(B) < 0.6)
    weighted = {**cols, "weights": keep.float()}
    kept_cols = {k: v[keep] for k, v in cols.items()}
    kept_fwd = {k: v[keep] if torch.is_tensor(v) and v.shape[:1] == (B,) else v for k, v in fwd.items()}
    assert losses(ours, weighted, fwd) == pytest.approx(rllib(kept_cols, kept_fwd), rel=1e-5)


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


def _entropy_after_bc_updates(std_weight: float, updates: int = 150) -> tuple[float, float, dict]:
    torch.manual_seed(0)
    cfg = LearnerConfig(obs_keys=["proprio"], hidden=[32, 32], batch_size=B, bc_weight=5.0, lr=3e-3,
                        bc_std_weight=std_weight, critic_warmup_updates=0)
    a = sac.SACAgent(cfg, 3, gym.spaces.Box(-1, 1, (2,), np.float32))
    b = batch(1.0, 1.0)
    b["action"] = np.tanh(b["obs/proprio"][:, :2]).astype(np.float32)  # a consistent human
    b["bc_mask"] = np.ones(B, np.float32)
    h0 = a.entropy(b)
    for _ in range(updates):
        m = a.update(b)
    return h0, a.entropy(b), m


def test_spread_on_human_rows_falls_as_the_actor_gets_good_only_with_the_likelihood_term():
    h0, without, m0 = _entropy_after_bc_updates(0.0)
    h0_std, with_std, m = _entropy_after_bc_updates(1.0)
    assert h0 == pytest.approx(h0_std, abs=0.2)  # same start (entropy is sampled)
    assert "bc_nll" not in m0 and np.isfinite(m["bc_nll"])
    print(f"entropy {h0:.2f} -> {without:.2f} (mean-only BC) vs {with_std:.2f} (with the spread's likelihood)")
    assert with_std < without - 1.0 and with_std < h0 - 1.0


def test_the_spread_likelihood_reaches_the_log_std_rows_of_the_head_only():
    # through the actor's shared features it would move the mean: measured, it undid what the actor learnt
    a = agent()
    rng = np.random.default_rng(0)
    obs = torch.as_tensor(rng.normal(size=(B, 3)).astype(np.float32))
    acts = torch.as_tensor(rng.uniform(-0.9, 0.9, (B, 2)).astype(np.float32))

    def grads(learner):
        module = learner.module[sac.MODULE]
        module.zero_grad(set_to_none=True)
        dist_inputs = module.pi(module.pi_encoder({"obs": obs})[sac.ENCODER_OUT])
        learner._spread_nll(module, obs, dist_inputs, acts).mean().backward()
        return {n: (None if p.grad is None else p.grad.clone()) for n, p in module.named_parameters()
                if n.startswith(("pi_encoder.", "pi."))}

    g = a._on_learner(grads)
    assert all(v is None or not v.any() for n, v in g.items() if n.startswith("pi_encoder."))
    head_w = next(v for n, v in g.items() if n.startswith("pi.") and n.endswith("weight"))
    assert not head_w[:2].any() and head_w[2:].abs().sum() > 0  # mean rows untouched, log-std rows learn


def _log_alpha_after(updates: int, **learner) -> float:
    torch.manual_seed(0)
    cfg = LearnerConfig(obs_keys=["proprio"], hidden=[32, 32], batch_size=B, critic_warmup_updates=0, **learner)
    a = sac.SACAgent(cfg, 3, gym.spaces.Box(-1, 1, (2,), np.float32))
    for _ in range(updates):
        m = a.update(batch(1.0, 1.0))
    return float(m["log_alpha_value"])


def test_the_temperature_learns_at_its_own_rate():
    # an unreachable target entropy: every update lowers log alpha by about one Adam step of its rate
    start = np.log(0.01)
    slow = start - _log_alpha_after(20, target_entropy=-50.0)  # the default: lr, 3e-4
    fast = start - _log_alpha_after(20, target_entropy=-50.0, alpha_lr=3e-3)
    assert slow == pytest.approx(20 * 3e-4, rel=0.2)
    assert fast == pytest.approx(20 * 3e-3, rel=0.2)


def test_the_default_target_entropy_is_minus_half_the_action_dimension():
    a = sac.SACAgent(LearnerConfig(obs_keys=["proprio"], hidden=[8], batch_size=B), 3,
                     gym.spaces.Box(-1, 1, (2,), np.float32))
    assert a.target_entropy == -1.0
    b = sac.SACAgent(LearnerConfig(obs_keys=["proprio"], hidden=[8], batch_size=B, target_entropy=-4.0), 3,
                     gym.spaces.Box(-1, 1, (2,), np.float32))
    assert b.target_entropy == -4.0


def test_batches_larger_than_the_configured_size_train():
    """ppl.placement add: a batch of B real rows plus the synthetic ones on top (here 1.25 B) updates
    the critic like any other batch."""
    a = agent()
    big = {k: np.concatenate([v, v[: B // 4]]) for k, v in batch(5.0, 1.0).items()}
    before = a.q_values(batch(0.0, 1.0))
    metrics = a.update(big)
    assert np.isfinite(metrics["qf_loss"])
    assert np.abs(a.q_values(batch(0.0, 1.0)) - before).max() > 1e-4


@pytest.mark.parametrize("per_call", [1, 4])
def test_actor_every_steps_the_actor_and_temperature_on_every_kth_update_and_the_critics_on_each(per_call):
    torch.manual_seed(0)
    cfg = LearnerConfig(obs_keys=["proprio"], hidden=[32, 32], batch_size=B, critic_warmup_updates=0, actor_every=4,
                        updates_per_call=per_call)
    a = sac.SACAgent(cfg, 3, gym.spaces.Box(-1, 1, (2,), np.float32))
    b = batch(1.0, 1.0)
    before, q0 = all_params(a), a.q_values(b)
    a.update_many([b] * 3)  # updates 1-3: critics only
    after = all_params(a)
    actor = [k for k in before if k.startswith(("pi_encoder.", "pi.net."))] + ["log_alpha"]
    assert all(np.array_equal(before[k], after[k]) for k in actor)
    assert not np.allclose(a.q_values(b), q0)
    a.update(b)  # update 4: the actor and the temperature too
    moved = all_params(a)
    assert all(not np.array_equal(after[k], moved[k]) for k in actor)
    a.update_many([b] * 3)
    assert all(np.array_equal(moved[k], all_params(a)[k]) for k in actor)


def test_actor_every_one_is_the_old_update():
    def run(**kw):
        torch.manual_seed(0)
        a = sac.SACAgent(LearnerConfig(obs_keys=["proprio"], hidden=[32, 32], batch_size=B, critic_warmup_updates=0,
                                       **kw), 3, gym.spaces.Box(-1, 1, (2,), np.float32))
        for _ in range(3):
            torch.manual_seed(1)
            a.update(batch(1.0, 1.0))
        return all_params(a)

    plain, every1, every2 = run(), run(actor_every=1), run(actor_every=2)
    assert all(np.array_equal(plain[k], every1[k]) for k in plain)
    assert any(not np.array_equal(plain[k], every2[k]) for k in plain)


@pytest.mark.parametrize("critics", [2, 10])
def test_backup_entropy_off_leaves_the_entropy_bonus_out_of_the_bellman_target(critics):
    """With a zero reward and no terminal step the soft target is gamma * (Q' - alpha log pi'), the plain one
    gamma * Q'. At a huge temperature the bonus dwarfs the freshly initialised critics' values, so the first
    update's critic losses (Huber, from the same weights) tell the two targets apart."""
    def losses(backup: bool) -> list[float]:
        torch.manual_seed(0)
        cfg = LearnerConfig(obs_keys=["proprio"], hidden=[32, 32], batch_size=B, critic_warmup_updates=10,
                            critics=critics, initial_alpha=100.0, backup_entropy=backup, critic="mlp")
        a = sac.SACAgent(cfg, 3, gym.spaces.Box(-1, 1, (2,), np.float32))
        torch.manual_seed(1)
        m = a.update(batch(0.0, 1.0))
        keys = ["qf_loss", "qf_twin_loss"] + (["qf_extra_loss"] if critics > 2 else [])
        return [m[k] / (1 if k != "qf_extra_loss" else critics - 2) for k in keys]

    for soft, plain in zip(losses(True), losses(False)):
        assert plain < 1.0 < 10.0 < soft
