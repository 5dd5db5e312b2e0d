"""The hook for the world model's imagination of a stored episode (real vs predicted).

An `ImagineProvider` (services/dashboard/wm_imagine.py, backed by the run's world model) is
passed to `create_app(..., imagine=provider)`. Without one the endpoint answers 404 when
RUN/world_model/ does not exist ("no world model checkpoint in RUN") and 501 when it exists.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class ImagineProvider(Protocol):
    def imagine(self, group: str, episode: int, camera: str, start: int, horizon: int) -> np.ndarray:
        """Predicted frames (horizon, H, W, C) uint8 for `camera`, conditioned on the episode's
        real frames up to `start` and driven by its recorded actions from `start` on."""
        ...

    @property
    def version(self) -> int:
        """The world-model version that imagines (shown beside the frames)."""
        ...
