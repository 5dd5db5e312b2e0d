"""The imagination provider backed by the run's world model (see imagine.py for the contract).

The latest checkpoint in RUN/world_model/ is loaded on first use and again whenever a newer
version appears, so the page always shows what the current model imagines. A new version that
fails to load never replaces a working one: the page keeps showing the model it has.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from services.dashboard.errors import Conflict, NotFound
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

    @contextlib.contextmanager
    def model(self) -> Iterator:
        """The newest loadable model (an `Imaginer`), held for one rollout or one play step: one user at a time,
        since the model is not shared across threads."""
        with self._lock:
            yield self._current()

    def camera_key(self, im, camera: str) -> str:
        key = f"image_{camera}"
        if key not in im.cfg.image_keys:
            raise NotFound(
                f"world model v{self._watch.seen} does not model camera {camera!r} "
                f"(it has {im.cfg.image_keys or 'no cameras'})"
            )
        return key

    def real_context(
        self, im, group: str, episode: int, start: int
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """The model's history window ending at step `start` of a stored episode, a batch of one: its K frames
        (key -> (1, K, ...); the first step repeated before step 0) and the K-1 actions between them (zeros
        before step 0), the way the model was trained for episode starts; and the episode's recorded actions.
        Conflict (409) when the group's data does not fit the model."""
        keys = [*im.cfg.image_keys, *im.cfg.vector_keys]
        reader = EpisodeStore(self.run_dir).reader(group, cache=False)
        self._check_fit(im, reader.schema, group)
        data = reader.episode(episode, keys=[*keys, "action"])
        k = im.cfg.dynamics.history
        steps = np.arange(start - k + 1, start + 1)
        rows = np.maximum(steps, 0)
        context = {key: data[key][rows][None] for key in keys}
        past = (data["action"][rows[:-1]] * (steps[:-1, None] >= 0))[None]  # no actions before the start
        return context, past, data["action"]

    def _check_fit(self, im, schema, group: str) -> None:
        cfg = im.cfg
        missing = [k for k in (*cfg.image_keys, *cfg.vector_keys) if k not in schema.keys]
        why = f"it lacks {missing}" if missing else ""
        if not why and schema.action_dim != cfg.action_dim:
            why = f"its actions have {schema.action_dim} dimensions, the model's {cfg.action_dim}"
        sized = {k: math.prod(schema.keys[k].shape) for k in cfg.vector_keys} if not why else {}
        wrong = [f"{k} has {n} values, the model's {cfg.vector_keys[k]}" for k, n in sized.items()
                 if n != cfg.vector_keys[k]]  # fmt: skip
        why = why or "; ".join(wrong)
        sizes = {schema.keys[k].shape[0] for k in cfg.image_keys} if not why else set()
        if not why and sizes - {cfg.image_size}:
            why = f"its frames are {sorted(sizes)} pixels high, the model's {cfg.image_size}"
        if why:
            raise Conflict(f"world model v{self._watch.seen} does not fit group {group!r}: {why}")

    def imagine(self, group: str, episode: int, camera: str, start: int, horizon: int) -> np.ndarray:
        with self.model() as im:
            key = self.camera_key(im, camera)
            context, past, recorded = self.real_context(im, group, episode, start)
            actions = recorded[start : start + horizon][None]
            k = im.cfg.dynamics.history
            roll = im.rollout(context, actions, context_actions=past if k > 1 else None, seed=0)
            return roll.frames[key][0]
