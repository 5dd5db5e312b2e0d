"""Scoring on the simulated arm: the loop's own Evaluator agrees, a successful controller ends its
episodes at the success, and the sim starts are the arm's resets at the evaluation seeds."""

import numpy as np
import pytest

from tests.evaluation.helpers import make_run
from worldsample.errors import ConfigError
from worldsample.evaluation.real import eval_env, run_episodes, score_real
from worldsample.evaluation.starts import eval_seed0, sim_starts
from worldsample.loop.config import LoopConfig
from worldsample.loop.robot import Evaluator
from worldsample.policy import load_actor
from worldsample.sim import ScriptedExpert, SimArmConfig

ENV = SimArmConfig(cameras=[], max_episode_steps=6)


def test_score_real_agrees_with_the_loops_evaluator(tmp_path):
    make_run(tmp_path)
    got = score_real(load_actor(tmp_path, 4), ENV, episodes=2)
    ev = Evaluator(tmp_path, ENV, LoopConfig())
    try:
        want = ev.evaluate(2, eval_seed0())  # the latest version, v4, from the same seeds
    finally:
        ev.close()
    assert want["policy_version"] == got.version == 4 and got.seed0 == eval_seed0() == 10_000
    assert (got.success_rate, got.mean_length, got.episodes) == (want["success_rate"], want["mean_length"], 2)


def test_success_ends_the_episode_and_counts():
    env = eval_env(SimArmConfig(cameras=[], max_episode_steps=150))
    try:
        expert = ScriptedExpert(env)
        eps = run_episodes(env, lambda obs: expert.nominal_action(), [eval_seed0()])
    finally:
        env.close()
    assert eps[0]["success"] and eps[0]["length"] < 150 and eps[0]["seed"] == 10_000


def test_sim_starts_are_the_evaluation_resets():
    st = sim_starts(ENV, ["state"], 2)
    assert st.seeds == [10_000, 10_001] and st.origin == ["sim/10000", "sim/10001"]
    env = eval_env(ENV)
    try:
        obs, _ = env.reset(seed=10_001)
    finally:
        env.close()
    np.testing.assert_array_equal(st.obs["state"][1], obs["state"])
    assert not np.array_equal(st.obs["state"][0], st.obs["state"][1])
    with pytest.raises(ConfigError, match="cannot give"):
        sim_starts(ENV, ["image_nowhere"], 1)


def test_given_real_scores_are_not_measured_again(tmp_path, monkeypatch):
    """A benchmark comparing world models on the same checkpoints runs the arm once."""
    from worldsample.evaluation import policies

    make_run(tmp_path)
    first = policies.evaluate_policies(tmp_path, [1, 4], starts="sim", n_starts=2, horizon=2, episodes=2, env_cfg=ENV)
    given = {v: score_real(load_actor(tmp_path, v), ENV, episodes=2) for v in (1, 4)}

    def no_arm(*a, **k):
        raise AssertionError("the arm was run again")

    monkeypatch.setattr(policies, "eval_env", no_arm)
    monkeypatch.setattr(policies, "score_real", no_arm)
    again = policies.evaluate_policies(tmp_path, [1, 4], starts="sim", n_starts=2, horizon=2, env_cfg=ENV,
                                       real_scores=given)
    assert again["real"] == {f"v{v}": s.to_dict() for v, s in given.items()} and again["real_episodes"] == 2
    assert {k: first["real"][k]["success_rate"] for k in first["real"]} == {
        k: again["real"][k]["success_rate"] for k in again["real"]}
    assert again["metrics"] == first["metrics"]
