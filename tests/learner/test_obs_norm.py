"""learner.obs_norm: actor and critics (`all`) or the critics only (`critics`) see the demonstrations'
standardised observations, clipped; with `all` the exported policy carries the statistics, so the
robot's actor computes what the learner's does."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from worldsample.learner import LearnerConfig, sac
from worldsample.learner.export import export_actor
from worldsample.loop.config import LoopConfig
from worldsample.policy import load_actor

from ..store.helpers import make_episode, new_store

B = 32
MEAN = np.array([0.5, 0.7, -0.2], np.float32)
STD = np.array([0.05, 0.01, 2.0], np.float32)  # the middle one below the floor


def agent(stats=None, **kw):
    torch.manual_seed(0)
    cfg = LearnerConfig(obs_keys=["proprio"], hidden=[32, 32], batch_size=B, critic_warmup_updates=0, **kw)
    return sac.SACAgent(cfg, 3, gym.spaces.Box(-1, 1, (2,), np.float32), obs_stats=stats)


def by_hand(x: np.ndarray) -> np.ndarray:
    return np.clip((x - MEAN) / np.maximum(STD, 0.05), -5.0, 5.0).astype(np.float32)


def batch(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "obs/proprio": (MEAN + STD * rng.normal(size=(B, 3)) * 3).astype(np.float32),
        "next_obs/proprio": (MEAN + STD * rng.normal(size=(B, 3)) * 3).astype(np.float32),
        "action": rng.uniform(-1, 1, (B, 2)).astype(np.float32),
        "reward": rng.uniform(0, 1, B).astype(np.float32),
        "done": np.zeros(B, bool),
        "n_step": np.ones(B, np.int64),
    }


def normalised(b: dict) -> dict:
    return {**b, "obs/proprio": by_hand(b["obs/proprio"]), "next_obs/proprio": by_hand(b["next_obs/proprio"])}


def test_the_networks_see_the_clipped_standardised_observation_and_the_export_carries_it(tmp_path):
    norm, plain = agent((MEAN, STD), obs_norm="all"), agent()
    for seed in range(3):  # the same steps: one agent on raw batches, the other on batches normalised by hand
        torch.manual_seed(seed)
        norm.update(batch(seed))
        torch.manual_seed(seed)
        plain.update(normalised(batch(seed)))
    probe = batch(9)
    np.testing.assert_allclose(norm.q_values(probe), plain.q_values(normalised(probe)), atol=1e-5)
    rng = np.random.default_rng(1)
    far = [MEAN + STD * rng.normal(size=3) * 50 for _ in range(3)]  # well past the clip
    for x in [MEAN + STD * rng.normal(size=3) for _ in range(3)] + far:
        np.testing.assert_allclose(norm.act({"proprio": x}), plain.act({"proprio": by_hand(x)}), atol=1e-5)

    export_actor(norm, tmp_path, {"proprio": 3})
    actor = load_actor(tmp_path)
    assert actor.config.obs_normalization and actor.config.obs_clip == 5.0
    for x in far + [MEAN]:
        np.testing.assert_allclose(actor.act({"proprio": x}), norm.act({"proprio": x}), atol=1e-5)


def test_without_obs_norm_nothing_is_normalised_or_exported(tmp_path):
    a = agent()
    assert a.obs_mean is None
    export_actor(a, tmp_path, {"proprio": 3})
    assert not load_actor(tmp_path).config.obs_normalization


@pytest.mark.parametrize("critics", [2, 4])
def test_with_critics_only_the_critics_see_the_standardised_observation_and_their_state_keeps_it(tmp_path, critics):
    norm, plain = agent((MEAN, STD), obs_norm="critics", critics=critics), agent(critics=critics)
    probe = batch(9)
    np.testing.assert_allclose(norm.q_values(probe), plain.q_values(normalised(probe)), atol=1e-5)
    x = MEAN + STD * 3
    np.testing.assert_allclose(norm.act({"proprio": x}), plain.act({"proprio": x}), atol=1e-6)  # the actor: raw
    for seed in range(2):
        norm.update(batch(seed))
    export_actor(norm, tmp_path, {"proprio": 3})
    actor = load_actor(tmp_path)
    assert not actor.config.obs_normalization
    np.testing.assert_allclose(actor.act({"proprio": x}), norm.act({"proprio": x}), atol=1e-5)

    # a resumed learner built from other statistics takes the run's own back with the module's state
    resumed = agent((MEAN + 1.0, STD * 3), obs_norm="critics", critics=critics)
    assert not np.allclose(resumed.q_values(probe), norm.q_values(probe), atol=1e-3)
    resumed.group.set_state(norm.group.get_state())
    np.testing.assert_allclose(resumed.q_values(probe), norm.q_values(probe), atol=1e-6)


def test_bad_statistics_and_settings_are_refused():
    with pytest.raises(ValueError, match="needs the observation statistics"):
        agent(obs_norm="all")
    with pytest.raises(ValueError, match="3 dimensions"):
        agent((np.zeros(4), np.ones(4)), obs_norm="critics")
    with pytest.raises(ValueError, match="finite"):
        agent((np.zeros(3), np.array([1.0, np.nan, 1.0])), obs_norm="all")
    with pytest.raises(ValueError, match="critic: mlp"):
        LearnerConfig(obs_norm="critics", critic="rllib")


def _loop(**learner) -> LoopConfig:
    return LoopConfig(learner=LearnerConfig(obs_keys=["proprio"], hidden=[16, 16], batch_size=8,
                                            bc_pretrain_steps=0, **learner))


def test_the_run_takes_the_statistics_from_its_demos_and_a_resume_keeps_them(tmp_path):
    from worldsample.loop.learning import Learning

    store = new_store(tmp_path, group="demo")
    store.ensure_group("real", store.schema("demo"))
    episodes = [make_episode(s, 12) for s in (1, 2)]
    with store.writer("demo") as w:
        for ep in episodes:
            w.append_episode(ep)
    demo = np.concatenate([ep["proprio"] for ep in episodes])
    low, high = -np.ones(2, np.float32), np.ones(2, np.float32)
    first = Learning(tmp_path, _loop(obs_norm="all"), {"proprio": 3}, low, high)
    np.testing.assert_allclose(first.agent.obs_mean, demo.mean(0), rtol=1e-5)
    np.testing.assert_allclose(first.agent.obs_std, np.maximum(demo.std(0), 0.05), rtol=1e-5)
    state = first.state()

    with store.writer("demo") as w:  # a demo recorded after the run began does not move its statistics
        w.append_episode({**make_episode(3, 12), "proprio": np.full((12, 3), 40.0, np.float32)})
    resumed = Learning(tmp_path, _loop(obs_norm="all"), {"proprio": 3}, low, high)
    assert not np.allclose(resumed.agent.obs_mean, first.agent.obs_mean)
    resumed.load_state(state)
    np.testing.assert_array_equal(resumed.agent.obs_mean, first.agent.obs_mean)
    np.testing.assert_array_equal(resumed.agent.obs_std, first.agent.obs_std)
    assert Learning(tmp_path, _loop(), {"proprio": 3}, low, high).agent.obs_mean is None
