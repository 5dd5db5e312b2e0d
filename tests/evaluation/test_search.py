"""Best-of-N: N = 1 is the base policy, a larger N executes what the world model predicts to
succeed, and the per-decision time budget is honoured (fallbacks counted, nothing over budget).
With score=value, the chunk whose imagined end state the critic rates highest is executed, and a
chunk that ends on a success label is terminal (not bootstrapped)."""

import numpy as np
import pytest

from tests.evaluation.helpers import STATE, PointMass, policy_tensors, rigged_model
from worldsample.errors import ConfigError
from worldsample.evaluation.critic import Critic
from worldsample.evaluation.search import BestOfN, run_search
from worldsample.policy import NumpyActor
from worldsample.sim import SimArmConfig


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


def state_critic(value=None, gamma: float = 0.97) -> Critic:
    """Q(s, a) = s[1] (or a constant): a critic that says which end states are better."""
    net = (lambda x, a: x[:, 1]) if value is None else (lambda x, a: np.full(len(x), value))
    return Critic(nets=[net], obs_keys=["state"], gamma=gamma)


def test_value_score_executes_the_chunk_whose_end_state_the_critic_rates_highest():
    base = actor(0.2, stochastic=True, log_std=-0.5)  # its own a1 is 0: the base chunk stays where it is
    model, critic, g, H = PointMass(step_size=0.1), state_critic(), 0.97, 3
    by_value = BestOfN(model, base, n=8, horizon=H, seed=0, score="value", critic=critic)
    by_success = BestOfN(model, base, n=8, horizon=H, seed=0)
    obs = observations(6)
    by_value.reset(obs[0])
    by_success.reset(obs[0])
    for o in obs:
        got = by_value.act(o)
        last = by_value.last
        # where each candidate ends, computed here from its actions: no success within the horizon,
        # so its score is gamma^H * Q(end) = gamma^H * end[1]
        end_s1 = o["state"][1] + 0.1 * last["actions"][:, :, 1].sum(axis=1)
        np.testing.assert_allclose(last["scores"], g**H * end_s1, rtol=1e-5, atol=1e-6)
        assert last["best"] == int(np.argmax(end_s1))
        np.testing.assert_array_equal(got, last["actions"][last["best"], 0])
        # success and return cannot tell the chunks apart here (no success, equal reward): base chunk
        np.testing.assert_array_equal(by_success.act(o), base.act(o))
    assert by_value.stats.chose_base == 0 and by_success.stats.chose_base == 6
    assert by_value.stats.to_dict()["mean_best_score"] > by_value.stats.to_dict()["mean_base_score"]


def test_value_score_n1_executes_the_base_policy():
    base = actor(-0.3, stochastic=True, log_std=0.5)
    obs = observations(5)
    planner = BestOfN(PointMass(), base, n=1, horizon=4, seed=0, score="value", critic=state_critic())
    np.testing.assert_array_equal(drive(planner, obs), np.stack([base.act(o) for o in obs]))
    assert planner.stats.chose_base == planner.stats.searched == 5


@pytest.mark.parametrize("q", [0.5, 2.0])
def test_value_score_does_not_bootstrap_past_a_success(q):
    """A success ends the chunk with return 1 (the learner's reward), an open chunk gets gamma^H * Q:
    with Q = 0.5 succeeding wins, with Q = 2 the critic's value beats the success."""
    base = actor(-0.3, stochastic=True, log_std=0.5)  # the rigged head: a0 above ~0.35 succeeds
    planner = BestOfN(rigged_model(), base, n=8, horizon=3, seed=0, score="value", critic=state_critic(q))
    got = drive(planner, observations(8))
    if q == 0.5:
        assert (got[:, 0] > 0.35).mean() >= 0.5
        assert planner.stats.chose_base < planner.stats.decisions
    else:  # every open chunk scores gamma^3 * 2 > 1: a tie among them, which goes to the (failing) base chunk
        np.testing.assert_allclose(planner.last["scores"][0], 0.97**3 * 2.0, rtol=1e-6)
        assert planner.stats.chose_base == planner.stats.decisions
        np.testing.assert_allclose(got[:, 0], -0.3, atol=1e-6)


def test_value_score_needs_a_critic_on_predicted_keys():
    with pytest.raises(ConfigError, match="critic"):
        BestOfN(PointMass(), actor(0.1, stochastic=True), n=2, horizon=2, score="value")
    with pytest.raises(ConfigError, match="proprio"):
        BestOfN(PointMass(), actor(0.1, stochastic=True), n=2, horizon=2, score="value",
                critic=Critic(nets=[lambda x, a: x[:, 0]], obs_keys=["proprio"]))
    with pytest.raises(ConfigError, match="score"):
        BestOfN(PointMass(), actor(0.1, stochastic=True), n=2, horizon=2, score="reward")
    assert STATE == 39


def action_critic(weights) -> Critic:
    """Q(s, a) = weights . a: a critic that prefers some actions, whatever the state."""
    w = np.asarray(weights, np.float32)
    return Critic(nets=[lambda x, a: a @ w], obs_keys=["state"])


@pytest.mark.parametrize("spread", [None, 0.3])
def test_critic_score_executes_the_first_action_the_critic_values_most_without_imagining(spread):
    """score=critic, the ablation of value: the candidates' first actions ranked by Q(s, a) at the real
    observation; the world model is never stepped."""
    base = actor(-0.3, stochastic=spread is None, log_std=0.5)
    model = PointMass()
    steps = []
    step = model.step
    model.step = lambda *a, **kw: steps.append(1) or step(*a, **kw)
    planner = BestOfN(model, base, n=8, horizon=5, seed=0, spread=spread, score="critic",
                      critic=action_critic([1.0, 0.0, 0.0, 0.0]))
    obs = observations(6)
    got = drive(planner, obs)
    assert steps == []
    last = planner.last
    np.testing.assert_allclose(last["scores"], last["actions"][:, 0, 0], rtol=1e-6)
    np.testing.assert_array_equal(got[-1], last["actions"][last["best"], 0])
    np.testing.assert_array_equal(last["actions"][0, 0], base.act(obs[-1]))  # candidate 0: the base action
    assert all(g[0] > -0.3 for g in got) and planner.stats.chose_base == 0
    # a critic that cannot tell the actions apart keeps the base action (ties go to the base)
    flat = BestOfN(model, base, n=8, horizon=5, seed=0, spread=spread, score="critic", critic=action_critic([0.0] * 4))
    np.testing.assert_array_equal(drive(flat, obs), np.stack([base.act(o) for o in obs]))
    with pytest.raises(ConfigError, match="critic"):
        BestOfN(model, base, n=8, horizon=5, spread=spread, score="critic")
