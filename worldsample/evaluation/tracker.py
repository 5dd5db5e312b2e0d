"""Choosing what to deploy while a run trains: score each exported policy in the world model as it
appears, within a compute budget, and keep RUN/policies/recommended on the best.

    tracker = RecommendationTracker(run_dir)
    row = tracker.on_export(version)   # after each export; {} until a world model exists

Scores are only compared within one world-model version: when a newer world model appears, the
previously best versions (`rescore_top`) are scored again in it, as far as `budget_s` allows, before
the new one; versions not rescored drop out of the comparison. Scores and the choice are kept in
RUN/reports/imagined_scores.json (a report the dashboard lists) and RUN/reports/recommended.json.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from worldsample.errors import WorldSampleError
from worldsample.evaluation.imagined import ImaginedScore, load_world_model, score_policy
from worldsample.evaluation.recommend import recommend, write_recommended
from worldsample.paths import RunFiles
from worldsample.policy import PolicyRegistry, load_actor
from worldsample.versioned import VersionedDir

log = logging.getLogger(__name__)


class RecommendationTracker:
    def __init__(
        self,
        run_dir: str | Path,
        starts: str = "auto",
        n_starts: int = 8,
        horizon: int = 50,
        samples: int | None = None,
        seed: int = 0,
        budget_s: float = 30.0,
        rescore_top: int = 3,
        env_cfg=None,
    ):
        self.run_dir = Path(run_dir)
        self.kind, self.n_starts, self.horizon, self.samples, self.seed = starts, n_starts, horizon, samples, seed
        self.budget_s, self.rescore_top, self.env_cfg = budget_s, rescore_top, env_cfg
        self.model, self.wm_version, self.starts = None, None, None
        self.scores: dict[int, ImaginedScore] = {}
        self.errors = 0

    def _refresh_model(self) -> bool:
        """Load a newer world model; True when it changed."""
        latest = VersionedDir(RunFiles.of(self.run_dir).world_model).latest()
        if latest is None or latest == self.wm_version:
            return False
        from worldsample.evaluation.policies import make_starts, run_env_config

        model, wm_version = load_world_model(self.run_dir, latest)
        env_cfg = self.env_cfg if self.env_cfg is not None else run_env_config(self.run_dir)
        starts = make_starts(self.run_dir, model, self.kind, self.n_starts, env_cfg)
        self.model, self.wm_version, self.starts = model, wm_version, starts
        return True

    def _score(self, version: int) -> None:
        actor = load_actor(self.run_dir, version)
        self.scores[version] = score_policy(self.model, actor, self.starts, self.horizon, samples=self.samples,
                                            seed=self.seed, wm_version=self.wm_version)

    def on_export(self, version: int) -> dict[str, float]:
        """Score `version` (and rescore the best ones in a newer world model); returns metrics for
        the run log, {} when no world model exists yet or scoring failed (logged and counted)."""
        t0 = time.perf_counter()
        try:
            if self._refresh_model():
                previous = sorted(self.scores, key=lambda v: (self.scores[v].key, v), reverse=True)
                self.scores = {}
                for v in previous[: self.rescore_top]:
                    if v != version and time.perf_counter() - t0 < self.budget_s:
                        self._score(v)
            if self.model is None:
                return {}
            self._score(version)
            existing = PolicyRegistry(self.run_dir).versions()
            best = recommend({v: s.key for v, s in self.scores.items()}, existing)
            self._write(best)
        except WorldSampleError as e:  # a broken policy or checkpoint must not stop training
            self.errors += 1
            log.error("could not score policy v%s in the world model: %s", version, e)
            return {"recommend/errors": float(self.errors)}
        s = self.scores[best]
        return {"recommend/version": float(best), "recommend/imagined_success": s.success_rate,
                "recommend/scored": float(len(self.scores)), "recommend/seconds": time.perf_counter() - t0}

    def _write(self, best: int) -> None:
        from worldsample.evaluation.policies import write_report

        rows = [{"policy": f"v{v} (world model)", "episodes": s.starts * s.samples, "success_rate": s.success_rate,
                 "mean_return": s.mean_return, "mean_length": s.mean_length} for v, s in sorted(self.scores.items())]
        write_report(self.run_dir, {"kind": "imagined_scores", "recommended": f"v{best}",
                                    "world_model": f"v{self.wm_version}", "policies": rows,
                                    "scores": {f"v{v}": s.to_dict() for v, s in self.scores.items()}},
                     "imagined_scores")
        s = self.scores[best]
        write_recommended(self.run_dir, best, {"world_model": f"v{self.wm_version}",
                                               "imagined_success": s.success_rate, "success_prob": s.success_prob,
                                               "mean_return": s.mean_return, "scored": len(self.scores)})
