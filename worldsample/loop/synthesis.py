"""The synthesise step's object: counterfactual branches from the latest world model into the
store's `synthetic` group, at most `synth.ratio` synthetic steps per real step. With
`synth.actions: policy` the newest exported policy acts in the branches (none exported yet: no
branches, counted as synth/no_policy)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from worldsample.loop.config import LoopConfig
from worldsample.paths import RunFiles
from worldsample.store import EpisodeStore
from worldsample.versioned import VersionedDir, VersionWatcher


class Synthesis:
    def __init__(self, run_dir: str | Path, loop: LoopConfig, low: np.ndarray, high: np.ndarray):
        self.run_dir, self.loop = Path(run_dir), loop
        self.low, self.high = low, high
        self.wm_versions = VersionedDir(RunFiles.of(run_dir).world_model)
        self.models = VersionWatcher(self.wm_versions)
        self.synth = None
        self.steps_written = 0
        self.policies = VersionWatcher(VersionedDir(RunFiles.of(run_dir).policies))
        self.actor = None
        self._latent_readers = None

    def _readers(self):
        """The image profile (loop.vision): branch off real states in the `latent` space of the run's
        frozen encoder (the learner's), so synthetic episodes store `latent` and proprio, no frames."""
        if not self.loop.vision.enabled:
            return None
        if self._latent_readers is None:  # one factory for the run: each episode is encoded once
            from worldsample.loop.vision import LatentReaders, frozen_encoder

            self._latent_readers = LatentReaders(frozen_encoder(self.run_dir, self.loop.vision))
        return self._latent_readers

    @property
    def version(self) -> int | None:
        return self.models.seen

    def _synthesiser(self, imaginer):
        store = EpisodeStore(self.run_dir)
        if self.loop.synth.imaginer == "simulator":  # the oracle: the same branches played on the arm
            from worldsample.evaluation.policies import run_env_config
            from worldsample.synth.sim_replay import SimReplaySynthesiser

            return SimReplaySynthesiser(store, imaginer, self.loop.synth, self.low, self.high,
                                        env_cfg=run_env_config(self.run_dir))
        from worldsample.synth.synthesiser import Synthesiser

        return Synthesiser(store, imaginer, self.loop.synth, self.low, self.high, reader=self._readers())

    def generate(self) -> dict[str, float]:
        from worldsample.world_model import Imaginer, checkpoint

        latest = self.models.poll()
        if latest is not None:
            model, _ = checkpoint.load(self.wm_versions.path(latest))
            if self.synth is not None:
                self.synth.close()
            self.synth = self._synthesiser(Imaginer(model))
            self.models.accept(latest)
        if self.synth is None:
            return {}
        if self.loop.synth.actions == "policy" and not self._refresh_actor():
            return {"synth/no_policy": 1.0}
        budget = self.loop.synth.ratio * self.synth.real_steps() - self.steps_written
        n = min(self.loop.synth_branches, int(budget // max(self.loop.synth.horizon, 1)))
        if n <= 0:
            return {"synth/rate_limited": 1.0}
        st = self.synth.generate(n, wm_version=self.version, actor=self.actor)
        self.steps_written += st.steps
        out = {**({"synth/policy_version": float(self.actor.version)} if self.actor is not None else {}),
               "synth/branches": float(st.branches), "synth/written": float(st.written), "synth/steps": float(st.steps),
               "synth/successes": float(st.successes), "synth/unvetted": float(st.unvetted),
               "synth/truncated_uncertain": float(st.truncated)}
        out.update({f"synth/dropped_{k}": float(v) for k, v in st.dropped.items()})
        return out

    def _refresh_actor(self) -> bool:
        """The newest exported policy, for branches that follow it; False while there is none."""
        from worldsample.policy import load_actor

        latest = self.policies.poll()
        if latest is not None:
            self.actor = load_actor(self.run_dir, latest)
            self.policies.accept(latest)
        return self.actor is not None

    def state(self) -> dict:
        return {"steps_written": self.steps_written}

    def load_state(self, st: dict) -> None:
        self.steps_written = int(st["steps_written"])
