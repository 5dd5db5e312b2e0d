"""The policy registry: exported actors (safetensors + config) the robot bridge loads.

`PolicyRegistry(run_dir).publish(config, tensors)` / `.load()`; `NumpyActor` runs a loaded
policy without torch; `worldsample.policy.actor.MLPActor` is the torch module (imports torch).
"""

from worldsample.policy.config import ObsInput, PolicyConfig
from worldsample.policy.errors import PolicyError
from worldsample.policy.numpy_actor import NumpyActor
from worldsample.policy.registry import PolicyRegistry


def load_actor(run_dir, version: int | None = None, chunks: bool = False) -> NumpyActor:
    """The latest (or a given) policy version as a numpy actor. A policy that outputs chunks of
    several actions (`action_chunk` > 1) is refused unless the caller plays chunks (`chunks`)."""
    config, tensors = PolicyRegistry(run_dir).load(version)
    if config.action_chunk > 1 and not chunks:
        raise PolicyError(f"policy v{config.version} outputs chunks of {config.action_chunk} actions "
                          "(learner.action_chunk); only the loop's simulated arm plays them so far")
    return NumpyActor(config, tensors)


__all__ = ["NumpyActor", "ObsInput", "PolicyConfig", "PolicyError", "PolicyRegistry", "load_actor"]
