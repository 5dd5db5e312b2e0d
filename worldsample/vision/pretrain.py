"""Pretraining the pixel encoder on a run's demonstrations, before it is frozen.

Loss: behaviour cloning of the expert's action from [latent, proprio] through an MLP actor of the
registry's format (worldsample/policy/config.py), on frames under random shift (augment.py);
optionally plus inverse dynamics, predicting a_t from the latents of frames t and t+1 of the same
episode. The encoder and the BC actor are trained together; the encoder is then saved
(encoder.save_encoder) and used frozen, the BC actor can be published as a policy (with the
encoder, as ONNX: worldsample.policy.onnx_export.publish_vision_policy).

    data = load_demos(run_dir, cameras=["corner", "gripperPOV"])
    train, val = data.split(val_episodes=3)
    result = pretrain(train, PretrainConfig(steps=1500), val=val)
    save_encoder(result.encoder, run_dir / "vision" / "encoder")
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import nn

from worldsample.policy.actor import MLPActor
from worldsample.policy.config import ObsInput, PolicyConfig
from worldsample.store import EpisodeStore
from worldsample.vision.augment import random_shift
from worldsample.vision.encoder import Encoder, EncoderConfig, VisionError, image_key, save_encoder

log = logging.getLogger(__name__)

LATENT_KEY = "latent"


class PretrainConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    latent_dim: int = Field(50, gt=0, le=4096)
    channels: list[int] = Field(default=[32, 32, 32, 32], min_length=1, max_length=8)
    strides: list[int] = Field(default=[2, 2, 1, 1], min_length=1, max_length=8)
    hidden: list[int] = Field(default=[256, 256], max_length=8, description="the BC actor's MLP")
    steps: int = Field(1500, ge=1, le=1_000_000)
    batch_size: int = Field(128, ge=1, le=65_536)
    lr: float = Field(1e-3, gt=0.0)
    shift_pad: int = Field(4, ge=0, le=32, description="random shift of up to this many pixels (0 = none)")
    inverse_dynamics: float = Field(0.0, ge=0.0, description="weight of the inverse-dynamics loss (0 = off)")
    seed: int = 0
    threads: int | None = Field(None, ge=1, description="torch CPU threads while training (None = as set)")
    eval_every: int = Field(250, ge=1, description="steps between validation losses (when val data is given)")


@dataclass
class DemoData:
    """Steps of whole episodes, concatenated: frames per camera, proprio, the expert's action."""

    cameras: list[str]
    images: dict[str, np.ndarray]  # camera -> (N, H, W, 3) uint8
    proprio: np.ndarray  # (N, P) float32
    action: np.ndarray  # (N, A) float32
    episode: np.ndarray  # (N,) int64: the store's episode id of each step

    def __post_init__(self) -> None:
        n = len(self.action)
        if any(len(a) != n for a in [*self.images.values(), self.proprio, self.episode]):
            raise VisionError("demo arrays hold different numbers of steps")

    def __len__(self) -> int:
        return len(self.action)

    @property
    def has_next(self) -> np.ndarray:
        """(N,) bool: step t+1 exists in the same episode (the pairs inverse dynamics learns from)."""
        nxt = np.zeros(len(self), bool)
        nxt[:-1] = self.episode[1:] == self.episode[:-1]
        return nxt

    @property
    def episodes(self) -> list[int]:
        return list(dict.fromkeys(self.episode.tolist()))

    def select(self, episodes: Iterable[int]) -> DemoData:
        keep = np.isin(self.episode, list(episodes))
        return DemoData(
            list(self.cameras), {c: a[keep] for c, a in self.images.items()}, self.proprio[keep], self.action[keep],
            self.episode[keep],
        )

    def split(self, val_episodes: int, seed: int = 0) -> tuple[DemoData, DemoData]:
        """(train, val) by whole episodes: `val_episodes` drawn at random are held out."""
        eps = self.episodes
        if not 0 <= val_episodes < len(eps):
            raise VisionError(f"cannot hold out {val_episodes} of {len(eps)} episodes")
        val = set(np.random.default_rng(seed).choice(eps, size=val_episodes, replace=False).tolist())
        return self.select([e for e in eps if e not in val]), self.select(sorted(val))


def load_demos(
    run_dir: Path | str,
    cameras: Sequence[str],
    groups: Sequence[str] = ("demo",),
    proprio_key: str = "proprio",
    max_episodes: int | None = None,
) -> DemoData:
    """Every committed episode of `groups` in RUN's store (each checked against its checksums), with
    the cameras' frames, `proprio_key` and the action. VisionError when a group lacks a key."""
    store = EpisodeStore(run_dir)
    keys = [image_key(c) for c in cameras] + [proprio_key, "action"]
    parts: list[dict[str, np.ndarray]] = []
    ids: list[np.ndarray] = []
    offset = 0
    for g in groups:
        if g not in store.groups:
            raise VisionError(f"group {g!r} is not in {store.root} (it has {sorted(store.groups)}); "
                              + ("collect it with demos.sim_episodes > 0 or `worldsample demos collect --domain sim`"
                                 if g == "sim" else "collect the demos first"))
        schema = store.schema(g)
        missing = [k for k in keys if k not in schema.keys]
        if missing:
            raise VisionError(
                f"group {g!r} of {store.root} has no {missing}; it has {sorted(schema.keys)} "
                "(collect demos with these cameras in env.cameras)"
            )
        reader = store.reader(g, keys=keys, cache=False)
        for rec in reader.episode_records():
            if max_episodes is not None and len(parts) >= max_episodes:
                break
            parts.append(reader.episode(rec.episode, keys=keys))
            ids.append(np.full(rec.length, offset + rec.episode, np.int64))
        offset += 1 << 32  # episode ids of different groups never collide
    if not parts:
        raise VisionError(f"no committed episodes in groups {list(groups)} of {store.root}")
    return DemoData(
        cameras=list(cameras),
        images={c: np.concatenate([p[image_key(c)] for p in parts]) for c in cameras},
        proprio=np.concatenate([p[proprio_key].reshape(len(p[proprio_key]), -1) for p in parts]).astype(np.float32),
        action=np.concatenate([p["action"] for p in parts]).astype(np.float32),
        episode=np.concatenate(ids),
    )


@dataclass
class PretrainResult:
    encoder: Encoder
    actor: MLPActor  # the BC actor over [latent, proprio]
    history: list[dict[str, float]] = field(default_factory=list)  # step, bc, idm, val_bc
    samples: int = 0  # frames (steps) trained on
    seconds: float = 0.0

    def policy(self) -> tuple[PolicyConfig, dict[str, np.ndarray]]:
        """The BC actor in the registry's format (obs [latent, proprio])."""
        return self.actor.config, self.actor.export_tensors()


def _bc_config(latent_dim: int, proprio_dim: int, action_dim: int, hidden: list[int]) -> PolicyConfig:
    return PolicyConfig(
        obs=[ObsInput(key=LATENT_KEY, dim=latent_dim), ObsInput(key="proprio", dim=proprio_dim)],
        action_dim=action_dim, hidden=list(hidden), action_low=[-1.0] * action_dim, action_high=[1.0] * action_dim,
        obs_normalization=True, source={"kind": "bc_pretrain"},
    )


def pretrain(
    data: DemoData,
    cfg: PretrainConfig | None = None,
    val: DemoData | None = None,
    on_log: Callable[[dict[str, float]], None] | None = None,
) -> PretrainResult:
    """Train a new encoder and BC actor (and, with `cfg.inverse_dynamics`, an inverse-dynamics head)
    on `data`; `val` gives a held-out BC loss (no augmentation) every `eval_every` steps and at the end."""
    cfg = cfg or PretrainConfig()
    if len(data) == 0:
        raise VisionError("no demo steps to pretrain on")
    h, w = data.images[data.cameras[0]].shape[1:3]
    enc_cfg = EncoderConfig(
        cameras=data.cameras, height=h, width=w, latent_dim=cfg.latent_dim, channels=cfg.channels, strides=cfg.strides,
        source={"pretrain": cfg.model_dump(), "steps_of_data": len(data), "episodes": len(data.episodes)},
    )
    threads = torch.get_num_threads()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    try:
        torch.manual_seed(cfg.seed)
        gen = torch.Generator().manual_seed(cfg.seed)
        rng = np.random.default_rng(cfg.seed)
        encoder = Encoder(enc_cfg)
        actor = MLPActor(_bc_config(cfg.latent_dim, data.proprio.shape[1], data.action.shape[1], cfg.hidden))
        with torch.no_grad():  # latents are in [-1, 1]; proprio is scaled by the data
            actor.obs_mean[cfg.latent_dim :] = torch.from_numpy(data.proprio.mean(0))
            actor.obs_std[cfg.latent_dim :] = torch.from_numpy(data.proprio.std(0) + 1e-3)
        a_dim = data.action.shape[1]
        idm = nn.Sequential(nn.Linear(2 * cfg.latent_dim, 256), nn.ReLU(), nn.Linear(256, a_dim))
        params = [*encoder.parameters(), *actor.parameters()]
        if cfg.inverse_dynamics > 0:
            params += list(idm.parameters())
        opt = torch.optim.Adam(params, lr=cfg.lr)

        images = {c: torch.from_numpy(data.images[c]) for c in data.cameras}
        proprio, action = torch.from_numpy(data.proprio), torch.from_numpy(data.action)
        pool = np.flatnonzero(data.has_next) if cfg.inverse_dynamics > 0 else np.arange(len(data))
        if len(pool) == 0:
            raise VisionError("inverse dynamics needs episodes of at least two steps")
        result = PretrainResult(encoder, actor, samples=len(data))
        t0 = time.perf_counter()
        encoder.train()
        actor.train()
        for step in range(1, cfg.steps + 1):
            idx = torch.from_numpy(rng.choice(pool, size=min(cfg.batch_size, len(pool)), replace=False))
            z = encoder(*(random_shift(images[c][idx], cfg.shift_pad, gen) for c in data.cameras))
            bc = nn.functional.mse_loss(actor(torch.cat([z, proprio[idx]], 1)), action[idx])
            loss = bc
            entry = {"step": float(step), "bc": bc.item()}
            if cfg.inverse_dynamics > 0:
                z1 = encoder(*(random_shift(images[c][idx + 1], cfg.shift_pad, gen) for c in data.cameras))
                idm_loss = nn.functional.mse_loss(torch.tanh(idm(torch.cat([z, z1], 1))), action[idx])
                loss = loss + cfg.inverse_dynamics * idm_loss
                entry["idm"] = idm_loss.item()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if val is not None and (step % cfg.eval_every == 0 or step == cfg.steps):
                entry["val_bc"] = bc_loss(encoder, actor, val)
                encoder.train()
                actor.train()
            if step == 1 or step % cfg.eval_every == 0 or step == cfg.steps:
                result.history.append(entry)
                if on_log:
                    on_log(entry)
        encoder.eval()
        actor.eval()
        result.seconds = time.perf_counter() - t0
        return result
    finally:
        torch.set_num_threads(threads)


def bc_loss(encoder: Encoder, actor: MLPActor, data: DemoData, batch_size: int = 512) -> float:
    """Mean squared action error of the actor on `data`, frames unshifted."""
    encoder.eval()
    actor.eval()
    total = 0.0
    with torch.no_grad():
        for lo in range(0, len(data), batch_size):
            sl = slice(lo, lo + batch_size)
            z = encoder(*(torch.from_numpy(data.images[c][sl]) for c in data.cameras))
            pred = actor(torch.cat([z, torch.from_numpy(data.proprio[sl])], 1))
            total += float(((pred - torch.from_numpy(data.action[sl])) ** 2).mean(1).sum())
    return total / max(len(data), 1)


def pretrain_from_run(
    run_dir: Path | str,
    cameras: Sequence[str],
    out_dir: Path | str,
    cfg: PretrainConfig | None = None,
    groups: Sequence[str] = ("demo",),
    val_episodes: int = 0,
    on_log: Callable[[dict[str, float]], None] | None = None,
) -> PretrainResult:
    """load_demos + pretrain + save_encoder(out_dir): the encoder the loop then uses frozen."""
    data = load_demos(run_dir, cameras, groups)
    train, val = data.split(val_episodes, seed=(cfg or PretrainConfig()).seed) if val_episodes else (data, None)
    result = pretrain(train, cfg, val=val, on_log=on_log)
    save_encoder(result.encoder, out_dir)
    log.info("encoder pretrained in %.0f s on %d steps; saved to %s", result.seconds, len(train), out_dir)
    return result
