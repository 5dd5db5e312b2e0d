"""Any Meta-World v3 task with a scripted expert runs by name; other names fail with a ConfigError."""

import numpy as np
import pytest
from metaworld.env_dict import ALL_V3_ENVIRONMENTS
from metaworld.policies import ENV_POLICY_MAP

from worldsample.config import load_config
from worldsample.errors import ConfigError
from worldsample.sim import InterventionConfig, InterventionExpert, ScriptedExpert, make_env
from worldsample.sim.tasks import check_task, expert_policy_class, supported_tasks


def make(task: str, max_steps: int = 150):
    # Through the run config and its overrides, as `--set env.task=...` does.
    cfg = load_config(None, [f"env.task={task}", "env.cameras=[]", f"env.max_episode_steps={max_steps}"])
    return make_env(cfg.env)


def run_episode(env, seed, choose):
    env.reset(seed=seed)
    while True:
        _, _, terminated, truncated, info = env.step(choose())
        if terminated or truncated:
            return info["success"]


def test_every_v3_task_with_a_policy_is_supported():
    assert supported_tasks() == sorted(set(ALL_V3_ENVIRONMENTS) & set(ENV_POLICY_MAP))
    assert {"push-v3", "peg-insert-side-v3", "reach-v3"} <= set(supported_tasks())
    # looked up in the map: the class name (SawyerPegInsertionSideV3Policy) does not follow from the task name
    assert expert_policy_class("peg-insert-side-v3") is ENV_POLICY_MAP["peg-insert-side-v3"]


@pytest.mark.parametrize("task", ["push-v3", "peg-insert-side-v3", "reach-v3"])
def test_scripted_expert_solves_the_task(task):
    env = make(task)
    try:
        successes = [run_episode(env, seed, ScriptedExpert(env, seed=seed).act) for seed in (1, 2, 3)]
    finally:
        env.close()
    assert all(successes), successes


def test_simulated_human_takes_over_on_another_task():
    env = make("peg-insert-side-v3", max_steps=30)
    rng = np.random.default_rng(0)
    human = InterventionExpert(env, InterventionConfig(patience_steps=0, takeover_steps=5), seed=0)
    flags = []

    def choose():
        action, intervened = human.filter(rng.uniform(-1, 1, 4))
        flags.append(intervened)
        return action

    run_episode(env, 1, choose)
    env.close()
    assert sum(flags) >= 10


def test_unknown_task_is_a_config_error_that_lists_the_valid_names():
    with pytest.raises(ConfigError) as e:
        load_config(None, ["env.task=peg-insert-v3"])
    message = str(e.value)
    assert "env.task" in message and "unknown Meta-World task 'peg-insert-v3'" in message
    assert "peg-insert-side-v3" in message and "ENV_POLICY_MAP" in message
    with pytest.raises(ConfigError, match="unknown Meta-World task"):
        expert_policy_class("push-v9")


def test_unknown_task_fails_at_env_construction_when_validation_was_skipped():
    cfg = load_config(None, ["env.cameras=[]"]).env.model_copy(update={"task": "push-v9"})
    with pytest.raises(ConfigError, match="unknown Meta-World task 'push-v9'"):
        make_env(cfg)


def test_task_without_a_scripted_policy_is_a_config_error(monkeypatch):
    # Stands for a Meta-World release that ships a task before its scripted policy.
    monkeypatch.delitem(ENV_POLICY_MAP, "reach-v3")
    with pytest.raises(ConfigError, match="'reach-v3' has no scripted expert policy"):
        load_config(None, ["env.task=reach-v3"])
    with pytest.raises(ConfigError, match="no scripted expert policy"):
        check_task("reach-v3")
