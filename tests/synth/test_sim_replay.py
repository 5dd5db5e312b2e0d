"""The oracle imaginer (synth.imaginer=simulator): branches played on the simulated arm itself, from
the recorded reset seed and actions of each real episode, through the synthesiser's filters and pool."""

import numpy as np
import pytest
import torch

from worldsample.loop.config import LoopConfig
from worldsample.sim import ScriptedExpert
from worldsample.sim.config import ExpertConfig, SimArmConfig
from worldsample.sim.env import SimArmEnv
from worldsample.store import EpisodeStore, GroupSchema
from worldsample.synth import SynthConfig
from worldsample.synth.sim_replay import ReplayMismatch, SimReplay, SimReplaySynthesiser
from worldsample.world_model.config import WorldModelConfig
from worldsample.world_model.imagine import Imaginer
from worldsample.world_model.model import WorldModel

ARM = SimArmConfig(task="push-v3", cameras=[], max_episode_steps=150)
KEYS = ["proprio", "state"]
H = 6


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def _record(path, seeds=(3, 4), expert_noise=0.0, seed_in_record=True):
    """Scripted-expert episodes on the arm, stored as the lock-step collector stores them."""
    env = SimArmEnv(ARM)
    store = EpisodeStore(path, create=True)
    store.ensure_group("real", GroupSchema.from_spaces(env.observation_space, env.action_space))
    with store.writer("real") as w:
        for seed in seeds:
            obs, _ = env.reset(seed=seed)
            expert = ScriptedExpert(env, ExpertConfig(action_noise_std=expert_noise), seed=seed)
            ep = w.begin_episode()
            while True:
                action = expert.act()
                nobs, reward, terminated, truncated, info = env.step(action)
                ep.add_step({**obs, "action": action, "reward": np.float32(reward), "done": bool(terminated),
                             "intervention": False, "success": bool(info["success"])})
                obs = nobs
                if terminated or truncated:
                    break
            ep.commit(domain="real", extra={"seed": seed} if seed_in_record else {})
    env.close()
    return store


def _imaginer(store) -> Imaginer:
    schema = store.schema("real")
    cfg = WorldModelConfig.model_validate({
        "image_keys": [], "vector_keys": {k: schema.keys[k].shape[0] for k in KEYS}, "action_dim": 4,
        "autoencoder": {"vector_latent_dim": 2, "vector_grid": 2},
        "dynamics": {"history": 2, "width": 16, "blocks": 1, "cond_dim": 16},
    })
    return Imaginer(WorldModel(cfg).eval())


def test_replaying_an_episodes_actions_reproduces_its_observations(tmp_path):
    store = _record(tmp_path)
    r = store.reader("real")
    rec = r.episode_records()[1]
    data = r.episode(rec.episode)
    t = rec.length // 2
    replay = SimReplay(ARM, KEYS, horizon=H)
    frames, reward, success, done, played = replay.play(
        rec.extra["seed"], data["action"][:t], {k: data[k][t] for k in KEYS}, data["action"][t : t + H])
    np.testing.assert_array_equal(played, data["action"][t : t + H])
    for k in KEYS:  # frame i is the observation after action t + i: the stored observation at t + i + 1
        np.testing.assert_array_equal(frames[k], data[k][t + 1 : t + H + 1])
    np.testing.assert_array_equal(reward, data["reward"][t : t + H])
    np.testing.assert_array_equal(success, data["success"][t : t + H])
    replay.close()


def test_a_branch_point_the_arm_does_not_reproduce_is_refused(tmp_path):
    store = _record(tmp_path, seeds=(3,))
    data = store.reader("real").episode(0)
    replay = SimReplay(ARM, KEYS, horizon=H)
    wrong = {k: data[k][10] for k in KEYS}
    with pytest.raises(ReplayMismatch, match="not recorded by this simulated arm"):
        replay.play(4, data["action"][:10], wrong, data["action"][10 : 10 + H])  # another seed's start
    replay.close()


def test_an_episode_without_its_reset_seed_cannot_be_replayed(tmp_path):
    store = _record(tmp_path, seeds=(3,), seed_in_record=False)
    synth = SimReplaySynthesiser(store, _imaginer(store), SynthConfig(horizon=H, context=2), -np.ones(4),
                                 np.ones(4), env_cfg=ARM)
    with pytest.raises(ReplayMismatch, match="no reset seed"):
        synth.generate(2, wm_version=1)
    synth.close()


def test_oracle_branches_are_the_arms_own_counterfactuals(tmp_path):
    """Every written branch starts at its real source state, its observations are what the arm does
    under the branch's (perturbed) actions, and a branch that reaches the goal ends there, labelled
    by the arm: success, done, and the success pool fed."""
    store = _record(tmp_path)
    cfg = SynthConfig(horizon=H, context=2, success_focus=0.5, bounds_margin=1.0)
    synth = SimReplaySynthesiser(store, _imaginer(store), cfg, -np.ones(4), np.ones(4), env_cfg=ARM)
    st = synth.generate(24, wm_version=1)
    synth.close()
    assert st.branches == 24 and st.written > 0
    assert st.unvetted == 0 and st.truncated == 0  # no veto: the arm is not uncertain
    real, syn = store.reader("real"), store.reader("synthetic")
    check = SimReplay(ARM, KEYS, horizon=H)
    ends = 0
    for rec in syn.episode_records():
        src = real.episode(rec.source.episode)
        ep = syn.episode(rec.episode)
        for k in KEYS:
            np.testing.assert_array_equal(ep[k][0], src[k][rec.source.step])
        seed = real.records[rec.source.episode].extra["seed"]
        frames, _, success, done, _ = check.play(seed, src["action"][: rec.source.step],
                                              {k: src[k][rec.source.step] for k in KEYS}, ep["action"])
        for k in KEYS:
            np.testing.assert_array_equal(ep[k][1:], frames[k][:-1])
        np.testing.assert_array_equal(ep["success"], success)
        assert ep["done"][-1] == done[-1] and not ep["done"][:-1].any()
        if ep["done"][-1]:
            assert ep["success"][-1] and rec.length <= H + 1
            ends += 1
    check.close()
    assert ends == st.successes > 0, "branches near the real successes reach the goal on the arm"


def test_the_oracle_needs_the_lock_step_arm():
    with pytest.raises(ValueError, match="needs loop.robot=sim"):
        LoopConfig.model_validate({"robot": "bridge", "synth": {"imaginer": "simulator"}})
    assert LoopConfig.model_validate({"robot": "sim", "synth": {"imaginer": "simulator"}}).synth.imaginer == "simulator"


def test_oracle_policy_branches_are_what_the_policy_does_on_the_arm(tmp_path):
    """synth.actions=policy on the oracle: the policy acts on the arm's own observations from each real
    branch point; replaying the written actions reproduces the written observations."""
    from tests.synth.test_policy_branches import linear_actor

    store = _record(tmp_path)
    dim = store.schema("real").keys["proprio"].shape[0]
    actor = linear_actor(key="proprio", dim=dim, actions=4)
    cfg = SynthConfig(horizon=H, context=2, bounds_margin=1.0, actions="policy")
    synth = SimReplaySynthesiser(store, _imaginer(store), cfg, -np.ones(4), np.ones(4), env_cfg=ARM)
    st = synth.generate(6, wm_version=1, actor=actor)
    synth.close()
    assert st.written > 0
    real, syn = store.reader("real"), store.reader("synthetic")
    check = SimReplay(ARM, KEYS, horizon=H)
    for rec in syn.episode_records():
        src, ep = real.episode(rec.source.episode), syn.episode(rec.episode)
        for t in range(rec.length):
            np.testing.assert_allclose(ep["action"][t], actor.act({"proprio": ep["proprio"][t]}), atol=0.05)
        seed = real.records[rec.source.episode].extra["seed"]
        frames, *_ = check.play(seed, src["action"][: rec.source.step], {k: src[k][rec.source.step] for k in KEYS},
                                ep["action"])
        for k in KEYS:
            np.testing.assert_array_equal(ep[k][1:], frames[k][: rec.length - 1])
    check.close()
