"""The play provider backed by the run's world model (see play.py for the contract).

A start encodes the model's history window ending at a step of a stored episode (the same window
the imagine view conditions on) with the newest checkpoint, which the session keeps: a newer
version serves the next start or reset, never a session's later steps, whose latents belong to the
model that made them. Each step is one turn of `Imaginer.rollout`'s loop: the action joins the
window's actions, `WorldModel.step` predicts the next latent and the heads, the window slides by
it, and the camera's frame is decoded (with `residual_decode`, as the change since the start's
real frame). The noise comes from one generator per session seeded like the imagine view's, so
the same actions from the same start give the same frames. A session holds the window, the start's
frame and its model, never the frames it made: its memory does not grow with its steps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from services.dashboard.play import PlayFrame
from services.dashboard.wm_imagine import WorldModelImagination

# the run's actions are normalised to [-1, 1] in every dimension (the learner's action space,
# worldsample/loop/learning.py); a step's action is clipped to them
ACTION_LOW, ACTION_HIGH = -1.0, 1.0
SEED = 0  # the imagine view's seed


@dataclass(eq=False)
class WorldModelPlayState:
    group: str
    episode: int
    start: int
    camera: str
    version: int
    action_dim: int
    action_low: np.ndarray
    action_high: np.ndarray
    history: int
    frame_shape: tuple[int, int, int]
    imaginer: Any  # the model the session started with
    key: str  # image_<camera>
    window: Any  # (1, K, C, h, w) normalised latents, oldest first
    past: Any  # (1, K-1, A) the actions between them
    real: np.ndarray | None  # the start's real frame, (H, W, C) uint8, with residual decoding
    ref: np.ndarray | None  # the model's decoding of the start's latent (what `real` is corrected by)
    noise: Callable
    steps: int = 0


class WorldModelPlay:
    def __init__(self, source: WorldModelImagination):
        self.source = source

    def start(self, group: str, episode: int, camera: str, step: int) -> WorldModelPlayState:
        import torch

        with self.source.model() as im:
            key = self.source.camera_key(im, camera)
            context, past, _ = self.source.real_context(im, group, episode, step)
            cfg, k = im.cfg, im.cfg.dynamics.history
            obs = {name: v[0] for name, v in context.items()}
            z = im.encode(obs)[None]  # (1, K, C, h, w)
            real = ref = None
            if cfg.autoencoder.residual_decode:
                real = context[key][0, -1]
                ref = im.decode(z[:, -1])[key][0]
            gen = torch.Generator().manual_seed(SEED)
            dev = im.model.device
            return WorldModelPlayState(
                group=group,
                episode=episode,
                start=step,
                camera=camera,
                version=self.source.version,
                action_dim=cfg.action_dim,
                action_low=np.full(cfg.action_dim, ACTION_LOW, np.float32),
                action_high=np.full(cfg.action_dim, ACTION_HIGH, np.float32),
                history=k,
                frame_shape=tuple(context[key].shape[2:]),
                imaginer=im,
                key=key,
                window=z,
                past=torch.as_tensor(np.asarray(past, np.float32), device=dev).view(1, k - 1, cfg.action_dim),
                real=real,
                ref=ref,
                noise=lambda shape: torch.randn(shape, generator=gen).to(dev),
            )

    def step(self, state: WorldModelPlayState, action: np.ndarray) -> PlayFrame:
        import torch

        act = np.clip(np.asarray(action, np.float32).reshape(state.action_dim), state.action_low, state.action_high)
        with self.source.model(), torch.no_grad():  # the provider's lock: one model user at a time
            im = state.imaginer
            m, dyn = im.model, im.cfg.dynamics
            a = torch.cat([state.past, torch.as_tensor(act, device=m.device).view(1, 1, -1)], dim=1)
            hist = state.window
            h_in = hist + dyn.context_noise_infer * state.noise(hist.shape) if dyn.context_noise_infer else hist
            nxt, heads = m.step(h_in, a, torch.zeros(1, dtype=torch.long, device=m.device), 0, state.noise)
            state.window = torch.cat([hist[:, 1:], nxt[:, None]], dim=1)
            state.past = a[:, 1:]
            state.steps += 1
            image = im.decode(nxt)[state.key][0]
            if state.real is not None:
                delta = image.astype(np.int16) - state.ref.astype(np.int16)
                image = np.clip(state.real.astype(np.int16) + delta, 0, 255).astype(np.uint8)
            success = float(heads["success"][0])
            return PlayFrame(
                image=image,
                step=state.steps,
                action=act,
                reward=float(heads["reward"][0]),
                success=success,
                success_label=success > im.cfg.heads.success_threshold,
                done=float(heads["done"][0]),
            )
