"""The imagination provider backed by the run's world model (see imagine.py for the contract).

The latest checkpoint in RUN/world_model/ is loaded on first use and again whenever a newer
version appears, so the page always shows what the current model imagines. A new version that
fails to load never replaces a working one: the page keeps showing the model it has.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import numpy as np

from services.dashboard.errors import NotFound
from worldsample.errors import WorldSampleError
from worldsample.paths import RunFiles
from worldsample.store import EpisodeStore
from worldsample.versioned import VersionedDir, VersionWatcher

log = logging.getLogger(__name__)


class WorldModelImagination:
    def __init__(self, run_dir: Path | str):
        self.run_dir = Path(run_dir)
        self._lock = threading.Lock()
        self._imaginer = None
        self._watch = VersionWatcher(VersionedDir(RunFiles.of(self.run_dir).world_model))

    @property
    def version(self) -> int:
        return -1 if self._watch.seen is None else self._watch.seen

    def _current(self):
        from worldsample.world_model import Imaginer, checkpoint

        try:
            new = self._watch.poll()
            if new is not None:
                model, _ = checkpoint.load(self._watch.vdir.path(new))
                self._imaginer = Imaginer(model)
                self._watch.accept(new)
        except WorldSampleError as e:
            if self._imaginer is None:
                raise
            log.error("keeping world model v%s: %s", self._watch.seen, e)
        if self._imaginer is None:
            raise NotFound(f"no world model checkpoint in RUN ({self._watch.vdir.root} has none yet)")
        return self._imaginer

    def imagine(self, group: str, episode: int, camera: str, start: int, horizon: int) -> np.ndarray:
        with self._lock:  # one rollout at a time: the model is not shared across threads
            im = self._current()
            key = f"image_{camera}"
            if key not in im.cfg.image_keys:
                raise NotFound(
                    f"world model v{self._watch.seen} does not model camera {camera!r} "
                    f"(it has {im.cfg.image_keys or 'no cameras'})"
                )
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
