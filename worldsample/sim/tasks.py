"""The Meta-World v3 tasks the simulated arm runs, looked up in Meta-World's own maps.

A task needs a scene (`metaworld.env_dict.ALL_V3_ENVIRONMENTS`) and a scripted expert
(`metaworld.policies.ENV_POLICY_MAP`): demonstrations and the simulated human both drive with it.
Importing this module loads Meta-World and MuJoCo, so callers import it on first use.
"""

from __future__ import annotations

from metaworld.env_dict import ALL_V3_ENVIRONMENTS
from metaworld.policies import ENV_POLICY_MAP

from worldsample.errors import ConfigError


def supported_tasks() -> list[str]:
    """Names of the v3 tasks with both a scene and a scripted expert, sorted."""
    return sorted(set(ALL_V3_ENVIRONMENTS) & set(ENV_POLICY_MAP))


def _choices() -> str:
    return f"choose one of: {', '.join(supported_tasks())} (metaworld.policies.ENV_POLICY_MAP)"


def check_task(task: str, error: type[Exception] = ConfigError) -> str:
    """`task` if the arm can run it with its scripted expert, else `error` naming the valid tasks."""
    if task not in ALL_V3_ENVIRONMENTS:
        raise error(f"unknown Meta-World task {task!r}; {_choices()}")
    if task not in ENV_POLICY_MAP:
        raise error(f"Meta-World task {task!r} has no scripted expert policy; {_choices()}")
    return task


def task_env_class(task: str) -> type:
    """Meta-World's env class for `task` (the scene only; see `check_task` for the expert)."""
    if task not in ALL_V3_ENVIRONMENTS:
        raise ConfigError(f"unknown Meta-World task {task!r}; {_choices()}")
    return ALL_V3_ENVIRONMENTS[task]


def expert_policy_class(task: str) -> type:
    """Meta-World's scripted policy class for `task`."""
    return ENV_POLICY_MAP[check_task(task)]
