"""Policy registry: atomic versions, validation on load, numpy inference equal to torch."""

import json

import numpy as np
import pytest

from robot_bridge.core.policy_source import PolicySource
from worldsample.policy import NumpyActor, ObsInput, PolicyConfig, PolicyError, PolicyRegistry, load_actor


def config(**kw):
    base = dict(obs=[ObsInput(key="proprio", dim=4), ObsInput(key="state", dim=39)], action_dim=4, hidden=[32, 16],
                action_low=[-1] * 4, action_high=[1] * 4)
    return PolicyConfig(**{**base, **kw})


def random_tensors(cfg, seed=0):
    rng = np.random.default_rng(seed)
    t = {k: rng.normal(0, 0.3, s).astype(np.float32) for k, s in cfg.tensor_shapes().items()}
    if cfg.obs_normalization:
        t["obs_std"] = np.abs(t["obs_std"]) + 0.5
    return t


def test_obs_clip_bounds_what_the_trunk_sees():
    with pytest.raises(ValueError, match="obs_clip needs obs_normalization"):
        config(obs_clip=5.0)
    cfg = config(obs_normalization=True, obs_clip=1.0)
    t = {**random_tensors(cfg), "obs_mean": np.zeros(43, np.float32), "obs_std": np.ones(43, np.float32)}
    near = {"proprio": np.full(4, 1.0, np.float32), "state": np.full(39, -1.0, np.float32)}
    far = {"proprio": np.full(4, 50.0, np.float32), "state": np.full(39, -50.0, np.float32)}
    actor = NumpyActor(cfg, t)
    np.testing.assert_array_equal(actor.act(far), actor.act(near))
    assert not np.array_equal(NumpyActor(config(obs_normalization=True), t).act(far), actor.act(near))


def test_publish_load_latest(tmp_path):
    reg = PolicyRegistry(tmp_path)
    assert reg.latest_version() is None
    cfg = config()
    v1 = reg.publish(cfg, random_tensors(cfg, 1))
    v2 = reg.publish(cfg, random_tensors(cfg, 2))
    assert (v1, v2) == (1, 2) and reg.latest_version() == 2 and reg.versions() == [1, 2]
    assert (tmp_path / "policies" / "latest").read_text().strip() == "v000002"
    loaded_cfg, tensors = reg.load()
    assert loaded_cfg.version == 2
    np.testing.assert_array_equal(tensors["mean.bias"], random_tensors(cfg, 2)["mean.bias"])
    assert not list((tmp_path / "policies").glob(".tmp-*"))


@pytest.mark.parametrize("norm", [False, True, "clip"])
@pytest.mark.parametrize("act", ["relu", "tanh", "elu", "silu"])
def test_numpy_actor_matches_torch(tmp_path, norm, act):
    torch = pytest.importorskip("torch")
    from worldsample.policy.actor import MLPActor

    cfg = config(obs_normalization=bool(norm), obs_clip=0.3 if norm == "clip" else None, activation=act,
                 action_low=[-1, -2, 0, -1], action_high=[1, 2, 1, 3])
    actor = MLPActor(cfg)
    if norm:
        actor.obs_std.fill_(2.0)
        actor.obs_mean.fill_(0.1)
    PolicyRegistry(tmp_path).publish(cfg, actor.export_tensors())
    np_actor = load_actor(tmp_path)
    rng = np.random.default_rng(0)
    for _ in range(5):
        obs = {"proprio": rng.normal(size=4).astype(np.float32), "state": rng.normal(size=39).astype(np.float32)}
        x = torch.from_numpy(np.concatenate([obs["proprio"], obs["state"]]))
        with torch.no_grad():
            want = actor(x).numpy()
        np.testing.assert_allclose(np_actor.act(obs), want, rtol=1e-5, atol=1e-5)


def test_rejects_wrong_shapes_and_configs(tmp_path):
    reg = PolicyRegistry(tmp_path)
    cfg = config()
    t = random_tensors(cfg)
    bad = dict(t, **{"mean.weight": np.zeros((4, 5), np.float32)})
    with pytest.raises(PolicyError, match="mean.weight"):
        reg.publish(cfg, bad)
    reg.publish(cfg, t)
    vdir = tmp_path / "policies" / "v000001"
    c = json.loads((vdir / "config.json").read_text())
    (vdir / "config.json").write_text(json.dumps({**c, "hidden": [33, 16]}))
    with pytest.raises(PolicyError, match="trunk.0"):
        reg.load()
    (vdir / "config.json").write_text(json.dumps({**c, "evil": 1}))
    with pytest.raises(PolicyError, match="invalid"):
        reg.load()
    (vdir / "config.json").write_text(json.dumps(c))
    (vdir / "actor.safetensors").write_bytes(b"\x80\x04garbage-not-safetensors")
    with pytest.raises(PolicyError, match="cannot read"):
        reg.load()
    (tmp_path / "policies" / "latest").write_text("../../etc")
    with pytest.raises(PolicyError, match="expected a version"):
        reg.latest_version()


def test_nan_weights_rejected(tmp_path):
    cfg = config()
    t = random_tensors(cfg)
    t["trunk.0.bias"][0] = np.nan
    with pytest.raises(PolicyError, match="NaN"):
        PolicyRegistry(tmp_path).publish(cfg, t)


def test_check_obs(tmp_path):
    cfg = config()
    actor = NumpyActor(cfg.model_copy(update={"version": 3}), random_tensors(cfg))
    actor.check_obs({"proprio": (4,), "state": (39,)})
    with pytest.raises(PolicyError, match="state"):
        actor.check_obs({"proprio": (4,)})


def test_policy_source_swaps_only_to_working_versions(tmp_path):
    reg = PolicyRegistry(tmp_path)
    src = PolicySource(tmp_path, {"proprio": (4,), "state": (39,)}, action_dim=4)
    hold = np.full(4, 0.25, np.float32)
    assert src.refresh() is False and src.version is None and src.error is None  # nothing published yet
    np.testing.assert_array_equal(src.act({}, hold), hold)
    cfg = config()
    reg.publish(cfg, random_tensors(cfg, 1))
    assert src.refresh() is True and src.version == 1 and src.refresh() is False
    wide = config(action_dim=5, action_low=[-1] * 5, action_high=[1] * 5)
    reg.publish(wide, random_tensors(wide, 2))  # valid in itself, but not for this robot
    for _ in range(2):  # tried again at each refresh, never taken
        assert src.refresh() is False and src.version == 1 and "outputs 5 actions" in src.error
    (tmp_path / "policies" / "latest").write_text("nonsense")
    assert src.refresh() is False and src.version == 1 and "expected a version" in src.error
    reg.publish(cfg, random_tensors(cfg, 3))
    assert src.refresh() is True and src.version == 3 and src.error is None and src.swaps == 2
    obs = {"proprio": np.zeros(4, np.float32), "state": np.zeros(39, np.float32)}
    np.testing.assert_array_equal(src.act(obs, hold), load_actor(tmp_path, 3).act(obs))


def test_sampled_actions_are_the_squashed_distribution():
    cfg = config(stochastic=True)
    actor = NumpyActor(cfg, random_tensors(cfg, 3))
    rng = np.random.default_rng(1)
    obs = {"proprio": rng.normal(size=4).astype(np.float32), "state": rng.normal(size=39).astype(np.float32)}
    mean, log_std = actor.distribution(obs)
    assert np.all((log_std >= -5.0) & (log_std <= 2.0))
    np.testing.assert_allclose(actor.act(obs), np.tanh(mean), rtol=0, atol=1e-6)
    noise = np.random.default_rng(7).standard_normal(4)
    sampled = actor.act(obs, explore=True, rng=np.random.default_rng(7))
    np.testing.assert_allclose(sampled, np.tanh(mean + np.exp(log_std) * noise), rtol=0, atol=1e-6)
    narrow = actor.act(obs, explore=True, rng=np.random.default_rng(7), noise_scale=0.25)
    np.testing.assert_allclose(narrow, np.tanh(mean + 0.25 * np.exp(log_std) * noise), rtol=0, atol=1e-6)
    with pytest.raises(PolicyError, match="no spread"):
        NumpyActor(config(), random_tensors(config())).distribution(obs)


def test_policy_source_explores_with_the_profiles_scale(tmp_path):
    reg = PolicyRegistry(tmp_path)
    cfg = config(stochastic=True)
    reg.publish(cfg, random_tensors(cfg, 3))
    obs = {"proprio": np.full(4, 0.3, np.float32), "state": np.full(39, -0.2, np.float32)}
    hold = np.zeros(4, np.float32)
    actor = load_actor(tmp_path)
    mean, log_std = actor.distribution(obs)
    for scale in (1.0, 0.2):
        src = PolicySource(tmp_path, {"proprio": (4,), "state": (39,)}, action_dim=4, explore=True,
                           explore_scale=scale)
        assert src.refresh() is True
        src._rng = np.random.default_rng(3)
        noise = np.random.default_rng(3).standard_normal(4)
        np.testing.assert_allclose(src.act(obs, hold), np.tanh(mean + scale * np.exp(log_std) * noise), atol=1e-6)
    # the profile carries it, bounded as the loop's own setting is
    from robot_bridge.profile import EpisodeSpec
    assert EpisodeSpec(explore=True, explore_scale=0.3).explore_scale == 0.3
    with pytest.raises(ValueError):
        EpisodeSpec(explore=True, explore_scale=0.0)
