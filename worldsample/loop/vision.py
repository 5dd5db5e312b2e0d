"""The image profile inside the loop (loop.vision): the frozen pixel encoder and the `latent` key.

    ensure_encoder   pretrains the encoder on the demo group once, before learning, and saves it in
                     RUN/vision/encoder; on resume (or any later call) it is loaded, never retrained
    LatentReader     a group reader whose cache holds `latent` (the frozen encoder's output of the
                     episode's frames, computed once per episode when it is loaded) instead of the
                     frames; every other key is cached as usual, so samplers, the mixer and the learner
                     read `latent` like any vector key and the frames never reach them. A group that
                     stores `latent` itself (`synthetic`, written by the world model) is read as is
    ensure_success_classifier  loop.reward=classifier: the success classifier, trained on the demos once
                     after the encoder and saved in RUN/vision/success, loaded on resume; the readers
                     then cache its per-step decision `success_pred`, which the learner reads as reward
    train_success, use_classifier  the classifier trained again on demo + real as the run goes
                     (loop.vision.success_retrain_every_episodes) and its decisions re-derived in the caches
    frozen_encoder   the run's encoder, loaded (never trained) for the world model and the synthesiser
    LatentReaders    a reader factory (worldsample.world_model.data.ReaderFactory) of LatentReaders
    world_model_config  the loop's world model fitted to the store on the image profile: a vector
                     model over {latent: D, proprio: P}, no cameras, never the task state

The task state (`state`) may still be stored for analysis; the learner's readers do not cache it
(loop/config.py refuses `state` in learner.obs_keys while vision is on). Imports torch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from worldsample.loop.config import LATENT_KEY, SUCCESS_PRED_KEY, LoopConfig, VisionConfig
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
    """The run's frozen encoder: loaded from RUN/vision/encoder when there, else pretrained on
    loop.vision.pretrain_groups (behaviour cloning under random shift) and saved there first.
    Returns the encoder and pretraining metrics ({} when it was loaded)."""
    from worldsample.vision.pretrain import PretrainConfig, pretrain_from_run

    vision, d = loop.vision, encoder_dir(run_dir)
    if (d / "encoder.json").exists():
        return _check_fits(load_encoder(d), vision, d), {}
    cfg = PretrainConfig(latent_dim=vision.latent_dim, channels=vision.channels, strides=vision.strides,
                         steps=vision.pretrain_steps, batch_size=vision.pretrain_batch, shift_pad=vision.shift_pad,
                         seed=loop.seed, threads=vision.threads, eval_every=max(vision.pretrain_steps, 1))
    result = pretrain_from_run(run_dir, vision.cameras, d, cfg, groups=vision.pretrain_groups)
    last = result.history[-1] if result.history else {}
    metrics = {"vision/pretrain_seconds": float(result.seconds), "vision/pretrain_steps": float(vision.pretrain_steps),
               "vision/pretrain_samples": float(result.samples)}
    metrics.update({f"vision/{k}": float(v) for k, v in last.items() if isinstance(v, int | float)})
    return _check_fits(load_encoder(d), vision, d), metrics


def success_dir(run_dir: Path | str) -> Path:
    return Path(run_dir) / "vision" / "success"


def ensure_success_classifier(run_dir: Path | str, loop: LoopConfig, encoder: Encoder):
    """loop.reward=classifier: the run's success classifier on the frozen `encoder`, loaded from
    RUN/vision/success when there (refused when it was trained on another encoder: never retrained
    silently), else trained once on the demo group (operator labels applied by the readers), with its
    threshold calibrated and its precision/recall measured on held-out demo episodes, and saved there.
    Returns the classifier and metrics ({} when it was loaded)."""
    from worldsample.vision.success import encoder_fingerprint, load_success_classifier

    d, fp = success_dir(run_dir), encoder_fingerprint(encoder)
    if (d / "success.json").exists():
        clf = load_success_classifier(d)
        c = clf.config
        if c.encoder_fingerprint != fp or list(c.encoder_cameras) != list(encoder.config.cameras) \
                or c.latent_dim != encoder.config.latent_dim:
            raise VisionError(f"the success classifier in {d} was trained on another encoder than the run's "
                              f"({encoder_dir(run_dir)}): it is not retrained silently; remove {d} to train a new one")
        return clf, {}
    return train_success(run_dir, loop, encoder, ["demo"])


def train_success(run_dir: Path | str, loop: LoopConfig, encoder: Encoder, groups: list[str],
                  labelled_only: tuple[str, ...] = ()):
    """Train the run's success classifier on `groups` (episodes of `labelled_only` groups only where an
    operator labelled them), save it in RUN/vision/success (replacing the one there) and return it as
    loaded from there, with its metrics (`vision/success_*`: held-out precision / recall where defined,
    threshold, frames and episodes trained on)."""
    from worldsample.vision.success import (
        SuccessTrainConfig,
        load_success_classifier,
        load_success_data,
        save_success_classifier,
        train_success_classifier,
    )

    d, vision = success_dir(run_dir), loop.vision
    data = load_success_data(run_dir, encoder, groups=groups, labelled_only=labelled_only)
    cfg = SuccessTrainConfig(steps=vision.success_steps, seed=loop.seed, threads=vision.threads)
    result = train_success_classifier(data, encoder, cfg)
    save_success_classifier(result.classifier, d)
    clf = load_success_classifier(d)  # what a resumed run will use, bit for bit
    metrics = {"vision/success_seconds": float(result.seconds), "vision/success_threshold": float(clf.threshold),
               "vision/success_frames": float(len(data)), "vision/success_episodes": float(len(data.episodes)),
               "vision/success_labelled": float(data.labelled)}
    for name, scores in (("success", result.test), ("success_calib", result.calibration)):
        for k in ("precision", "recall"):
            v = (scores or {}).get(k)
            if v is not None:  # None: no positive prediction / no success step in those held-out episodes
                metrics[f"vision/{name}_{k}"] = float(v)
    log.info("success classifier trained on %d steps of %s: test %s", len(data), groups, result.test)
    return clf, metrics


def use_classifier(readers, classifier) -> None:
    """Make `classifier` the reward of every reader in `readers` (LatentReaders of one run): later
    episodes are cached with its decisions, and every cached step's `success_pred` is derived again
    (a reader whose cache is not built yet builds it with the new classifier)."""
    for reader in readers:
        reader.classifier = classifier
        if isinstance(reader.cache, LatentCache):
            reader.cache.use(classifier)


class LatentCache(StepCache):
    """A step cache that stores `latent` in place of the encoder's camera frames (or, `encoder=None`,
    keeps a stored `latent`) and, with a success `classifier`, the derived per-step column
    `success_pred`: the classifier's decision on that step's [latent, proprio] (loop.reward=classifier)."""

    def __init__(self, specs: dict, encoder: Encoder | None, classifier=None, latent_dim: int | None = None):
        self.encoder, self.classifier = encoder, classifier
        self.image_keys = list(encoder.config.keys) if encoder is not None else []
        kept = {k: v for k, v in specs.items() if k not in self.image_keys and k != SUCCESS_PRED_KEY}
        kept[LATENT_KEY] = ((encoder.config.latent_dim if encoder is not None else latent_dim,), np.dtype(np.float32))
        if classifier is not None:
            kept[SUCCESS_PRED_KEY] = ((), np.dtype(bool))
        super().__init__(kept)

    def add(self, episode_id: int, arrays: dict[str, np.ndarray], terminal: bool) -> None:
        if self.encoder is not None:
            latent = encode_frames(self.encoder, {k: arrays[k] for k in self.image_keys})
        else:
            latent = np.asarray(arrays[LATENT_KEY], np.float32)
        rest = {k: v for k, v in arrays.items() if k not in self.image_keys}
        out = {**rest, LATENT_KEY: latent}
        if self.classifier is not None:
            out[SUCCESS_PRED_KEY] = success_decisions(self.classifier, latent, arrays)
        super().add(episode_id, out, terminal)

    def use(self, classifier) -> None:
        """Cache later episodes with `classifier`'s decisions and derive every cached step's again."""
        self.classifier = classifier
        if self.size:
            views = {k: self.view(k) for k in self.data}
            self.view(SUCCESS_PRED_KEY)[:] = success_decisions(classifier, views[LATENT_KEY], views)
            self.version += 1  # a change: samplers derive their rewards and returns again


def success_decisions(classifier, latent: np.ndarray, arrays: dict[str, np.ndarray]) -> np.ndarray:
    """(N,) bool: the success classifier's decision on each step's [latent, proprio]."""
    key = classifier.config.proprio_key if classifier.config.proprio_dim else None
    return classifier.predict(latent, arrays[key] if key else None)[1]


class LatentReader(GroupReader):
    """A cached reader of `keys` (which may name `latent`) whose cache derives `latent` from the
    encoder's cameras, once per episode (the encoder is frozen, so a cached latent never goes stale).
    A group that stores `latent` (the world model's `synthetic` episodes) is read as stored: its
    latent must have the encoder's size, and it needs no frames.

    With a success `classifier` (loop.reward=classifier) the cache also holds `success_pred`, the
    classifier's decision on each step's [latent, proprio] (from the stored latent on a group that
    stores it), and `keys` lists it, so a sampler can read it as the reward."""

    def __init__(self, store: EpisodeStore, name: str, encoder: Encoder, keys: Iterable[str], classifier=None):
        self.encoder, self.classifier = encoder, classifier
        keys, schema = [k for k in keys if k != SUCCESS_PRED_KEY], store.schema(name)
        if classifier is not None and classifier.config.proprio_dim and classifier.config.proprio_key not in keys:
            keys.append(classifier.config.proprio_key)
        stored_latent = schema.keys.get(LATENT_KEY)
        self.encodes = stored_latent is None  # False: `latent` is a stored key of this group
        if not self.encodes:
            if tuple(stored_latent.shape) != (encoder.config.latent_dim,):
                raise VisionError(f"group {name!r} stores {LATENT_KEY} as {tuple(stored_latent.shape)}; the run's "
                                  f"encoder makes ({encoder.config.latent_dim},)")
            if classifier is not None and LATENT_KEY not in keys:
                keys.append(LATENT_KEY)
            super().__init__(store._group_path(name), name, keys=keys, cache=True)
            self._derives()
            return
        stored = [k for k in keys if k != LATENT_KEY]
        for k in encoder.config.keys:
            if k not in stored:
                stored.append(k)
        for k in encoder.config.keys:
            spec = schema.keys.get(k)
            want = (encoder.config.height, encoder.config.width, 3)
            if spec is None:
                raise VisionError(f"group {name!r} has no {k}: the encoder sees {encoder.config.cameras}")
            if tuple(spec.shape) != want:
                raise VisionError(f"group {name!r} holds {k} as {tuple(spec.shape)}; the encoder wants {want}")
        super().__init__(store._group_path(name), name, keys=stored, cache=True)
        self._derives()

    def _derives(self) -> None:
        if self.classifier is not None:  # derived, never read from the store (see _read)
            self.keys.append(SUCCESS_PRED_KEY)

    def _refresh(self) -> int:
        # GroupReader builds a plain StepCache over the stored keys just before its first refresh
        if (self.encodes or self.classifier is not None) and not isinstance(self.cache, LatentCache):
            self.cache = LatentCache(self.cache._specs, self.encoder if self.encodes else None, self.classifier,
                                     latent_dim=self.encoder.config.latent_dim)
        return super()._refresh()

    def _read(self, rec, keys: Iterable[str], verify: bool = False) -> dict[str, np.ndarray]:
        return super()._read(rec, [k for k in keys if k != SUCCESS_PRED_KEY], verify)

    def episode(self, episode: int, keys: Iterable[str] | None = None, verify: bool = True) -> dict[str, np.ndarray]:
        """As GroupReader.episode; `latent` (on a group that derives it) comes from the cache when the
        episode is cached, else from encoding its stored frames."""
        keys = list(keys) if keys is not None else None
        if not self.encodes or keys is None or LATENT_KEY not in keys:
            return super().episode(episode, keys, verify)
        rest = [k for k in keys if k != LATENT_KEY]
        c = self.cache
        with self._lock:
            if episode in c.episode_ids and all(k in c.data for k in rest):
                i = c.episode_ids.index(episode)
                s, n = int(c.ep_start[i]), int(c.ep_len[i])
                self._check_still_committed(episode)
                return {k: c.view(k)[s : s + n].copy() for k in keys}
        frames = list(self.encoder.config.keys)
        data = super().episode(episode, [*rest, *(k for k in frames if k not in rest)], verify)
        out = {k: data[k] for k in rest}
        out[LATENT_KEY] = encode_frames(self.encoder, {k: data[k] for k in frames})
        return out


def frozen_encoder(run_dir: Path | str, vision: VisionConfig) -> Encoder:
    """The run's encoder as the learner pretrained it (RUN/vision/encoder); never trained here."""
    d = encoder_dir(run_dir)
    if not (d / "encoder.json").exists():
        raise VisionError(f"no encoder in {d}: on the image profile the learner pretrains it before the world model "
                          "or the synthesiser reads `latent`")
    return _check_fits(load_encoder(d), vision, d)


class LatentReaders:
    """A reader factory (store, group, keys) -> LatentReader, for the world model and the synthesiser.
    A group's reader is made once per (store root, group, keys) and reused, so each episode is encoded
    once for the factory's life (its users refresh the readers they get)."""

    def __init__(self, encoder: Encoder):
        self.encoder = encoder
        self._made: dict[tuple[str, str, tuple[str, ...]], LatentReader] = {}

    def __call__(self, store: EpisodeStore, group: str, keys: Iterable[str]) -> LatentReader:
        key = (str(store.root), group, tuple(keys))
        if key not in self._made:
            self._made[key] = LatentReader(store, group, self.encoder, key[2])
        return self._made[key]


def world_model_config(loop: LoopConfig, store: EpisodeStore):
    """loop.world_model fitted to the demos on the image profile: vector keys {latent: D, proprio: P}
    in loop.world_model's order (sizes of stored keys from the schema, D from the encoder), no cameras.
    Refuses the task state (loop/config.py derives these keys from loop.vision, so it never is)."""
    from worldsample.world_model.modes import fit_to_store

    wm = loop.world_model
    bad = [k for k in wm.vector_keys if k == "state" or k.startswith("image_")] + list(wm.image_keys)
    if bad:
        raise VisionError(f"the image profile's world model reads {LATENT_KEY} and proprioception only, not {bad}")
    fitted = fit_to_store(wm, store, "demo", images=False)
    missing = [k for k in wm.vector_keys if k != LATENT_KEY and k not in fitted.vector_keys]
    if missing:
        raise VisionError(f"the demos store no {missing}, which the world model's vector keys name")
    vectors = {k: loop.vision.latent_dim if k == LATENT_KEY else fitted.vector_keys[k] for k in wm.vector_keys}
    return type(fitted).model_validate({**fitted.model_dump(), "vector_keys": vectors})
