"""The refresh-world-model step's object: continual post-training of the run's world model, and its
fidelity on held-out real episodes for the run summary."""

from __future__ import annotations

import json
from pathlib import Path

from worldsample.loop.config import LoopConfig
from worldsample.paths import RunFiles
from worldsample.store import EpisodeStore
from worldsample.versioned import VersionedDir


def head_metrics(meta: dict) -> dict[str, float]:
    """`wm/success_precision`, `wm/success_recall`, `wm/success_threshold` (and the same for done) from
    the held-out calibration a checkpoint's meta records, with the uncertainty veto's cuts
    (`wm/uncertainty_cut_first|last`, `wm/uncertainty_error_corr`); a score with nothing to measure is left out."""
    out = {}
    for head, scores in meta.get("heads", {}).items():
        for name in ("precision", "recall", "threshold"):
            if scores.get(name) is not None:
                out[f"wm/{head}_{name}"] = float(scores[name])
    unc = meta.get("uncertainty") or {}
    if unc.get("thresholds"):  # the veto's calibrated cuts at the first and last measured step
        out["wm/uncertainty_cut_first"] = float(unc["thresholds"][0])
        out["wm/uncertainty_cut_last"] = float(unc["thresholds"][-1])
    if unc.get("error_rank_corr") is not None:  # does disagreement rank the held-out windows by their error?
        out["wm/uncertainty_error_corr"] = float(unc["error_rank_corr"])
    return out


def state_parts(cfg) -> dict[str, tuple[str, slice]]:
    """The simulated arm's state parts (hand, object, goal, ...) when the model reads its 39-dim `state`."""
    from worldsample.sim.layout import STATE_DIM, STATE_PARTS

    if cfg.vector_keys.get("state") != STATE_DIM:
        return {}
    return {name: ("state", sl) for name, sl in STATE_PARTS.items()}


class WorldModelRounds:
    def __init__(self, run_dir: str | Path, loop: LoopConfig):
        self.run_dir, self.loop = Path(run_dir), loop
        self.versions = VersionedDir(RunFiles.of(run_dir).world_model)
        self.rounds = 0
        self.tracker = None
        self._readers = None  # the image profile's reader factory (latent from the frozen encoder)

    def readers(self):
        """None on the state profile; on the image profile (loop.vision) a factory of LatentReaders, so
        the world model's `latent` is the learner's: the run's frozen encoder on the stored frames."""
        if self.loop.vision.enabled and self._readers is None:
            from worldsample.loop.vision import LatentReaders, frozen_encoder

            self._readers = LatentReaders(frozen_encoder(self.run_dir, self.loop.vision))
        return self._readers

    def config(self, store: EpisodeStore):
        """The loop's world-model config fitted to the demos' schema."""
        from worldsample.world_model.modes import fit_to_store

        if self.loop.vision.enabled:
            from worldsample.loop.vision import world_model_config

            return world_model_config(self.loop, store)
        # an empty image_keys in the loop's config means a state-only model, cameras or not
        return fit_to_store(self.loop.world_model, store, "demo", images=bool(self.loop.world_model.image_keys))

    def train(self) -> dict[str, float]:
        """One round: from scratch on the demos the first time, then continual on demo + real."""
        from worldsample.world_model.modes import train_run

        store = EpisodeStore(self.run_dir)
        cfg = self.config(store)
        mode = "loop" if self.versions.latest() is not None else "demo"
        _, path = train_run(self.run_dir, cfg, mode, reader=self.readers())
        self.rounds += 1
        return {"wm/version": float(self.versions.latest()), "wm/rounds": float(self.rounds),
                "wm/mode_loop": float(mode == "loop"), **head_metrics(json.loads(path.read_text())["meta"])}

    def recommend(self, version: int) -> dict[str, float]:
        """Score exported policy `version` in the latest world model, an episode's length ahead, and
        keep the recommendation on the best scored one (`recommend/*` metrics; {} before the first
        world model)."""
        from worldsample.evaluation.policies import run_env_config
        from worldsample.evaluation.tracker import RecommendationTracker

        if self.tracker is None:
            env = run_env_config(self.run_dir)
            self.tracker = RecommendationTracker(self.run_dir, n_starts=self.loop.recommend_starts,
                                                 horizon=env.max_episode_steps, seed=self.loop.seed,
                                                 budget_s=self.loop.recommend_budget_s, env_cfg=env)
        return self.tracker.on_export(int(version))

    def evaluate(self, horizons: list[int]) -> dict:
        """Fidelity of the latest model on held-out real episodes: PSNR per horizon with images,
        else the RMSE of the predicted state (each with copying the last observation as baseline)."""
        from worldsample.world_model import checkpoint
        from worldsample.world_model.data import WindowSource
        from worldsample.world_model.errors import NotEnoughDataError
        from worldsample.world_model.evaluate import evaluate, evaluate_vectors
        from worldsample.world_model.train import cache_keys

        if self.versions.latest() is None:
            return {}
        model, doc = checkpoint.load(self.versions.root)
        store = EpisodeStore(self.run_dir)
        for g in [g for g in ("real", "demo") if g in store.groups]:  # prefer the robot's own held-out episodes
            try:
                source = WindowSource(store, {g: 1.0}, cache_keys(model.cfg), model.cfg.train.holdout_every,
                                      split="heldout", reader=self.readers())
                if model.cfg.image_keys:
                    report = evaluate(model, source, horizons)
                else:
                    report = evaluate_vectors(model, source, horizons, parts=state_parts(model.cfg))
                return {"version": doc["version"], "group": g, **report}
            except NotEnoughDataError:
                continue
        return {}
