"""The simulated arm env: spaces, seeded determinism, the two domains, delay and episode ends."""

import json

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from worldsample.sim import ENV_ID, ScriptedExpert, SimArmConfig, SimArmEnv, make_env

OBJ = slice(4, 7)  # object xyz inside the 39-dim Meta-World state


def rollout(env, actions, seed):
    """Observations, rewards and successes of `actions` played from reset(seed)."""
    obs, _ = env.reset(seed=seed)
    observations, rewards, successes = [obs], [], []
    for a in actions:
        obs, reward, _, _, info = env.step(a)
        observations.append(obs)
        rewards.append(reward)
        successes.append(info["success"])
    return observations, rewards, successes


def expert_actions(seed, steps, open_gripper=False):
    env = make_env(SimArmConfig(cameras=[]))
    env.reset(seed=seed)
    expert = ScriptedExpert(env, seed=seed)
    actions = []
    for _ in range(steps):
        actions.append(expert.act())
        if open_gripper:
            actions[-1][3] = -1.0
        env.step(actions[-1])
    env.close()
    return actions


def test_make_env_spaces_and_observation_contents():
    cfg = SimArmConfig(cameras=["corner", "topview"], image_size=32)
    env = make_env(cfg, seed=0)
    assert env.spec.id == ENV_ID
    assert set(env.observation_space.spaces) == {"image_corner", "image_topview", "proprio", "state"}
    assert env.observation_space["image_corner"].shape == (32, 32, 3)
    assert env.observation_space["image_corner"].dtype == np.uint8
    assert env.observation_space["proprio"].shape == (4,)
    assert env.observation_space["state"].shape == (39,)
    assert env.action_space == gymnasium.spaces.Box(-1, 1, (4,), np.float32)

    obs, info = env.reset()
    assert obs in env.observation_space and info["success"] is False
    # A real picture: the rendered scene has varied colours, not a blank frame.
    assert obs["image_corner"].std() > 10
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    assert obs in env.observation_space
    assert isinstance(reward, float) and isinstance(info["success"], bool)
    json.dumps(env.unwrapped.domain_info())
    env.close()
    env.close()  # closing twice is harmless


@pytest.mark.filterwarnings("ignore:.*infinity:UserWarning")  # proprio/state are unbounded on purpose
def test_state_only_env_passes_gymnasium_checker():
    env = SimArmEnv(SimArmConfig(cameras=[], include_state=False))
    check_env(env, skip_render_check=True)
    assert set(env.observation_space.spaces) == {"proprio"}
    env.close()


@pytest.mark.parametrize("domain", ["real", "sim"])
def test_same_seed_and_actions_give_identical_episodes(domain):
    cfg = SimArmConfig(domain=domain, action_delay_steps=1)
    actions = np.random.default_rng(0).uniform(-1, 1, (8, 4)).astype(np.float32)
    runs = []
    for _ in range(2):
        env = make_env(cfg)
        runs.append(rollout(env, actions, seed=7))
        runs[-1] += (env.unwrapped.domain_info(),)
        env.close()
    (obs_a, rew_a, succ_a, info_a), (obs_b, rew_b, succ_b, info_b) = runs
    for a, b in zip(obs_a, obs_b):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert rew_a == rew_b and succ_a == succ_b and info_a == info_b


def test_reset_seed_controls_object_and_goal_placement():
    env = make_env(SimArmConfig(cameras=[]))
    placement = lambda seed: env.reset(seed=seed)[0]["state"][[4, 5, 36, 37]]  # noqa: E731
    np.testing.assert_array_equal(placement(1), placement(1))
    assert not np.allclose(placement(1), placement(2))
    # Unseeded resets continue the seeded stream, so a run of episodes is reproducible too.
    env.reset(seed=3)
    follow_a = env.reset()[0]["state"]
    env.reset(seed=3)
    np.testing.assert_array_equal(env.reset()[0]["state"], follow_a)
    env.close()


def test_make_env_seed_fixes_the_first_reset():
    firsts = []
    for _ in range(2):
        env = make_env(SimArmConfig(cameras=[]), seed=11)
        firsts.append(env.reset()[0]["state"])
        env.close()
    np.testing.assert_array_equal(*firsts)


def test_real_domain_has_proprio_noise_and_sim_domain_does_not():
    for domain, noisy in [("real", True), ("sim", False)]:
        env = make_env(SimArmConfig(cameras=[], domain=domain, proprio_noise_std=0.01))
        obs, _ = env.reset(seed=0)
        error = obs["proprio"] - env.unwrapped.expert_state()[:4].astype(np.float32)
        assert (np.abs(error).max() > 1e-4) == noisy, domain
        env.close()


def test_sim_domain_changes_the_images_of_the_same_seed():
    images = {}
    for domain in ["real", "sim"]:
        env = make_env(SimArmConfig(domain=domain))
        images[domain] = env.reset(seed=0)[0]["image_corner"].astype(np.float32)
        env.close()
    assert np.abs(images["real"] - images["sim"]).mean() > 10


def test_sim_domain_changes_dynamics_of_the_same_actions():
    # Shove the puck with an open gripper: its sliding depends on friction and mass. (A gripped
    # puck follows the stiff mocap-driven hand, so the expert's own pushes change by only ~mm.)
    actions = expert_actions(seed=0, steps=80, open_gripper=True)
    trajectories = {}
    for domain in ["real", "sim"]:
        env = make_env(SimArmConfig(cameras=[], domain=domain))
        observations, _, _ = rollout(env, actions, seed=0)
        trajectories[domain] = np.array([o["state"][OBJ] for o in observations])
        env.close()
    real, sim = trajectories["real"], trajectories["sim"]
    # Same placement (z differs by how deep the heavier/lighter puck settles into the soft contact) ...
    np.testing.assert_allclose(real[0, :2], sim[0, :2], atol=1e-6)
    assert np.linalg.norm(real - sim, axis=1).max() > 0.005  # ... different motion


def test_sim_domain_perturbation_depends_on_the_seed_only():
    env = make_env(SimArmConfig(cameras=["corner"], domain="sim"))
    infos = {}
    for seed in [0, 1, 0]:
        env.reset(seed=seed)
        infos.setdefault(seed, []).append(env.unwrapped.domain_info())
    assert infos[0][0] == infos[0][1]
    assert infos[0][0] != infos[1][0]
    for key in ["friction_scale", "mass_scale", "light_scale"]:
        assert infos[0][0][key] != infos[1][0][key]
    assert infos[0][0]["cameras"]["corner"] != infos[1][0]["cameras"]["corner"]
    env.close()


def test_real_domain_info_is_nominal():
    env = make_env(SimArmConfig(cameras=["corner"]))
    env.reset(seed=0)
    info = env.unwrapped.domain_info()
    assert info["domain"] == "real"
    assert (info["friction_scale"], info["mass_scale"], info["light_scale"]) == (1.0, 1.0, 1.0)
    assert info["cameras"]["corner"] == {"azimuth_deg": 0.0, "elevation_deg": 0.0, "distance_scale": 1.0}
    env.close()


def test_action_delay_executes_earlier_actions():
    actions = list(np.random.default_rng(1).uniform(-1, 1, (10, 4)).astype(np.float32))
    zero = np.zeros(4, np.float32)
    base = dict(cameras=[], proprio_noise_std=0.0)
    delayed = make_env(SimArmConfig(action_delay_steps=2, **base))
    direct = make_env(SimArmConfig(**base))
    obs_delayed, _, _ = rollout(delayed, actions, seed=0)
    obs_direct, _, _ = rollout(direct, [zero, zero] + actions[:-2], seed=0)
    for a, b in zip(obs_delayed, obs_direct):
        np.testing.assert_array_equal(a["state"], b["state"])


def test_episode_is_truncated_at_max_steps():
    env = make_env(SimArmConfig(cameras=[], max_episode_steps=5))
    env.reset(seed=0)
    ends = [env.step(np.zeros(4, np.float32))[2:4] for _ in range(5)]
    assert ends == [(False, False)] * 4 + [(False, True)]
    env.close()


def test_success_terminates_only_when_configured():
    actions = expert_actions(seed=0, steps=150)
    for terminate in [True, False]:
        env = make_env(SimArmConfig(cameras=[], terminate_on_success=terminate))
        env.reset(seed=0)
        for a in actions:
            _, _, terminated, _, info = env.step(a)
            if info["success"]:
                break
        assert info["success"] and terminated == terminate
        env.close()
