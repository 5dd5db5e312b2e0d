"""The three training modes, as which groups feed the trainer and where training starts.

- demo: post-train on demonstrations (group weights `train.groups`, by default demo only);
- loop: continual post-training: start from the run's latest checkpoint and keep refining on the
  demonstrations plus the real rollouts as they are committed, one checkpoint per round;
- cotrain: deployment-domain groups and the randomised `sim` group mixed by `train.sim_weight`;
  the domain embedding tells the backbone which domain a window comes from.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path

import torch

from worldsample.paths import RunFiles
from worldsample.store import EpisodeStore
from worldsample.world_model import checkpoint, heads, uncertainty
from worldsample.world_model.config import Mode, WorldModelConfig
from worldsample.world_model.data import ReaderFactory, WindowSource
from worldsample.world_model.errors import NotEnoughDataError
from worldsample.world_model.generators import make_generator
from worldsample.world_model.model import WorldModel
from worldsample.world_model.train import OnStep, Trainer, cache_keys

log = logging.getLogger(__name__)


def checkpoint_dir(run_dir: Path) -> Path:
    return RunFiles.of(run_dir).world_model


def fit_to_store(cfg: WorldModelConfig, store: EpisodeStore, group: str, images: bool = True) -> WorldModelConfig:
    """The observation fields of `cfg` taken from a group's schema: the model must fit the data.
    `images=False` keeps the model on vectors even when the group has cameras."""
    schema = store.schema(group)
    images = schema.image_keys if images else []
    vectors = {k: math.prod(schema.keys[k].shape) for k in cfg.vector_keys if k in schema.keys}
    data = cfg.model_dump()
    # a layout (quaternions, previous frame) is declared for a key of one size (the simulated arm's 39-dim
    # state): another robot's key of that name and another size has another layout, so it does not apply
    layouts = {}
    for field in ("quaternions", "previous_frame"):
        declared = getattr(cfg, field)
        layouts[field] = {k: v for k, v in declared.items() if vectors.get(k) == cfg.vector_keys.get(k)}
        for k in set(declared) - set(layouts[field]):
            log.warning("world model: %s of %r left out: it has %s values in group %r, not the %d they were "
                        "declared for (set world_model.%s for this robot)", field, k, vectors.get(k, "no"), group,
                        cfg.vector_keys[k], field)
    data.update(image_keys=images, vector_keys=vectors, action_dim=schema.action_dim, **layouts)
    if images:
        data["image_size"] = schema.keys[images[0]].shape[0]
    return WorldModelConfig.model_validate(data)


def group_weights(store: EpisodeStore, cfg: WorldModelConfig, mode: Mode) -> dict[str, float]:
    weights = dict(cfg.train.groups)
    if mode == "loop" and "real" in store.groups:
        weights.setdefault("real", sum(weights.values()) or 1.0)  # rollouts as much as demos by default
    if mode == "cotrain":
        if "sim" not in store.groups:
            raise NotEnoughDataError("cotrain needs a sim group: worldsample demos collect --domain sim")
        real = {g: w for g, w in weights.items() if g != "sim"}
        total = sum(real.values()) or 1.0
        weights = {g: (1 - cfg.train.sim_weight) * w / total for g, w in real.items()} | {"sim": cfg.train.sim_weight}
    return weights


def calibrate_heads(model: WorldModel, source: WindowSource) -> dict:
    """Success/done thresholds from the held-out episodes of the training groups (sim excluded: the
    labels that matter are the deployment domain's); {} when there is none to calibrate on."""
    try:
        return heads.calibrate(model, source.heldout(exclude=("sim",)))
    except NotEnoughDataError:
        return {}


def calibrate_uncertainty(model: WorldModel, source: WindowSource) -> dict:
    """The uncertainty veto's per-step cuts from the same held-out episodes (uncertainty.py)."""
    return uncertainty.calibrate(model, source.heldout(exclude=("sim",)))


def train_run(
    run_dir: Path,
    cfg: WorldModelConfig,
    mode: Mode,
    init: Path | None = None,
    rounds: int = 1,
    on_step: OnStep | None = None,
    on_round: Callable[[int, Path], None] | None = None,
    out_dir: Path | None = None,
    reader: ReaderFactory | None = None,
) -> tuple[WorldModel, Path]:
    """Train as `mode` says; returns the model and its last checkpoint's JSON path. `reader` makes
    the groups' cached readers (default: the store's; the image profile's derive `latent`)."""
    store = EpisodeStore(run_dir)
    out_dir = out_dir or checkpoint_dir(run_dir)
    weights = group_weights(store, cfg, mode)
    source = WindowSource(store, weights, cache_keys(cfg), cfg.train.holdout_every, reader=reader)
    start = init if init is not None else (out_dir if mode == "loop" else None)
    if start is not None:
        model, _ = checkpoint.load(start, expect=cfg, device=cfg.train.device)
        model.cfg = cfg  # same architecture (checked); training and sampler settings come from the caller
        model.generator = make_generator(cfg.generator)
    else:
        # the process's torch seed is not fixed (imports may reseed it): a fresh model's weights come from the config
        torch.manual_seed(cfg.train.seed)
        model = WorldModel(cfg).to(cfg.train.device)
    trainer = Trainer(model, cfg)
    # a model whose latent is the normalised state (no autoencoder) follows the data's statistics every
    # round: the demonstrations alone cover a sliver of the states the robot reaches later (an object at
    # rest in every demo has no spread to normalise its rotation by). An encoder's latent scale stays fixed.
    follow = trainer.ae_opt is None
    path = None
    for r in range(rounds if mode == "loop" else 1):
        source.refresh()
        if start is None or follow:  # fresh model: statistics first, they fix the latent scale
            trainer.fit_vector_stats(source)
        trainer.fit_autoencoder(source, cfg.train.ae_steps, on_step)
        if start is None or follow:
            trainer.fit_latent_stats(source)
            start = start or "fitted"
        trainer.fit_dynamics(
            source, cfg.train.dyn_steps, on_step, refresh_every=cfg.train.loop_refresh_every if mode == "loop" else 0
        )
        meta = {
            "mode": mode,
            "round": r,
            "groups": weights,
            "episodes": {g: len(gw.episodes()) for g, gw in source.groups.items()},
        }
        if cfg.heads.calibrate:
            meta["heads"] = calibrate_heads(model, source)
        if cfg.uncertainty.calibrate:
            meta["uncertainty"] = calibrate_uncertainty(model, source)
        path = checkpoint.save(out_dir, model, meta)
        if on_round:
            on_round(r, path)
    return model, path
