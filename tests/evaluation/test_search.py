"""Best-of-N: N = 1 is the base policy, a larger N executes what the world model predicts to
succeed, and the per-decision time budget is honoured (fallbacks counted, nothing over budget)."""

import numpy as np
import pytest
import torch

from tests.evaluation.helpers import policy_tensors, rigged_model
from worldsample.errors import ConfigError
from worldsample.evaluation.search import BestOfN, run_search
from worldsample.policy import NumpyActor
from worldsample.sim import SimArmConfig


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def actor(a0, **kw):
    cfg, t = policy_tensors(a0, **kw)
    return NumpyActor(cfg.model_copy(update={"version": 3}), t)


def observations(n, seed=0):
    rng = np.random.default_rng(seed)
    return [{"state": rng.normal(0, 0.1, 39).astype(np.float32)} for _ in range(n)]


def drive(planner, obs_seq):
    planner.reset(obs_seq[0])
    return np.stack([planner.act(o) for o in obs_seq])


def test_n1_executes_the_base_policy():
    base = actor(-0.3, stochastic=True, log_std=0.5)
    obs = observations(6)
    planner = BestOfN(rigged_model(), base, n=1, horizon=3, seed=0)
    got = drive(planner, obs)
    np.testing.assert_array_equal(got, np.stack([base.act(o) for o in obs]))
    assert planner.stats.searched == planner.stats.decisions == 6
    assert planner.stats.fallbacks == 0 and planner.stats.chose_base == 6


def test_larger_n_executes_the_chunk_predicted_to_succeed():
    base = actor(-0.3, stochastic=True, log_std=0.5)  # the rigged success head says: a0 above ~0.35 succeeds
    planner = BestOfN(rigged_model(), base, n=8, horizon=3, seed=0)
    got = drive(planner, observations(8))
    assert (got[:, 0] > 0.35).mean() >= 0.5
    assert planner.stats.chose_base < planner.stats.decisions
    again = drive(BestOfN(rigged_model(), base, n=8, horizon=3, seed=0), observations(8))
    np.testing.assert_array_equal(got, again)  # reproducible under the seed
    # a policy the model already predicts to succeed keeps its own action (ties go to the base)
    good = actor(0.9, stochastic=True, log_std=0.5)
    kept = drive(BestOfN(rigged_model(), good, n=8, horizon=3, seed=0), observations(4))
    np.testing.assert_allclose(kept[:, 0], 0.9, atol=1e-6)


class StepClock:
    """A clock that only imagined steps move, 10 ms each: the search's timing made deterministic."""

    def __init__(self, model):
        self.now = 0.0
        step = model.step

        def timed_step(*args, **kwargs):
            self.now += 0.01
            return step(*args, **kwargs)

        model.step = timed_step

    def __call__(self):
        return self.now


@pytest.mark.parametrize("budget", [0.012, 0.035, 0.06, 10.0])
def test_the_time_budget_is_never_exceeded(budget):
    base = actor(-0.3, stochastic=True, log_std=0.5)
    model = rigged_model(done_logit=-8.0)
    planner = BestOfN(model, base, n=4, horizon=5, seed=0, budget_s=budget, clock=StepClock(model))
    obs = observations(5)
    got = drive(planner, obs)
    s = planner.stats
    assert s.decisions == 5 and s.overruns == 0
    assert s.max_decision_s <= budget
    if budget < 0.05:  # five imagined steps of 10 ms (plus the margin on the next one) cannot fit
        assert s.fallbacks == 5 and s.searched == 0
        np.testing.assert_array_equal(got, np.stack([base.act(o) for o in obs]))
    else:
        assert s.fallbacks == 0 and s.searched == 5
        assert s.max_decision_s > 0.035  # it did imagine: the clock moved


def test_a_real_clock_budget_too_small_falls_back_to_the_base_policy():
    base = actor(-0.3, stochastic=True, log_std=0.5)
    planner = BestOfN(rigged_model(), base, n=4, horizon=5, seed=0, budget_s=1e-6)
    obs = observations(4)
    got = drive(planner, obs)
    np.testing.assert_array_equal(got, np.stack([base.act(o) for o in obs]))
    assert planner.stats.fallbacks == 4 and planner.stats.searched == 0


def test_bad_settings_are_refused():
    with pytest.raises(ConfigError, match="deterministic"):
        BestOfN(rigged_model(), actor(0.1), n=4, horizon=3)
    BestOfN(rigged_model(), actor(0.1), n=4, horizon=3, spread=0.3)  # spread around its action instead
    with pytest.raises(ConfigError, match="n >= 1"):
        BestOfN(rigged_model(), actor(0.1), n=0, horizon=3)
    with pytest.raises(ConfigError, match="budget"):
        BestOfN(rigged_model(), actor(0.1), n=1, horizon=3, budget_s=0)


def test_run_search_on_the_simulated_arm_compares_over_the_same_starts():
    base = actor(-0.3, stochastic=True, log_std=0.5)
    env_cfg = SimArmConfig(cameras=[], max_episode_steps=4)
    one = run_search(rigged_model(), base, env_cfg, [10_000, 10_001], n=1, horizon=2)
    assert one["base_episodes"] == one["search_episodes"]  # N = 1: the same episodes, return for return
    assert one["gain"] == 0.0 and one["decisions"]["decisions"] == 8
    many = run_search(rigged_model(), base, env_cfg, [10_000, 10_001], n=4, horizon=2)
    assert many["seeds"] == [10_000, 10_001] and many["base_episodes"] == one["base_episodes"]
    assert many["decisions"]["chose_base"] < 8
