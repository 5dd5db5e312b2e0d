"""The bridge's view of the policy registry: swaps to the newest valid version (or, with
`follow="recommended"`, to the version RUN/policies/recommended names, `latest` until there is
one), but only when asked, which the controller does at episode boundaries. A broken new version never replaces a
working one; the error is kept for the status topic.

A version holding `policy.onnx` (a pixel policy: encoder + actor) runs with onnxruntime on one
thread (worldsample/policy/onnx_actor.py); any other runs as the numpy MLP. Neither imports torch."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from worldsample.evaluation.recommend import FollowRecommended
from worldsample.policy import NumpyActor, PolicyError, PolicyRegistry
from worldsample.policy.onnx_actor import ENCODER_FILE, ONNX_FILE, OnnxActor
from worldsample.versioned import VersionError, VersionWatcher

log = logging.getLogger(__name__)


class PolicySource:
    def __init__(
        self, run_dir: Path, obs_shapes: Mapping[str, tuple[int, ...]], action_dim: int, explore: bool = False,
        follow: str = "latest", enabled: bool = True, explore_scale: float = 1.0,
    ):
        self._registry = PolicyRegistry(run_dir)
        if follow not in ("latest", "recommended"):
            raise ValueError(f"follow must be latest or recommended, got {follow!r}")
        self.follow = follow
        target = FollowRecommended(self._registry.root) if follow == "recommended" else self._registry.dir
        self._watch = VersionWatcher(target)
        self.explore, self.explore_scale = explore, explore_scale
        self._rng = np.random.default_rng()
        self._obs_shapes = dict(obs_shapes)
        self._action_dim = action_dim
        self.actor: NumpyActor | OnnxActor | None = None
        self.error: str | None = None
        self.swaps = 0
        self._newest: tuple[int | None, int | None] = (None, None)  # (newest version, its real_steps)
        self.enabled = enabled  # False: never loads a policy, every step holds (`demos record`)

    @property
    def version(self) -> int | None:
        return self.actor.version if self.actor else None

    @property
    def trained_steps(self) -> int | None:
        """The real steps the loaded policy was trained on (`source.real_steps` of its version), if it says."""
        return _real_steps(self.actor.config.source) if self.actor else None

    def learner_steps(self) -> int | None:
        """The real steps the newest published version was trained on: the learner's progress, whichever
        version the robot runs (with `follow="recommended"` that may stay an older one on purpose). Reads
        the `latest` pointer, and a version's config only when the pointer moved."""
        try:
            newest = self._registry.latest_version()
            if newest is not None and newest != self._newest[0]:
                self._newest = (newest, _real_steps(self._registry.config(newest).source))
        except PolicyError as e:
            log.warning("learner progress unknown: %s", e)  # keeps the last known figure
        return self._newest[1]

    def refresh(self) -> bool:
        """Load the followed version if it differs from the current actor's; True when the actor changed."""
        if not self.enabled:
            return False
        try:
            latest = self._watch.poll()
            if latest is None:
                return False
            actor = self._load(latest)
            actor.check_obs(self._obs_shapes)
            if actor.config.action_dim != self._action_dim:
                raise PolicyError(
                    f"policy v{latest} outputs {actor.config.action_dim} actions, the robot takes {self._action_dim}"
                )
        except (PolicyError, VersionError) as e:
            self.error = str(e)
            log.error("keeping policy v%s: %s", self.version, e)
            return False
        self._watch.accept(latest)
        self.actor, self.error = actor, None
        self.swaps += 1
        log.info("policy v%d loaded", actor.version)
        return True

    def _load(self, version: int):
        config, tensors = self._registry.load(version)
        if config.action_chunk > 1:  # kept out: the bridge plays one action per control step
            raise PolicyError(f"policy v{version} outputs chunks of {config.action_chunk} actions "
                              "(learner.action_chunk), which the bridge does not play; train with action_chunk 1")
        vdir = self._registry.dir.path(version)
        onnx_file = vdir / ONNX_FILE
        if onnx_file.exists():
            return OnnxActor(onnx_file, config)  # imports onnxruntime on first use
        if (vdir / ENCODER_FILE).exists():  # a pixel policy: only the ONNX file holds its encoder for the robot
            raise PolicyError(f"policy v{version} is a pixel policy ({ENCODER_FILE} is there) but {onnx_file} is "
                              "missing: the robot cannot run its encoder without it; publish the version again "
                              "(worldsample.policy.onnx_export.publish_vision_policy)")
        return NumpyActor(config, tensors)

    def act(self, obs: Mapping[str, np.ndarray], hold: np.ndarray) -> np.ndarray:
        if self.actor is None:
            return hold.copy()
        if self.explore and self.actor.config.stochastic:
            return self.actor.act(obs, explore=True, rng=self._rng, noise_scale=self.explore_scale)
        return self.actor.act(obs, rng=self._rng)


def _real_steps(source: Mapping) -> int | None:
    steps = source.get("real_steps")
    return int(steps) if isinstance(steps, int | float) and not isinstance(steps, bool) else None
