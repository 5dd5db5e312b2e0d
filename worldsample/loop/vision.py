"""The image profile inside the loop (loop.vision): the frozen pixel encoder and the `latent` key.

    ensure_encoder   pretrains the encoder on the demo group once, before learning, and saves it in
                     RUN/vision/encoder; on resume (or any later call) it is loaded, never retrained
    LatentReader     a group reader whose cache holds `latent` (the frozen encoder's output of the
                     episode's frames, computed once per episode when it is loaded) instead of the
                     frames; every other key is cached as usual, so samplers, the mixer and the learner
                     read `latent` like any vector key and the frames never reach them

The task state (`state`) may still be stored for analysis; the learner's readers do not cache it
(loop/config.py refuses `state` in learner.obs_keys while vision is on). Imports torch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from worldsample.loop.config import LATENT_KEY, LoopConfig, VisionConfig
from worldsample.store import EpisodeStore
from worldsample.store.cache import StepCache
from worldsample.store.reader import GroupReader
from worldsample.vision.encoder import Encoder, VisionError, encode_frames, load_encoder

log = logging.getLogger(__name__)


def encoder_dir(run_dir: Path | str) -> Path:
    return Path(run_dir) / "vision" / "encoder"


def _check_fits(encoder: Encoder, vision: VisionConfig, where: Path) -> Encoder:
    c = encoder.config
    if list(c.cameras) != list(vision.cameras) or c.latent_dim != vision.latent_dim:
        raise VisionError(f"the run's encoder in {where} sees {c.cameras} with latent_dim {c.latent_dim}; the config "
                          f"says loop.vision.cameras={vision.cameras}, latent_dim={vision.latent_dim}. The encoder is "
                          "frozen for the run's life: start a new run to change it")
    return encoder


def ensure_encoder(run_dir: Path | str, loop: LoopConfig) -> tuple[Encoder, dict[str, float]]:
    """The run's frozen encoder: loaded from RUN/vision/encoder when there, else pretrained on the
    demo group (behaviour cloning under random shift) and saved there first. Returns the encoder and
    pretraining metrics ({} when it was loaded)."""
    from worldsample.vision.pretrain import PretrainConfig, pretrain_from_run

    vision, d = loop.vision, encoder_dir(run_dir)
    if (d / "encoder.json").exists():
        return _check_fits(load_encoder(d), vision, d), {}
    cfg = PretrainConfig(latent_dim=vision.latent_dim, channels=vision.channels, strides=vision.strides,
                         steps=vision.pretrain_steps, batch_size=vision.pretrain_batch, shift_pad=vision.shift_pad,
                         seed=loop.seed, threads=vision.threads, eval_every=max(vision.pretrain_steps, 1))
    result = pretrain_from_run(run_dir, vision.cameras, d, cfg)
    last = result.history[-1] if result.history else {}
    metrics = {"vision/pretrain_seconds": float(result.seconds), "vision/pretrain_steps": float(vision.pretrain_steps)}
    metrics.update({f"vision/{k}": float(v) for k, v in last.items() if isinstance(v, int | float)})
    return _check_fits(load_encoder(d), vision, d), metrics


class LatentCache(StepCache):
    """A step cache that stores `latent` in place of the encoder's camera frames."""

    def __init__(self, specs: dict, encoder: Encoder):
        self.encoder = encoder
        self.image_keys = list(encoder.config.keys)
        kept = {k: v for k, v in specs.items() if k not in self.image_keys}
        kept[LATENT_KEY] = ((encoder.config.latent_dim,), np.dtype(np.float32))
        super().__init__(kept)

    def add(self, episode_id: int, arrays: dict[str, np.ndarray], terminal: bool) -> None:
        latent = encode_frames(self.encoder, {k: arrays[k] for k in self.image_keys})
        rest = {k: v for k, v in arrays.items() if k not in self.image_keys}
        super().add(episode_id, {**rest, LATENT_KEY: latent}, terminal)


class LatentReader(GroupReader):
    """A cached reader of `keys` (which may name `latent`) whose cache derives `latent` from the
    encoder's cameras, once per episode (the encoder is frozen, so a cached latent never goes stale)."""

    def __init__(self, store: EpisodeStore, name: str, encoder: Encoder, keys: Iterable[str]):
        self.encoder = encoder
        stored = [k for k in keys if k != LATENT_KEY]
        for k in encoder.config.keys:
            if k not in stored:
                stored.append(k)
        schema = store.schema(name)
        for k in encoder.config.keys:
            spec = schema.keys.get(k)
            want = (encoder.config.height, encoder.config.width, 3)
            if spec is None:
                raise VisionError(f"group {name!r} has no {k}: the encoder sees {encoder.config.cameras}")
            if tuple(spec.shape) != want:
                raise VisionError(f"group {name!r} holds {k} as {tuple(spec.shape)}; the encoder wants {want}")
        super().__init__(store._group_path(name), name, keys=stored, cache=True)

    def _refresh(self) -> int:
        # GroupReader builds a plain StepCache over the stored keys just before its first refresh
        if not isinstance(self.cache, LatentCache):
            self.cache = LatentCache(self.cache._specs, self.encoder)
        return super()._refresh()
