"""The imagination provider backed by the run's world model (see imagine.py for the contract).

The latest checkpoint in RUN/world_model/ is loaded on first use and again whenever a newer
version appears, so the page always shows what the current model imagines.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from services.dashboard.errors import NotFound
from worldsample.store import EpisodeStore


class WorldModelImagination:
    def __init__(self, run_dir: Path | str):
        self.run_dir = Path(run_dir)
        self._lock = threading.Lock()
        self._imaginer = None
        self._version: int | None = None

    @property
    def version(self) -> int:
        return -1 if self._version is None else self._version

    def _current(self):
        from worldsample.world_model import Imaginer, checkpoint
        from worldsample.world_model.modes import checkpoint_dir

        wm_dir = checkpoint_dir(self.run_dir)
        latest = checkpoint.latest_version(wm_dir)
        if latest is None:
            raise NotFound(f"no world model checkpoint in RUN ({wm_dir} has none yet)")
        if latest != self._version:
            model, _ = checkpoint.load(wm_dir)
            self._imaginer, self._version = Imaginer(model), latest
        return self._imaginer

    def imagine(self, group: str, episode: int, camera: str, start: int, horizon: int) -> np.ndarray:
        with self._lock:  # one rollout at a time: the model is not shared across threads
            im = self._current()
            key = f"image_{camera}"
            if key not in im.cfg.image_keys:
                raise NotFound(f"world model v{self._version} does not model camera {camera!r} (it has {im.cfg.image_keys or 'no cameras'})")
            keys = [*im.cfg.image_keys, *im.cfg.vector_keys]
            data = EpisodeStore(self.run_dir).reader(group, cache=False).episode(episode, keys=[*keys, "action"])
            k = im.cfg.dynamics.history
            steps = np.arange(start - k + 1, start + 1)
            rows = np.maximum(steps, 0)
            context = {key_: data[key_][rows][None] for key_ in keys}
            past = (data["action"][rows[:-1]] * (steps[:-1, None] >= 0))[None]  # no actions before the start
            actions = data["action"][start : start + horizon][None]
            roll = im.rollout(context, actions, context_actions=past if k > 1 else None, seed=0)
            return roll.frames[key][0]
