"""learner.anchor_weight: the actor held near a frozen copy of itself taken after behaviour cloning,
on every sampled state. Where the critics pull the actor away from what it cloned, the term keeps it
there in proportion to its weight; the copy travels in the agent's state."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from worldsample.learner import LearnerConfig


def make_agent(weight: float, seed: int = 1):
    from worldsample.learner.sac import SACAgent

    cfg = LearnerConfig(obs_keys=["s"], hidden=[32, 32], batch_size=64, critics=2, bc_weight=0.0,
                        anchor_weight=weight, bc_pretrain_steps=200, critic_warmup_updates=50, seed=seed)
    return SACAgent(cfg, 3, gym.spaces.Box(-1.0, 1.0, (2,), np.float32))


def online_batch(rng, n: int = 64) -> dict:
    """States the demos never showed; one step each, rewarded for actions near -0.5."""
    a = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    return {"obs/s": rng.normal(3.0, 1.0, (n, 3)).astype(np.float32),
            "next_obs/s": rng.normal(3.0, 1.0, (n, 3)).astype(np.float32), "action": a,
            "reward": -((a + 0.5) ** 2).sum(-1).astype(np.float32), "done": np.ones(n, bool),
            "n_step": np.ones(n, np.int64)}


def test_the_anchor_holds_the_actor_near_what_it_cloned_where_the_critics_pull_away():
    rng = np.random.default_rng(0)
    demo_obs = rng.normal(0.0, 1.0, (256, 3)).astype(np.float32)
    demo_act = np.full((256, 2), 0.5, np.float32)
    probe = online_batch(np.random.default_rng(5), 128)
    mean_action = {}
    for weight in (0.0, 10.0):
        agent = make_agent(weight)
        try:
            agent.bc_pretrain(demo_obs, demo_act, 200)
            assert bool(agent.anchor_state()) == (weight > 0)
            data = np.random.default_rng(2)
            for _ in range(400):
                stats = agent.update(online_batch(data))
            assert ("anchor_mse" in stats) == (weight > 0)
            mean_action[weight] = float(np.mean([agent.act({"s": o}) for o in probe["obs/s"][:32]]))
        finally:
            agent.close()
    # the critics reward -0.5: free, the actor goes there; anchored, it stays near the cloned 0.5
    assert mean_action[0.0] < 0.0, mean_action
    assert mean_action[10.0] > 0.25, mean_action


def test_the_anchor_travels_in_the_state_and_is_taken_only_when_asked():
    rng = np.random.default_rng(0)
    demo_obs = rng.normal(0.0, 1.0, (64, 3)).astype(np.float32)
    demo_act = rng.uniform(-1, 1, (64, 2)).astype(np.float32)
    first, second = make_agent(1.0), make_agent(1.0, seed=2)
    try:
        first.bc_pretrain(demo_obs, demo_act, 50)
        state = first.anchor_state()
        assert state and all(isinstance(v, np.ndarray) for v in state.values())
        assert not second.anchor_state()  # no behaviour cloning yet: no copy
        second.load_anchor(state)
        back = second.anchor_state()
        assert back.keys() == state.keys()
        for k in state:
            np.testing.assert_array_equal(back[k], state[k])
    finally:
        first.close()
        second.close()
    with pytest.raises(ValueError, match="bc_pretrain_steps > 0"):
        LearnerConfig(obs_keys=["s"], anchor_weight=1.0, bc_pretrain_steps=0)
