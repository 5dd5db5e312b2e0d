"""Branches that follow the policy (synth.actions=policy, MBPO-style): the newest exported policy acts
on what the world model imagines, step by step, from real branch points."""

import numpy as np
import pytest
import torch

from tests.evaluation.helpers import make_run
from tests.synth.helpers import ACTION_DIM, HIGH, LOW, imaginer, state_store
from worldsample.errors import ConfigError
from worldsample.loop.config import LoopConfig
from worldsample.loop.synthesis import Synthesis
from worldsample.policy import NumpyActor, ObsInput, PolicyConfig
from worldsample.synth import SynthConfig
from worldsample.synth.synthesiser import Synthesiser

H = 5
OPEN = {"horizon": H, "context": 2, "max_uncertainty": None, "bounds_margin": 5.0, "success_threshold": 0.999}


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def linear_actor(key="state", dim=3, actions=ACTION_DIM, log_std=-5.0, seed=0) -> NumpyActor:
    """a = tanh(W obs + b), W large enough that the action follows the observation; a tiny spread."""
    rng = np.random.default_rng(seed)
    cfg = PolicyConfig(obs=[ObsInput(key=key, dim=dim)], action_dim=actions, hidden=[], stochastic=True,
                       action_low=[-1.0] * actions, action_high=[1.0] * actions, version=3)
    return NumpyActor(cfg, {"mean.weight": rng.normal(0, 3.0, (actions, dim)).astype(np.float32),
                            "mean.bias": np.zeros(actions, np.float32),
                            "log_std.weight": np.zeros((actions, dim), np.float32),
                            "log_std.bias": np.full(actions, log_std, np.float32)})


def test_a_closed_loop_rollout_is_the_open_loop_rollout_of_what_the_policy_did():
    im = imaginer(spread=0.3, ensemble=2)
    rng = np.random.default_rng(1)
    ctx = {"state": rng.uniform(0, 1, (4, 2, 3)).astype(np.float32)}
    past = rng.uniform(-1, 1, (4, 1, ACTION_DIM)).astype(np.float32)
    shown = []

    def policy(obs, t):
        shown.append(obs["state"].copy())
        return np.tanh(3.0 * obs["state"][:, :2] - 0.1 * t)

    got = im.rollout(ctx, context_actions=past, seed=5, uncertainty=True, policy=policy, horizon=6)
    np.testing.assert_array_equal(shown[0], ctx["state"][:, -1])  # first the last real frame
    for t in range(1, 6):  # then each step's imagined observation, as the frames store it
        np.testing.assert_array_equal(shown[t], got.frames["state"][:, t - 1])
    np.testing.assert_allclose(got.actions, np.tanh(3.0 * np.stack(shown, 1)[..., :2] - 0.1 * np.arange(6)[:, None]),
                               atol=1e-6)
    want = im.rollout(ctx, got.actions, context_actions=past, seed=5, uncertainty=True)
    np.testing.assert_allclose(got.frames["state"], want.frames["state"], atol=1e-5)
    for k in ("reward", "success", "done", "uncertainty"):
        np.testing.assert_allclose(getattr(got, k), getattr(want, k), atol=1e-5)
    assert np.abs(np.diff(got.actions, axis=1)).max() > 1e-2, "the policy reacted to what it saw"
    with pytest.raises(ValueError, match="either actions"):
        im.rollout(ctx, got.actions, policy=policy, horizon=6)


def _written(store):
    r = store.reader("synthetic")
    return [r.episode(rec.episode) for rec in r.episode_records()]


def _gap(eps, actor):
    """Largest distance between a written action and the policy's own action on that step's observation."""
    return max(np.abs(ep["action"][t] - actor.act({"state": ep["state"][t]})).max()
               for ep in eps for t in range(len(ep["action"])))


def test_policy_branches_act_on_what_the_world_model_imagines(tmp_path):
    actor = linear_actor()
    store = state_store(tmp_path / "p")
    st = Synthesiser(store, imaginer(0.05), SynthConfig(**OPEN, actions="policy"), LOW, HIGH).generate(
        8, wm_version=1, actor=actor)
    eps = _written(store)
    assert st.written == len(eps) == 8 and all(len(ep["action"]) == H + 1 for ep in eps)
    assert _gap(eps, actor) < 0.05  # the policy's action on each imagined observation (its spread is tiny)
    assert max(np.abs(ep["state"][1:] - ep["state"][:1]).max() for ep in eps) > 1e-3  # it did see new states
    old = state_store(tmp_path / "o")  # logged actions, perturbed: not the policy's
    Synthesiser(old, imaginer(0.05), SynthConfig(**OPEN), LOW, HIGH).generate(8, wm_version=1, actor=actor)
    assert _gap(_written(old), actor) > 0.3


def test_the_policy_samples_with_its_own_spread_reproducibly(tmp_path):
    wide = linear_actor(log_std=0.0)
    runs = []
    for name in ("a", "b"):
        store = state_store(tmp_path / name)
        Synthesiser(store, imaginer(0.05), SynthConfig(**OPEN, actions="policy"), LOW, HIGH).generate(
            4, wm_version=1, actor=wide)
        runs.append(np.concatenate([ep["action"] for ep in _written(store)]))
    np.testing.assert_array_equal(runs[0], runs[1])  # the synthesiser's seed draws the samples
    assert _gap(_written(store), wide) > 0.1  # sampled, not the mean


def test_policy_branches_need_a_policy_that_fits_the_world_model(tmp_path):
    synth = Synthesiser(state_store(tmp_path), imaginer(0.05), SynthConfig(**OPEN, actions="policy"), LOW, HIGH)
    with pytest.raises(ConfigError, match="needs the policy"):
        synth.generate(4, wm_version=1)
    with pytest.raises(ConfigError, match="reads proprio"):
        synth.generate(4, wm_version=1, actor=linear_actor(key="proprio"))


def test_the_loop_branches_with_the_newest_exported_policy(tmp_path):
    run = make_run(tmp_path / "run", a0s=(-0.8, 0.6), stochastic=True)  # versions 1 and 2, a0 = tanh(b0)
    loop = LoopConfig.model_validate({"synth_branches": 6, "synth": {**OPEN, "actions": "policy", "ratio": 100.0}})
    synth = Synthesis(run, loop, -np.ones(4, np.float32), np.ones(4, np.float32))
    row = synth.generate()
    assert row["synth/policy_version"] == 2.0 and row["synth/written"] == 6.0
    from worldsample.store import EpisodeStore

    r = EpisodeStore(run).reader("synthetic")
    a0 = np.concatenate([r.episode(rec.episode)["action"][:, 0] for rec in r.episode_records()])
    assert abs(a0.mean() - 0.6) < 0.2  # version 2's action (spread exp(0) before the squash)


def test_without_an_exported_policy_the_loop_writes_no_branches(tmp_path):
    run = make_run(tmp_path / "run", a0s=())
    loop = LoopConfig.model_validate({"synth": {**OPEN, "actions": "policy"}})
    row = Synthesis(run, loop, -np.ones(4, np.float32), np.ones(4, np.float32)).generate()
    assert row == {"synth/no_policy": 1.0}
