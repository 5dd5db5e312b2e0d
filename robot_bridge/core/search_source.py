"""The bridge's Best-of-N search (`episode.search` in the robot profile) at episode boundaries.

At start-up it opens the run's latest world model (its ONNX export) and checks it against the
robot's observations and action size: no world model, no ONNX export, a damaged file or another
observation layout is a SearchError naming the cause before the bridge runs anything. At each
episode start, after the policy's refresh, it takes a newer world-model version if one is valid
(else keeps the one it has and reports why, as the policy source does) and builds the searcher
for the current policy, measuring its step time there, afresh each episode (`Searcher.warm_up`).
A policy the search cannot imagine with (a pixel policy, keys the model does not predict) runs
without search, with the reason in `error`. Per-episode counts go into the episode's metadata,
totals into the status.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from robot_bridge.core.search import SearchCounts, Searcher, SearchError
from robot_bridge.profile import SearchSpec
from worldsample.paths import RunFiles
from worldsample.store import KeySpec
from worldsample.versioned import VersionedDir, VersionError, VersionWatcher
from worldsample.world_model.data import DOMAIN_OF_GROUP
from worldsample.world_model.errors import CheckpointError
from worldsample.world_model.onnx_model import OnnxWorldModel

log = logging.getLogger(__name__)


class SearchSource:
    def __init__(self, spec: SearchSpec, run_dir: Path, obs_specs: Mapping[str, KeySpec], action_dim: int,
                 group: str = "real", clock: Callable[[], float] = time.perf_counter):
        self.spec, self.action_dim, self.clock = spec, action_dim, clock
        self._vdir = VersionedDir(RunFiles.of(run_dir).world_model)
        self._shapes = {k: tuple(s.shape) for k, s in obs_specs.items()}
        self._zeros = {k: np.zeros(s.shape, s.np_dtype) for k, s in obs_specs.items()}
        self.domain = DOMAIN_OF_GROUP.get(group, 0)
        self._watch = VersionWatcher(self._vdir)
        try:
            v = self._watch.poll()
        except VersionError as e:
            raise SearchError(f"episode.search: {e}") from None
        if v is None:
            raise SearchError(f"episode.search is on, but {self._vdir.root} holds no world model: train one first "
                              "(worldsample wm train RUN) or turn the search off")
        self.wm = self._open(v)
        self._watch.accept(v)
        self.searcher: Searcher | None = None
        self._actor = None
        self.error: str | None = None  # why the current policy runs without search
        self.wm_error: str | None = None  # why a newer world model was not taken
        self.total = SearchCounts()

    def _open(self, version: int) -> OnnxWorldModel:
        try:
            wm = OnnxWorldModel(self._vdir.path(version))
            wm.check_layout(self._shapes, self.action_dim)
        except CheckpointError as e:
            raise SearchError(f"episode.search: world model v{version}: {e}") from None
        return wm

    @property
    def active(self) -> bool:
        return self.searcher is not None

    def refresh(self, actor) -> None:
        """At an episode start, after the policy's refresh: a newer world model, the searcher for `actor`."""
        changed = False
        try:
            v = self._watch.poll()
            if v is not None:
                self.wm, changed, self.wm_error = self._open(v), True, None
                self._watch.accept(v)
                log.info("search: world model v%d loaded", v)
        except (SearchError, VersionError) as e:
            self.wm_error = str(e)
            log.error("search: keeping world model v%d: %s", self.wm.version, e)
        if actor is self._actor and not changed:
            if self.searcher is not None:
                self.searcher.warm_up(self._zeros)  # the step time afresh, while the arm resets
            return
        self._actor, self.searcher, self.error = actor, None, None
        if actor is None:
            return
        s = self.spec
        try:
            searcher = Searcher(self.wm, actor, s.n, s.horizon, samples=s.samples, budget_s=s.budget_ms / 1e3,
                                seed=s.seed, spread=s.spread, domain=self.domain, clock=self.clock)
        except SearchError as e:
            self.error = str(e)
            log.error("search off for policy v%s: %s", actor.version, e)
            return
        searcher.warm_up(self._zeros)
        self.searcher = searcher

    def begin(self) -> None:
        if self.searcher is not None:
            self.searcher.reset()
            self.searcher.counts = SearchCounts()

    def act(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        return self.searcher.act(obs)

    def record(self, obs: Mapping[str, np.ndarray], action: np.ndarray) -> None:
        if self.searcher is not None:
            self.searcher.record(obs, action)

    def _settings(self) -> dict:
        s = self.spec
        return {"active": self.active, "n": s.n, "horizon": s.horizon, "budget_ms": s.budget_ms,
                "samples": self.searcher.samples if self.searcher else None, "world_model_version": self.wm.version,
                "error": self.error}

    def end(self) -> dict:
        """The episode's search figures (for its metadata); they join the totals."""
        counts = self.searcher.counts if self.searcher is not None else SearchCounts()
        self.total.add(counts)
        if self.searcher is not None:
            self.searcher.counts = SearchCounts()
        return self._settings() | counts.to_dict()

    def status(self) -> dict:
        """Settings and counts since the bridge started (the open episode's included)."""
        total = SearchCounts()
        total.add(self.total)
        if self.searcher is not None:
            total.add(self.searcher.counts)
        return self._settings() | total.to_dict() | {"world_model_error": self.wm_error}
