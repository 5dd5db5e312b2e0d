"""The policy registry: exported actors (safetensors + config) the robot bridge loads.

`PolicyRegistry(run_dir).publish(config, tensors)` / `.load()`; `NumpyActor` runs a loaded
policy without torch; `worldsample.policy.actor.MLPActor` is the torch module (imports torch).
"""

from worldsample.policy.config import ObsInput, PolicyConfig
from worldsample.policy.errors import PolicyError
from worldsample.policy.numpy_actor import NumpyActor
from worldsample.policy.registry import PolicyRegistry


def load_actor(run_dir, version: int | None = None) -> NumpyActor:
    """The latest (or a given) policy version as a numpy actor."""
    return NumpyActor(*PolicyRegistry(run_dir).load(version))


__all__ = ["NumpyActor", "ObsInput", "PolicyConfig", "PolicyError", "PolicyRegistry", "load_actor"]
