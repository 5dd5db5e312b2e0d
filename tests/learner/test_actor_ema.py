"""learner.actor_ema: the robot and the evaluations run a Polyak average of the actor. It starts at the
behaviour-cloned actor, moves `rate` of the way to the learning actor after every step the actor takes
(none during the critic warm-up, also when one learner call holds several steps), is what the policy
registry publishes and what `act` plays, and travels in the trainer checkpoint."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from worldsample.learner import LearnerConfig

RATE = 0.2


def make_agent(rate: float, warmup: int = 2):
    from worldsample.learner.sac import SACAgent

    cfg = LearnerConfig(obs_keys=["s"], hidden=[16, 16], batch_size=32, critics=2, actor_ema=rate,
                        bc_pretrain_steps=20, critic_warmup_updates=warmup, seed=3)
    return SACAgent(cfg, 3, gym.spaces.Box(-1.0, 1.0, (2,), np.float32))


def batch(rng, n: int = 32) -> dict:
    a = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    return {"obs/s": rng.normal(size=(n, 3)).astype(np.float32),
            "next_obs/s": rng.normal(size=(n, 3)).astype(np.float32), "action": a,
            "reward": -((a + 0.5) ** 2).sum(-1).astype(np.float32), "done": np.ones(n, bool),
            "n_step": np.ones(n, np.int64)}


def learning_actor(agent) -> dict[str, np.ndarray]:
    """The learning actor's weights, read from the module itself (not through actor_tensors)."""
    from worldsample.learner.sac import MODULE

    sd = agent.group._learner.module[MODULE].state_dict()
    return {k: v.detach().numpy().copy() for k, v in sd.items() if k.startswith(("pi_encoder.", "pi.net."))}


def demos(n: int = 64):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, 3)).astype(np.float32), rng.uniform(-1, 1, (n, 2)).astype(np.float32)


@pytest.mark.parametrize("per_call", [1, 3])
def test_the_exported_actor_is_the_polyak_average_of_the_learning_actor_from_behaviour_cloning_on(per_call):
    agent = make_agent(RATE)
    try:
        agent.bc_pretrain(*demos(), 20)
        expected = start = learning_actor(agent)
        exported = agent.actor_tensors()
        assert exported.keys() == expected.keys()
        for k in expected:  # the average starts at the behaviour-cloned actor
            np.testing.assert_array_equal(exported[k], expected[k])
        rng = np.random.default_rng(1)
        for _ in range(4):
            agent.update_many([batch(rng) for _ in range(per_call)])
            if per_call == 1:  # one step per call: the closed form after each
                if agent.updates > 2:  # past the critic warm-up the actor steps, and the average follows it
                    now = learning_actor(agent)
                    expected = {k: expected[k] + RATE * (now[k] - expected[k]) for k in expected}
                for k in expected:
                    np.testing.assert_allclose(agent.actor_tensors()[k], expected[k], rtol=1e-5, atol=1e-6)
        exported, now = agent.actor_tensors(), learning_actor(agent)
        # it lags the learning actor, and moved away from where it started
        assert any(not np.allclose(exported[k], now[k]) for k in now)
        assert any(not np.allclose(exported[k], start[k]) for k in now)
    finally:
        agent.close()


def test_act_and_the_published_policy_are_the_averaged_actor_and_the_average_survives_a_checkpoint(tmp_path):
    from worldsample.learner.export import export_actor
    from worldsample.policy import load_actor

    first, second = make_agent(RATE, warmup=0), make_agent(RATE, warmup=0)
    try:
        first.bc_pretrain(*demos(), 20)
        rng = np.random.default_rng(2)
        for _ in range(6):
            first.update(batch(rng))
        export_actor(first, tmp_path, {"s": 3})
        policy = load_actor(tmp_path)
        obs = {"s": np.array([0.3, -1.0, 0.5], np.float32)}
        np.testing.assert_allclose(policy.act(obs), first.act(obs), atol=1e-5)
        # the learning actor would act otherwise: the averaged one is what plays
        learner = first.group._learner
        learner._ema, ema = None, learner._ema
        learning = first.act(obs)
        learner._ema = ema
        assert not np.allclose(learning, first.act(obs), atol=1e-4)

        state = first.ema_state()
        assert state and not second.ema_state()
        second.load_ema(state)
        back, now = second.actor_tensors(), first.actor_tensors()
        for k in now:
            np.testing.assert_array_equal(back[k], now[k])
        second.load_ema({})  # a checkpoint from before the average: it starts at the restored actor
        restored = learning_actor(second)
        for k, v in second.actor_tensors().items():
            np.testing.assert_array_equal(v, restored[k])
    finally:
        first.close()
        second.close()


def test_without_the_average_the_learning_actor_is_exported():
    agent = make_agent(0.0, warmup=0)
    try:
        agent.bc_pretrain(*demos(), 20)
        rng = np.random.default_rng(1)
        for _ in range(3):
            agent.update(batch(rng))
        assert not agent.ema_state()
        now, exported = learning_actor(agent), agent.actor_tensors()
        for k in now:
            np.testing.assert_array_equal(exported[k], now[k])
    finally:
        agent.close()
