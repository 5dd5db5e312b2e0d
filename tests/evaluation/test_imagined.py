"""Policies closed loop in the world model: the engine against the library's Imaginer, the score's
bookkeeping on a world model whose heads are set by hand, reproducibility under a seed."""

import dataclasses

import numpy as np
import pytest

from tests.evaluation.helpers import make_run, policy_tensors, rigged_model
from tests.synth.helpers import imaginer as random_imaginer
from worldsample.errors import ConfigError
from worldsample.evaluation.imagined import ClosedLoop, load_world_model, score_policy
from worldsample.evaluation.recommend import recommend
from worldsample.evaluation.starts import Starts, heldout_starts
from worldsample.policy import NumpyActor, ObsInput, PolicyConfig, PolicyRegistry, load_actor
from worldsample.store import EpisodeStore


def starts(n=3, seed=0):
    return Starts({"state": np.random.default_rng(seed).normal(0, 0.1, (n, 39)).astype(np.float32)},
                  [f"test/{i}" for i in range(n)])


def actor(a0, **kw):
    cfg, t = policy_tensors(a0, **kw)
    return NumpyActor(cfg.model_copy(update={"version": 1}), t)


def test_closed_loop_matches_the_imaginer_open_loop():
    im = random_imaginer(spread=0.3)
    heads = im.model.cfg.heads.model_copy(update={"success_threshold": 0.9999, "done_threshold": 0.9999})
    im.model.cfg = im.model.cfg.model_copy(update={"heads": heads})  # no row ends: every step compares
    rng = np.random.default_rng(1)
    ctx = {"state": rng.uniform(0, 1, (4, 1, 3)).astype(np.float32)}
    acts = rng.uniform(-1, 1, (4, 6, 2)).astype(np.float32)
    want = im.rollout(ctx, acts, seed=3)
    got = ClosedLoop(im.model).run(ctx, lambda obs, t: acts[:, t], 6, seed=3, record_obs=True)
    np.testing.assert_allclose(got.obs["state"], want.frames["state"], atol=1e-5)
    np.testing.assert_allclose(got.reward, want.reward, atol=1e-6)
    np.testing.assert_allclose(got.success_prob, want.success, atol=1e-6)
    assert np.abs(got.obs["state"][:, -1] - ctx["state"][:, 0]).max() > 1e-3  # the model did move


def test_success_return_and_length_from_the_heads():
    model = rigged_model(reward=0.5)
    win = score_policy(model, actor(0.9), starts(), horizon=7)
    assert (win.success_rate, win.mean_length, win.mean_return, win.samples) == (1.0, 1.0, pytest.approx(0.5), 1)
    lose = score_policy(model, actor(-0.8), starts(), horizon=7)
    assert (lose.success_rate, lose.mean_length, lose.mean_return) == (0.0, 7.0, pytest.approx(3.5))
    assert lose.success_prob < 0.5 < win.success_prob
    assert win.per_start_success == [1.0, 1.0, 1.0]
    ends = score_policy(rigged_model(done_logit=8.0), actor(-0.8), starts(), horizon=7)  # done ends it, no success
    assert (ends.success_rate, ends.mean_length) == (0.0, 1.0)


def test_the_score_ranks_policies_and_the_recommended_version_exists(tmp_path):
    run = make_run(tmp_path, a0s=(-0.8, 0.1, 0.6, 0.9))
    model, wm_version = load_world_model(run)
    st = heldout_starts(run, ["state"], 5, holdout_every=5)
    versions = PolicyRegistry(run).versions()
    scores = {v: score_policy(model, load_actor(run, v), st, horizon=5, wm_version=wm_version) for v in versions}
    assert [scores[v].success_rate for v in versions] == [0.0, 0.0, 1.0, 1.0]
    probs = [scores[v].success_prob for v in versions]
    assert probs == sorted(probs) and probs[0] < probs[-1]
    best = recommend({v: s.key for v, s in scores.items()}, versions)
    assert best == 4 and best in versions
    with pytest.raises(ConfigError, match="none of the scored versions"):
        recommend({v + 10: s.key for v, s in scores.items()}, versions)


def test_heldout_starts_are_first_observations_of_heldout_episodes(tmp_path):
    run = make_run(tmp_path)
    st = heldout_starts(run, ["state"], 5, holdout_every=5)
    assert st.origin == ["real/9", "real/4"]
    reader = EpisodeStore(run).reader("real")
    np.testing.assert_array_equal(st.obs["state"][1], reader.episode(4)["state"][0])
    with pytest.raises(ConfigError, match="no held-out episode"):
        heldout_starts(run, ["state"], 5, holdout_every=50)


def test_reproducible_under_a_seed_with_a_stochastic_model():
    model = rigged_model(kind="diffusion")
    loop = ClosedLoop(model)
    ctx = {"state": starts(2).obs["state"][:, None]}

    def policy(obs, t):  # reads what it imagines, so a different future shows in the actions
        return np.tanh(5 * obs["state"][:, :4] - 1.0)

    a = loop.run(ctx, policy, 5, seed=11)
    b = loop.run(ctx, policy, 5, seed=11)
    c = loop.run(ctx, policy, 5, seed=12)
    np.testing.assert_array_equal(a.actions, b.actions)
    assert not np.array_equal(a.actions, c.actions)
    s1 = score_policy(model, actor(0.6), starts(2), horizon=3, seed=5)
    s2 = score_policy(model, actor(0.6), starts(2), horizon=3, seed=5)
    assert s1.samples == 4  # a stochastic generator: several futures per start
    assert dataclasses.replace(s1, seconds=0) == dataclasses.replace(s2, seconds=0)


def test_a_policy_the_world_model_cannot_feed_is_refused():
    cfg = PolicyConfig(obs=[ObsInput(key="proprio", dim=4)], action_dim=4, hidden=[], action_low=[-1] * 4,
                       action_high=[1] * 4, version=2)
    bad = NumpyActor(cfg, {"mean.weight": np.zeros((4, 4), np.float32), "mean.bias": np.zeros(4, np.float32)})
    with pytest.raises(ConfigError, match="reads proprio"):
        score_policy(rigged_model(), bad, starts(), horizon=3)
    with pytest.raises(ConfigError, match="horizon"):
        score_policy(rigged_model(), actor(0.5), starts(), horizon=0)


def test_the_rollout_stops_when_asked_or_when_every_row_ended():
    """ClosedLoop is the Imaginer's closed-loop rollout: `before_step` stops it (not completed), and
    it stops after the step at which the last row ended, whatever the horizon."""
    model = rigged_model()
    ctx = {"state": starts(3).obs["state"][:, None]}
    calls = []

    def policy(obs, t):
        calls.append(t)
        return np.tile([0.9 if t >= 2 else -0.8, 0, 0, 0], (len(obs["state"]), 1)).astype(np.float32)

    res = ClosedLoop(model).run(ctx, policy, 9)  # loses twice, then succeeds at step 3 in every row
    assert calls == [0, 1, 2] and res.completed and res.success.all() and res.ended.all()
    assert res.length.tolist() == [3, 3, 3] and res.actions.shape == (3, 3, 4)
    calls.clear()
    cut = ClosedLoop(model).run(ctx, policy, 9, before_step=lambda t: t < 2)
    assert calls == [0, 1] and not cut.completed and not cut.success.any() and not cut.ended.any()
    none = ClosedLoop(model).run(ctx, policy, 9, before_step=lambda t: False)
    assert not none.completed and none.length.tolist() == [0, 0, 0] and none.actions.shape == (3, 0, 4)
    np.testing.assert_array_equal(none.final_obs["state"], ctx["state"][:, 0])
    with pytest.raises(ValueError, match="closed-loop"):
        ClosedLoop(model).imaginer.rollout(ctx, np.zeros((3, 2, 4), np.float32), until_end=True)
