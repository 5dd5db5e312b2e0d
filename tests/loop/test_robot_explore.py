"""The simulated arm's collector samples with `loop.explore_scale` times the policy's spread."""

import numpy as np
import pytest

from worldsample.config import load_config
from worldsample.loop.robot import Evaluator
from worldsample.policy import NumpyActor, ObsInput, PolicyConfig


def _actor() -> NumpyActor:
    cfg = PolicyConfig(obs=[ObsInput(key="state", dim=39)], action_dim=4, hidden=[16], action_low=[-1] * 4,
                       action_high=[1] * 4, stochastic=True)
    rng = np.random.default_rng(0)
    return NumpyActor(cfg, {k: rng.normal(0, 0.3, s).astype(np.float32) for k, s in cfg.tensor_shapes().items()})


@pytest.mark.parametrize("scale", [1.0, 0.3])
def test_collecting_actions_use_the_loops_exploration_scale(tmp_path, scale):
    cfg = load_config(None, [f"loop.explore_scale={scale}", "loop.seed=5"])
    ev = Evaluator(tmp_path, cfg.env, cfg.loop)
    ev.policy = _actor()
    obs = {"state": np.linspace(-0.5, 0.5, 39).astype(np.float32)}
    mean, log_std = ev.policy.distribution(obs)
    noise = np.random.default_rng(5).standard_normal(4)
    np.testing.assert_allclose(ev._action(obs, explore=True), np.tanh(mean + scale * np.exp(log_std) * noise),
                               atol=1e-6)
    np.testing.assert_allclose(ev._action(obs, explore=False), np.tanh(mean), atol=1e-6)  # evaluation: the mean


def test_the_scale_is_bounded():
    with pytest.raises(Exception, match="explore_scale"):
        load_config(None, ["loop.explore_scale=0"])
    with pytest.raises(Exception, match="explore_scale"):
        load_config(None, ["loop.explore_scale=1.5"])
