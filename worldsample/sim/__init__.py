"""Simulated Sawyer arm (Meta-World) with camera observations, domain randomisation and experts.

Importing this package registers `ENV_ID` with gymnasium but does not load MuJoCo: `make_env`,
`SimArmEnv` and the experts are imported on first access.
"""

from __future__ import annotations

import os
from importlib import import_module
from typing import TYPE_CHECKING

# Headless machines have no display for MuJoCo's default GLFW backend. This only takes effect if
# MuJoCo has not been imported yet; an explicit MUJOCO_GL always wins.
os.environ.setdefault("MUJOCO_GL", "egl")

from worldsample.sim.config import ExpertConfig, InterventionConfig, RandomizationConfig, SimArmConfig
from worldsample.sim.registry import ENV_ID, register

register()

_LAZY = {
    "SimArmEnv": "worldsample.sim.env",
    "make_env": "worldsample.sim.env",
    "ScriptedExpert": "worldsample.sim.expert",
    "InterventionExpert": "worldsample.sim.expert",
}

__all__ = [
    "ENV_ID",
    "ExpertConfig",
    "InterventionConfig",
    "RandomizationConfig",
    "SimArmConfig",
    # the lazy names, spelled out so that linters and type checkers see them
    "InterventionExpert",
    "ScriptedExpert",
    "SimArmEnv",
    "make_env",
]

if TYPE_CHECKING:
    from worldsample.sim.env import SimArmEnv, make_env
    from worldsample.sim.expert import InterventionExpert, ScriptedExpert


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
