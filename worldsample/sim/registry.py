"""Gymnasium registration of the simulated arm; light enough to run on `import worldsample.sim`."""

from __future__ import annotations

import gymnasium

ENV_ID = "WorldSample/SimArm-v0"


def register() -> None:
    # A string entry point defers importing MuJoCo and Meta-World until an env is made.
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(ENV_ID, entry_point="worldsample.sim.env:SimArmEnv")
