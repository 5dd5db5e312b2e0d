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


def test_the_collector_anneals_its_scale_by_committed_steps(tmp_path):
    """`loop.explore_scale_end`: the lock-step arm's episodes sample with the scale the committed real steps
    give at their start, and a collector opened again on the run (a resume) goes on from the store's count."""
    from worldsample.loop.robot import SimCollector

    cfg = load_config(None, ["loop.explore_scale_end=0.2", "loop.explore_anneal=[0.0,0.5]", "loop.real_steps=300",
                             "loop.interventions=false", "env.max_episode_steps=150", "loop.seed=5"])
    col = SimCollector(tmp_path, cfg.env, cfg.loop, cfg.intervention)
    col.policy = _actor()
    scales = []
    for seed in range(2):
        col.episode(seed)
        scales.append(col.noise_scale)
    col.close()
    assert scales[0] == 1.0 and col.committed >= 150 and scales[1] == pytest.approx(0.2), (scales, col.committed)
    again = SimCollector(tmp_path, cfg.env, cfg.loop, cfg.intervention)
    assert again.committed == col.committed
    again.close()
    assert [cfg.loop.explore_scale_at(n) for n in (0, 75, 150, 1000)] == pytest.approx([1.0, 0.6, 0.2, 0.2])
    with pytest.raises(Exception, match="explore_anneal"):
        load_config(None, ["loop.explore_anneal=[0.6,0.5]"])
