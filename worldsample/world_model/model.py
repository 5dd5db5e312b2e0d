"""The world model as one module: autoencoder, dynamics ensemble, generator and data statistics.

All latents outside this class are normalised (per-channel data mean and std), so noise levels
and the context noise mean the same thing for every camera and dataset. The statistics are
buffers: they travel in the checkpoint with the weights.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from worldsample.world_model.autoencoder import Autoencoder
from worldsample.world_model.config import WorldModelConfig
from worldsample.world_model.dynamics import Dynamics
from worldsample.world_model.generators import make_generator
from worldsample.world_model.rotations import canonical_quaternions


class WorldModel(nn.Module):
    def __init__(self, cfg: WorldModelConfig):
        super().__init__()
        self.cfg = cfg
        self.ae = Autoencoder(cfg)
        self.dynamics = Dynamics(cfg)
        self.generator = make_generator(cfg.generator)
        c, dv = cfg.latent_channels, max(cfg.vector_dim, 1)
        for name, size, fill in [
            ("vec_mean", dv, 0.0),
            ("vec_std", dv, 1.0),
            ("lat_mean", c, 0.0),
            ("lat_std", c, 1.0),
            ("delta_std", c, 1.0),
            ("reward_scale", 1, 1.0),
        ]:
            self.register_buffer(name, torch.full((size,), fill))
        offsets = dict(zip(cfg.vector_keys, np.cumsum([0, *cfg.vector_keys.values()])))  # of each key in the vector
        at, of = [], []  # latent channels that repeat the previous step's (`previous_frame`)
        if cfg.copies_previous_frame:
            for key, (a, o, n) in cfg.previous_frame.items():
                at += range(offsets[key] + a, offsets[key] + a + n)
                of += range(offsets[key] + o, offsets[key] + o + n)
        self.register_buffer("repeat_at", torch.tensor(at, dtype=torch.long), persistent=False)
        self.register_buffer("repeat_of", torch.tensor(of, dtype=torch.long), persistent=False)
        quats = []  # latent channels of each quaternion (`quaternions`), where the latent is the vector itself
        if cfg.quaternions and not cfg.image_keys and cfg.autoencoder.vector_identity:
            quats = [list(range(offsets[k] + s, offsets[k] + s + 4)) for k, starts in cfg.quaternions.items()
                     for s in starts]
        self.register_buffer("quat_at", torch.tensor(quats, dtype=torch.long).view(-1, 4), persistent=False)

    @property
    def device(self) -> torch.device:
        return self.lat_mean.device

    # -- observations <-> tensors ------------------------------------------------------------------

    def images_in(self, obs: dict) -> dict[str, torch.Tensor]:
        """uint8 (N, H, W, 3) per image key -> float (N, 3, H, W) in [-1, 1]."""
        return {
            k: torch.as_tensor(np.asarray(obs[k]), device=self.device).permute(0, 3, 1, 2).float() / 127.5 - 1
            for k in self.cfg.image_keys
        }

    def vector_in(self, obs: dict) -> torch.Tensor | None:
        if not self.cfg.vector_keys:
            return None
        v = self.vector_cat({k: torch.as_tensor(np.asarray(obs[k]), device=self.device) for k in self.cfg.vector_keys})
        return (v - self.vec_mean) / self.vec_std

    def vector_cat(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """The vector keys as one float (N, D) tensor, quaternions canonical (the config's `quaternions`)."""
        q = self.cfg.quaternions
        flat = {k: obs[k].float().flatten(1) for k in self.cfg.vector_keys}
        return torch.cat([canonical_quaternions(v, q.get(k, [])) for k, v in flat.items()], dim=1)

    # -- latents -----------------------------------------------------------------------------------

    def encode_raw(self, obs: dict) -> torch.Tensor:
        return self.ae.encode(self.images_in(obs), self.vector_in(obs))

    def encode(self, obs: dict) -> torch.Tensor:
        """Observations (N, ...) -> normalised latents (N, C, h, w)."""
        return (self.encode_raw(obs) - self.lat_mean[:, None, None]) / self.lat_std[:, None, None]

    def decode(self, z: torch.Tensor) -> dict[str, torch.Tensor]:
        """Normalised latents (N, C, h, w) -> images as float (N, H, W, 3) in [0, 1], vectors per key."""
        images, vector = self.ae.decode(z * self.lat_std[:, None, None] + self.lat_mean[:, None, None])
        out = {k: ((v.clamp(-1, 1) + 1) / 2).permute(0, 2, 3, 1) for k, v in images.items()}
        if vector is not None:
            vector = vector * self.vec_std + self.vec_mean
            i = 0
            for k, n in self.cfg.vector_keys.items():
                out[k] = vector[:, i : i + n]
                i += n
        return out

    # -- one step of dynamics ----------------------------------------------------------------------

    def step(
        self, history: torch.Tensor, actions: torch.Tensor, domain: torch.Tensor, member: int = 0, noise=None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """history (B, K, C, h, w) normalised latents, actions (B, K, A) ending with the action to take.

        Returns the next latent and the heads of this transition (reward, success and done probability).
        The history's quaternions are first made continuous up to its last frame (`align_window`), so a
        context cut from frames each made canonical on its own (the bridge's search) reads as the
        model was trained."""
        history = self.align_window(history, history.shape[1] - 1)
        net = self.dynamics.member(member)
        ctx = net.context(history, actions, domain)
        last = history[:, -1]
        if noise is None:
            noise = lambda shape: torch.randn(shape, device=last.device)  # noqa: E731
        y = self.generator.sample(net, ctx, last.shape, noise)
        heads = {
            "reward": ctx.heads[:, 0] * self.reward_scale,
            "success": torch.sigmoid(ctx.heads[:, 1]),
            "done": torch.sigmoid(ctx.heads[:, 2]),
        }
        nxt = last + self.prior_change(history) + y * self.delta_std[:, None, None]
        return self.unit_quaternions(self.repeat_previous(last, nxt)), heads

    def predict(
        self, history: torch.Tensor, actions: torch.Tensor, domain: torch.Tensor, noise=None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor], list[torch.Tensor]]:
        """The model's step as imagination takes it (`dynamics.predict`): member 0's, or the mean of every
        member's next latent (quaternions made unit again) and heads. Also returns each member's next
        latent where they were all computed (the mean), else only the one used."""
        if self.cfg.dynamics.predict == "first" or len(self.dynamics) == 1:
            nxt, heads = self.step(history, actions, domain, 0, noise)
            return nxt, heads, [nxt]
        outs = [self.step(history, actions, domain, i, noise) for i in range(len(self.dynamics))]
        members = [o[0] for o in outs]
        heads = {k: torch.stack([o[1][k] for o in outs]).mean(0) for k in outs[0][1]}
        return self.unit_quaternions(torch.stack(members).mean(0)), heads, members

    def prior_change(self, history: torch.Tensor) -> torch.Tensor | float:
        """The change a step is predicted beyond: `dynamics.velocity_prior` times the last frame's change
        (0 with one frame of history or the prior off)."""
        beta = self.cfg.dynamics.velocity_prior
        if not beta or history.shape[1] < 2:
            return 0.0
        return beta * (history[:, -1] - history[:, -2])

    def align_window(self, z: torch.Tensor, anchor: int) -> torch.Tensor:
        """Normalised latents (B, L, C, h, w) of L consecutive frames, each made canonical on its own
        (`encode`), with every frame's quaternions given the sign nearest its neighbour's, outward
        from frame `anchor` (kept as it is): an object turned through half a turn then changes by its
        motion, not by a flip of sign (rotations.py). Only where the latent is the vector itself;
        otherwise `z` as it is."""
        if not len(self.quat_at):
            return z
        at = self.quat_at.flatten()  # one index per channel: a (quaternions, 4) index does not export to ONNX
        scale, shift = self._quaternion_affine()
        q = z[:, :, at].unflatten(2, self.quat_at.shape) * scale + shift  # (B, L, quaternions, 4, h, w)
        order = [*((t, t + 1) for t in range(anchor - 1, -1, -1)), *((t, t - 1) for t in range(anchor + 1, z.shape[1]))]
        frames = list(q.unbind(1))  # no in-place slice writes: ONNX export would fix the batch size
        for t, ref in order:
            flip = (frames[t] * frames[ref]).sum(dim=2, keepdim=True) < 0
            frames[t] = torch.where(flip, -frames[t], frames[t])
        q = torch.stack(frames, 1)
        out = z.clone()
        out[:, :, at] = ((q - shift) / scale).flatten(2, 3)
        return out

    def unit_quaternions(self, z: torch.Tensor) -> torch.Tensor:
        """Normalised latents (B, C, h, w) with every quaternion channel group scaled back to unit norm:
        a predicted rotation stays a rotation. Without it an object far from the states the model saw
        (a puck tipped on its side) drifts off the unit sphere, and its error compounds step by step.
        Only where the latent is the vector itself; otherwise `z` as it is. Traceable (no branches)."""
        if not len(self.quat_at):
            return z
        at = self.quat_at.flatten()
        scale, shift = self._quaternion_affine()
        q = z[:, at].unflatten(1, self.quat_at.shape) * scale + shift  # (B, quaternions, 4, h, w)
        q = q / q.norm(dim=2, keepdim=True).clamp_min(1e-6)
        out = z.clone()
        out[:, at] = ((q - shift) / scale).flatten(1, 2)
        return out

    def _quaternion_affine(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(quaternions, 4, 1, 1) scale and shift of the quaternion channels: raw = z * scale + shift."""
        scale, shift = self._vector_affine()
        at = self.quat_at.flatten()
        return (scale[at].view(self.quat_at.shape)[..., None, None],
                shift[at].view(self.quat_at.shape)[..., None, None])

    def _vector_affine(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Where the latent is the vector itself: per channel, raw = z * scale + shift."""
        return self.lat_std * self.vec_std, self.lat_mean * self.vec_std + self.vec_mean

    def repeat_previous(self, last: torch.Tensor, nxt: torch.Tensor) -> torch.Tensor:
        """`nxt` with its previous-frame channels set from `last` (config `previous_frame`), in the
        normalised latent: the latent is the vector, so each channel is raw = z * scale + shift."""
        if not len(self.repeat_at):
            return nxt
        scale, shift = self._vector_affine()
        at, of = self.repeat_at, self.repeat_of
        raw = last[:, of] * scale[of][:, None, None] + shift[of][:, None, None]
        out = nxt.clone()
        out[:, at] = (raw - shift[at][:, None, None]) / scale[at][:, None, None]
        return out
