"""The scripted expert solves push-v3; the simulated human intervenes only when a policy strays
(from the expert's motion, or, with the stall trigger, from progress towards the goal)."""

import numpy as np
import pytest

from worldsample.sim import ExpertConfig, InterventionConfig, InterventionExpert, ScriptedExpert, SimArmConfig, make_env


@pytest.fixture
def env():
    env = make_env(SimArmConfig(cameras=[]))
    yield env
    env.close()


def run_episode(env, seed, choose):
    """Steps until the episode ends; `choose()` gives each action. Returns (success, length)."""
    env.reset(seed=seed)
    for length in range(1, env.unwrapped.config.max_episode_steps + 1):
        _, _, terminated, truncated, info = env.step(choose())
        if terminated or truncated:
            return info["success"], length
    raise AssertionError("episode did not end")


def test_expert_solves_push_in_at_least_90_percent_of_seeds(env):
    results = [run_episode(env, seed, ScriptedExpert(env, ExpertConfig(), seed=seed).act) for seed in range(20)]
    assert np.mean([success for success, _ in results]) >= 0.9


def test_expert_actions_are_clipped_float32_and_seeded(env):
    noisy = ExpertConfig(action_noise_std=0.5)
    env.reset(seed=0)
    a, b = ScriptedExpert(env, noisy, seed=3), ScriptedExpert(env, noisy, seed=3)
    actions = [a.act() for _ in range(5)]
    for action, again in zip(actions, [b.act() for _ in range(5)]):
        assert action.dtype == np.float32 and action.shape == (4,)
        assert np.all(np.abs(action) <= 1.0)
        np.testing.assert_array_equal(action, again)
    assert not np.array_equal(actions[0], ScriptedExpert(env, ExpertConfig(), seed=3).act())


def test_expert_is_unaffected_by_sensor_noise():
    # It acts on the noise-free state, so heavy proprio noise leaves the episode unchanged.
    lengths = []
    for noise in [0.0, 0.05]:
        env = make_env(SimArmConfig(cameras=[], proprio_noise_std=noise))
        lengths.append(run_episode(env, 0, ScriptedExpert(env, seed=0).act))
        env.close()
    assert lengths[0] == lengths[1]


def test_no_takeover_when_the_policy_is_the_expert(env):
    env.reset(seed=1)
    policy = ScriptedExpert(env, ExpertConfig(action_noise_std=0.05), seed=1)
    human = InterventionExpert(env, InterventionConfig(), seed=1)
    flags = []

    def choose():
        action, intervened = human.filter(proposed := policy.act())
        flags.append(intervened)
        np.testing.assert_array_equal(action, proposed)
        return action

    success, _ = run_episode(env, 1, choose)
    assert success and not any(flags)


def test_takeover_schedule_against_a_contrary_policy(env):
    """Patience 2, takeover 3: two tolerated steps, then three expert steps, repeatedly."""
    env.reset(seed=0)
    cfg = InterventionConfig(deviation_threshold=0.05, patience_steps=2, takeover_steps=3)
    human = InterventionExpert(env, cfg, seed=0)
    flags = []
    for _ in range(10):
        contrary = -human.expert.nominal_action()  # goes the opposite way of the expert
        action, intervened = human.filter(contrary)
        if intervened:
            np.testing.assert_array_equal(action, human.expert.nominal_action())
        else:
            np.testing.assert_array_equal(action, contrary)
        flags.append(intervened)
        env.step(action)
    assert flags == [False, False, True, True, True, False, False, True, True, True]
    # With no patience the very first deviating step is taken over.
    env.reset(seed=0)
    impatient = InterventionExpert(env, cfg.model_copy(update={"patience_steps": 0}), seed=0)
    assert impatient.filter(-impatient.expert.nominal_action())[1]
    human.reset()
    assert not human.in_control


def watched_episode(env, human: InterventionExpert, policy, seed: int = 1) -> tuple[bool, list[bool]]:
    """One episode of `policy()` under the human: (success, whether the human chose each step)."""
    flags = []

    def choose():
        action, intervened = human.filter(policy())
        flags.append(intervened)
        return action

    human.reset()
    success, _ = run_episode(env, seed, choose)
    return success, flags


def held_still(env, human: InterventionExpert, steps: int) -> list[bool]:
    """An arm commanded to hold still for `steps` steps: whether the human chose each step."""
    env.reset(seed=0)
    human.reset()
    hold = np.zeros(4, np.float32)
    flags = []
    for _ in range(steps):
        action, intervened = human.filter(hold)
        np.testing.assert_array_equal(action, human.expert.nominal_action() if intervened else hold)
        assert human.last_deviation > human.cfg.deviation_threshold  # the expert moves, this arm does not
        flags.append(intervened)
        env.step(action)
    return flags


@pytest.mark.parametrize("kind", ["random", "constant"])
def test_bad_policies_get_taken_over(env, kind):
    rng = np.random.default_rng(0)
    bad = {"random": lambda: rng.uniform(-1, 1, 4), "constant": lambda: np.array([1.0, -1.0, 1.0, -1.0])}[kind]
    human = InterventionExpert(env, InterventionConfig(patience_steps=3, takeover_steps=10), seed=0)
    _, flags = watched_episode(env, human, bad, seed=2)
    assert sum(flags) >= 10
    assert not any(flags[:3])  # the first deviations are tolerated (patience)


def shaky_expert(human: InterventionExpert, std: float = 0.5, seed: int = 1):
    """The expert's motion with Gaussian noise on x, y, z: an exploring policy that still gets there."""
    rng = np.random.default_rng(seed)

    def act():
        return np.clip(human.expert.nominal_action() + np.r_[rng.normal(0.0, std, 3), 0.0], -1, 1).astype(np.float32)
    return act


@pytest.mark.parametrize("trigger", ["deviation", "stall", "lost"])
def test_a_shaky_policy_that_progresses_acts_unless_the_motion_alone_is_judged(env, trigger):
    human = InterventionExpert(env, InterventionConfig(trigger=trigger), seed=0)
    success, flags = watched_episode(env, human, shaky_expert(human))
    if trigger in ("stall", "lost"):
        assert success and not any(flags)  # it gets there on its own: nobody takes over
    else:
        assert sum(flags) >= 20  # its noisy motion often differs from the expert's by more than the threshold


def test_the_stall_trigger_takes_over_an_arm_that_holds_still(env):
    """No progress: stall_steps tolerated steps, then takeover_steps expert steps, then the policy again."""
    cfg = InterventionConfig(trigger="stall", stall_steps=5, takeover_steps=4)
    flags = held_still(env, InterventionExpert(env, cfg, seed=0), 16)
    # The first call sets the progress mark; five stalled steps are tolerated, the sixth is taken over.
    assert flags[:10] == [False] * 6 + [True] * 4
    assert flags[10:] == [False] * 5 + [True]  # handed back with a fresh count: 5 more stalls, then again


def test_the_lost_trigger_takes_over_an_arm_that_holds_still(env):
    """Holding still deviates from the expert's motion and makes no progress: lost_steps tolerated
    straying steps (the first call only sets the progress mark), then takeover_steps expert steps."""
    cfg = InterventionConfig(trigger="lost", lost_steps=2, takeover_steps=4)
    flags = held_still(env, InterventionExpert(env, cfg, seed=0), 8)
    assert flags == [False] * 3 + [True] * 4 + [False]


@pytest.mark.parametrize("trigger", ["lost", "stall"])
def test_the_lost_trigger_leaves_alone_an_arm_that_pauses_as_the_expert_does(env, trigger):
    """The expert's own motion pauses while it grips: a stall, yet no deviation, so `lost` never takes
    over even with no tolerance; `stall` with no tolerance does."""
    cfg = InterventionConfig(trigger=trigger, lost_steps=0, stall_steps=1)
    human = InterventionExpert(env, cfg, seed=0)
    success, flags = watched_episode(env, human, human.expert.nominal_action)
    assert success
    assert not any(flags) if trigger == "lost" else any(flags)
