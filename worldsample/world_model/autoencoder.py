"""Stage 1: observations <-> one packed latent tensor (B, C, h, w).

Each camera image goes through a CNN to `latent_channels` x H/4 x W/4; the vector observations
(proprioception) go through an MLP (or none: `vector_identity`) whose latent is broadcast over the
same grid as extra channels, so every generator works on a single tensor. Decoding a vector reads the spatial mean
of its channels, which also averages away per-cell generator noise.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from worldsample.world_model.config import WorldModelConfig


def _norm(ch: int) -> nn.GroupNorm:
    return nn.GroupNorm(min(8, ch), ch)


class ResBlock(nn.Module):
    def __init__(self, ch: int):
        super().__init__()
        self.body = nn.Sequential(
            _norm(ch), nn.SiLU(), nn.Conv2d(ch, ch, 3, padding=1), _norm(ch), nn.SiLU(), nn.Conv2d(ch, ch, 3, padding=1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


class ImageEncoder(nn.Module):
    # space-to-depth (pixel unshuffle) instead of strided full-resolution convolutions: on a CPU
    # the full-resolution layers cost more than the rest of the model together
    def __init__(self, width: int, latent: int):
        super().__init__()
        c2, c3 = width, 2 * width
        self.net = nn.Sequential(
            nn.PixelUnshuffle(2), nn.Conv2d(12, c2, 3, padding=1), ResBlock(c2),
            nn.PixelUnshuffle(2), nn.Conv2d(4 * c2, c3, 3, padding=1), ResBlock(c3), ResBlock(c3),
            _norm(c3), nn.SiLU(), nn.Conv2d(c3, latent, 3, padding=1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class ImageDecoder(nn.Module):
    # the mirror image: depth-to-space (pixel shuffle), so no layer runs at full resolution and
    # decoding stays cheap next to the dynamics (it is paid once per imagined frame)
    def __init__(self, width: int, latent: int):
        super().__init__()
        c2, c3 = width, 2 * width
        self.net = nn.Sequential(
            nn.Conv2d(latent, c3, 3, padding=1), ResBlock(c3),
            nn.Conv2d(c3, 4 * c2, 3, padding=1), nn.PixelShuffle(2), ResBlock(c2),
            _norm(c2), nn.SiLU(), nn.Conv2d(c2, 12, 3, padding=1), nn.PixelShuffle(2),
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z)


def _mlp(i: int, h: int, o: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(i, h), nn.SiLU(), nn.Linear(h, h), nn.SiLU(), nn.Linear(h, o))


class Autoencoder(nn.Module):
    """Images in [-1, 1] as (B, 3, H, W) per key; vectors already normalised, concatenated (B, D)."""

    def __init__(self, cfg: WorldModelConfig):
        super().__init__()
        ae = cfg.autoencoder
        self.cfg = cfg
        self.grid = cfg.latent_grid
        self.encoders = nn.ModuleDict({k: ImageEncoder(ae.width, ae.latent_channels) for k in cfg.image_keys})
        self.decoders = nn.ModuleDict({k: ImageDecoder(ae.width, ae.latent_channels) for k in cfg.image_keys})
        if cfg.vector_keys and ae.vector_identity:  # the latent is the normalised vector
            self.vec_enc, self.vec_dec = nn.Identity(), nn.Identity()
        elif cfg.vector_keys:
            self.vec_enc = _mlp(cfg.vector_dim, 128, ae.vector_latent_dim)
            self.vec_dec = _mlp(ae.vector_latent_dim, 128, cfg.vector_dim)

    def encode(self, images: dict[str, torch.Tensor], vector: torch.Tensor | None) -> torch.Tensor:
        parts = [self.encoders[k](images[k]) for k in self.cfg.image_keys]
        if self.cfg.vector_keys:
            v = self.vec_enc(vector)
            parts.append(v[:, :, None, None].expand(-1, -1, self.grid, self.grid))
        return torch.cat(parts, dim=1)

    def decode(self, z: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        c = self.cfg.autoencoder.latent_channels
        images = {k: self.decoders[k](z[:, i * c : (i + 1) * c]) for i, k in enumerate(self.cfg.image_keys)}
        vector = None
        if self.cfg.vector_keys:
            vector = self.vec_dec(z[:, len(self.cfg.image_keys) * c :].mean(dim=(2, 3)))
        return images, vector

    def loss(self, images: dict[str, torch.Tensor], vector: torch.Tensor | None) -> torch.Tensor:
        z = self.encode(images, vector)
        # a little latent noise makes the decoder tolerant of imperfect predicted latents
        rec_img, rec_vec = self.decode(z + 0.02 * torch.randn_like(z))
        loss = sum(F.mse_loss(rec_img[k], images[k]) + 0.1 * F.l1_loss(rec_img[k], images[k]) for k in images)
        if rec_vec is not None:
            loss = loss + F.mse_loss(rec_vec, vector)
        # keeps latents at a bounded scale; normalised with data statistics afterwards
        return loss + 1e-4 * z.pow(2).mean()
