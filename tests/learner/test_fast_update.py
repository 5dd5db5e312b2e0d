"""The learner's faster update paths (worldsample/learner/fast_update.py, SACAgent.update_many)
give the weights RLlib's own paths give: one backward pass for all losses, foreach Adam, foreach
Polyak targets, and several gradient steps inside one learner call."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from worldsample.learner import LearnerConfig, sac

B, OBS, ACT = 32, 5, 2


def agent(reference: bool, critics: int = 2, critic: str = "mlp", warmup: int = 0, tau: float = 0.005,
          **learner) -> sac.SACAgent:
    torch.manual_seed(0)
    cfg = LearnerConfig(obs_keys=["state"], hidden=[32, 32], batch_size=B, critics=critics, critic=critic,
                        critic_warmup_updates=warmup, bc_pretrain_steps=0, tau=tau, **learner)
    return sac.SACAgent(cfg, OBS, gym.spaces.Box(-1, 1, (ACT,), np.float32), rllib_reference=reference)


def batches(n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"obs/state": rng.normal(size=(B, OBS)).astype(np.float32),
             "next_obs/state": rng.normal(size=(B, OBS)).astype(np.float32),
             "action": rng.uniform(-1, 1, (B, ACT)).astype(np.float32),
             "reward": rng.uniform(0, 1, B).astype(np.float32), "done": rng.random(B) < 0.1,
             "n_step": np.ones(B, np.int64), "weights": rng.uniform(0.5, 1, B).astype(np.float32),
             "bc_mask": (rng.random(B) < 0.3).astype(np.float32)} for _ in range(n)]


def weights(a: sac.SACAgent) -> dict[str, np.ndarray]:
    sd = a.group._learner.module[sac.MODULE].state_dict()
    alpha = a.group._learner.curr_log_alpha[sac.MODULE]
    return {**{k: v.detach().numpy().copy() for k, v in sd.items()}, "log_alpha": alpha.detach().numpy().copy()}


def grads(a: sac.SACAgent) -> dict[str, np.ndarray]:
    """The gradients the last update stepped on (left on the parameters until the next one)."""
    learner = a.group._learner
    named = {**dict(learner.module[sac.MODULE].named_parameters()), "log_alpha": learner.curr_log_alpha[sac.MODULE]}
    return {k: p.grad.numpy().copy() for k, p in named.items() if p.grad is not None}


def assert_same(w1: dict, w2: dict, atol: float) -> None:
    assert w1.keys() == w2.keys()
    for k in w1:
        np.testing.assert_allclose(w1[k], w2[k], rtol=0, atol=atol, err_msg=k)


def moved(w0: dict, w1: dict) -> set[str]:
    return {k for k in w0 if not np.array_equal(w0[k], w1[k])}


@pytest.mark.parametrize("critics", [2, 4])
def test_the_fast_update_gives_rllibs_weights(critics):
    fast, ref = agent(False, critics), agent(True, critics)
    assert not fast.group._learner.rllib_reference and ref.group._learner.rllib_reference
    w0 = weights(fast)
    assert_same(w0, weights(ref), 0)
    for i, b in enumerate(batches(5)):
        torch.manual_seed(1)
        fast.update(b)
        torch.manual_seed(1)
        ref.update(b)
        if i == 0:  # one backward pass of the sum: each parameter's gradient from its own loss only
            g = grads(fast)
            assert {"log_alpha", "pi.net.mlp.0.weight", "qf.net.mlp.0.weight"} <= g.keys()
            assert_same(g, grads(ref), 1e-6)
    w_fast = weights(fast)
    # every network moved (actor, critics, targets, temperature), and each as RLlib moves it
    assert {k.split(".")[0] for k in moved(w0, w_fast)} >= {"pi_encoder", "pi", "qf_encoder", "qf", "target_qf",
                                                            "log_alpha"}
    assert_same(w_fast, weights(ref), 1e-6)


def test_several_steps_in_one_call_are_the_same_as_one_call_each():
    # tau 0.5: a target that took one Polyak step per call instead of one per gradient step is far off
    seq, many = agent(False, warmup=3, tau=0.5), agent(False, warmup=3, tau=0.5)
    bs = batches(7)
    torch.manual_seed(2)
    for b in bs:
        seq.update(b)
    torch.manual_seed(2)
    m = many.update_many(bs)  # the warm-up ends inside: 3 frozen steps, then 4 with the actor
    assert seq.updates == many.updates == 7 and np.isfinite(m["qf_loss"])
    w0, w_seq = weights(agent(False)), weights(seq)
    assert "pi.net.mlp.0.weight" in moved(w0, w_seq)
    assert_same(weights(many), w_seq, 1e-6)


def test_update_many_refuses_batches_of_different_sizes():
    a = agent(False)
    b1, b2 = batches(2)
    b2 = {k: v[: B // 2] for k, v in b2.items()}
    with pytest.raises(ValueError, match="one size"):
        a.update_many([b1, b2])
    assert a.updates == 0


def test_the_algorithm_batches_its_calls_and_never_spans_the_end_of_the_warm_up():
    from worldsample.learner.algorithm import SACAlgorithm

    a = agent(False, warmup=2, updates_per_call=3)
    algo = SACAlgorithm(a)
    calls, seen = [], []
    a.update_many = lambda bs, report=True, f=a.update_many: (calls.append(len(bs)), f(bs, report))[1]

    def draw(n):
        for b in batches(n):
            seen.append(algo.actor_learning)
            yield {**b, "source": np.array(["online"] * B)}

    algo.update(draw(7))
    assert a.updates == 7 and calls == [2, 3, 2]
    assert seen == [False, False, True, True, True, True, True]  # as one update per call would see them


def test_a_non_finite_gradient_takes_rllibs_own_path_on_both_sides():
    # one finiteness check over all gradients replaces RLlib's per-parameter ones; a NaN must still
    # reach RLlib's handling (nan/inf gradients set to zero), not be stepped on by Adam
    fast, ref = agent(False), agent(True)
    bs = batches(3)
    bs[1]["reward"][0] = np.nan  # NaN in the critics' Bellman target, hence in their gradients
    for b in bs:
        torch.manual_seed(3)
        fast.update(b)
        torch.manual_seed(3)
        ref.update(b)
    w = weights(fast)
    assert all(np.isfinite(v).all() for v in w.values())
    assert_same(w, weights(ref), 1e-6)


def test_the_loops_cadence_reports_every_metrics_every_calls_and_a_report_covers_the_calls_since():
    cadence, each = agent(False, metrics_every=4), agent(False)
    reports = []
    for b in batches(10):
        torch.manual_seed(4)
        reports.append(cadence.update(b, report=None))
        torch.manual_seed(4)
        each.update(b)
    assert [bool(m) for m in reports] == [False, False, False, True] * 2 + [False, False]
    # a report counts the gradient steps since the last one, here and in the flush at the end
    assert [reports[i]["num_module_steps_trained"] for i in (3, 7)] == [4 * B, 4 * B]
    assert [reports[i]["num_target_updates"] for i in (3, 7)] == [4, 4]
    assert np.isfinite(reports[7]["qf_loss"])
    rest = cadence.report()
    assert rest["num_module_steps_trained"] == 2 * B and cadence.report() == {}
    assert_same(weights(cadence), weights(each), 0)  # what is reported does not change what is learned


def test_the_algorithm_reports_once_a_round_ends_and_means_only_the_reports():
    from worldsample.learner.algorithm import SACAlgorithm

    algo = SACAlgorithm(agent(False, metrics_every=4))
    online = [{**b, "source": np.array(["online"] * B)} for b in batches(6)]
    stats = algo.update(iter(online))  # a report after call 4 and one at the end for calls 5-6
    assert stats["num_module_steps_trained"] == (4 * B + 2 * B) / 2
    assert np.isfinite(stats["qf_loss"]) and algo.agent.report() == {}


def test_the_module_is_back_in_training_mode_for_every_update():
    a = agent(False)
    module = a.group._learner.module[sac.MODULE]
    bs = batches(2)
    a.update(bs[0])
    module.eval()  # e.g. left so by an inference call
    a.update(bs[1])
    assert module.training and all(m.training for m in module.modules())
