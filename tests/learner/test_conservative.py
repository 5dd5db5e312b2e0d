"""learner.cql_weight: conservative critics (CQL). On a fixed batch, the term lowers every critic's Q
of actions the data does not hold below its Q of the data's actions; without it they stay level."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from worldsample.learner import LearnerConfig


@pytest.mark.parametrize("critics", [2, 4])
def test_the_conservative_term_ranks_the_datas_actions_above_the_others(critics):
    from worldsample.learner.sac import SACAgent

    rng = np.random.default_rng(0)
    n = 32
    batch = {"obs/s": rng.normal(size=(n, 3)).astype(np.float32),
             "next_obs/s": rng.normal(size=(n, 3)).astype(np.float32),
             "action": np.full((n, 2), 0.5, np.float32),  # one action played everywhere
             "reward": np.zeros(n, np.float32), "done": np.ones(n, bool), "n_step": np.ones(n, np.int64)}
    other = {**batch, "action": rng.uniform(-1, 1, (n, 2)).astype(np.float32)}
    gaps = {}
    for weight in (0.0, 1.0):
        cfg = LearnerConfig(obs_keys=["s"], hidden=[32, 32], batch_size=n, critics=critics, cql_weight=weight,
                            critic_warmup_updates=1000, seed=1)
        agent = SACAgent(cfg, 3, gym.spaces.Box(-1.0, 1.0, (2,), np.float32))
        try:
            for _ in range(150):
                stats = agent.update(batch)
            gaps[weight] = float((agent.q_values(batch) - agent.q_values(other)).mean())
            assert ("cql_gap" in stats) == (weight > 0)
        finally:
            agent.close()
    # every reward is 0 and every step terminal: the Bellman target is 0 for any action
    assert abs(gaps[0.0]) < 0.1
    assert gaps[1.0] > 0.5


def test_calibration_stops_pushing_the_policys_actions_below_the_datas_return():
    """learner.cql_calibrated (Cal-QL): the data says each state is worth 0.8 (its Monte-Carlo return)
    while the Bellman target is 0; plain CQL drives Q at the policy's own actions far below 0,
    the calibrated term leaves them near the target."""
    from worldsample.learner.sac import SACAgent

    rng = np.random.default_rng(0)
    n = 32
    batch = {"obs/s": rng.normal(size=(n, 3)).astype(np.float32),
             "next_obs/s": rng.normal(size=(n, 3)).astype(np.float32),
             "action": np.full((n, 2), 0.5, np.float32), "reward": np.zeros(n, np.float32),
             "done": np.ones(n, bool), "n_step": np.ones(n, np.int64), "mc_return": np.full(n, 0.8, np.float32)}
    q_policy = {}
    for calibrated in (False, True):
        cfg = LearnerConfig(obs_keys=["s"], hidden=[32, 32], batch_size=n, cql_weight=1.0,
                            cql_calibrated=calibrated, critic_warmup_updates=1000, seed=1)
        agent = SACAgent(cfg, 3, gym.spaces.Box(-1.0, 1.0, (2,), np.float32))
        try:
            for _ in range(150):
                agent.update(batch)
            own = agent._on_learner(lambda learner, o: learner.deterministic_actions(o), o=batch["obs/s"])
            q_policy[calibrated] = float(agent.q_values({**batch, "action": np.asarray(own, np.float32)}).mean())
            if calibrated:
                with pytest.raises(ValueError, match="mc_return"):
                    agent.update({k: v for k, v in batch.items() if k != "mc_return"})
        finally:
            agent.close()
    assert q_policy[False] < -1.0
    assert q_policy[True] > -0.5
    with pytest.raises(ValueError, match="set cql_weight > 0"):
        LearnerConfig(obs_keys=["s"], cql_calibrated=True)
