"""Stage 2: the shared action-conditioned latent backbone.

One backbone serves every generator so they can be compared fairly. It is split in two:
- a context stem reads the sliding window of past latents, FiLM-conditioned on the window's
  actions (per frame) and the domain embedding; its pooled features feed the reward, success and
  done heads;
- a trunk maps the generator's input (zeros, a noisy target or pure noise) plus the stem's
  features to the generator's output, FiLM-conditioned on the same vector plus the noise level.
The stem runs once per predicted frame; only the trunk repeats across diffusion sampler steps.
An ensemble holds independent members; their disagreement is the model's uncertainty.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from worldsample.world_model.autoencoder import _norm
from worldsample.world_model.config import WorldModelConfig


class FiLMBlock(nn.Module):
    def __init__(self, ch: int, cond: int, dilation: int = 1):
        super().__init__()
        self.n1, self.c1 = _norm(ch), nn.Conv2d(ch, ch, 3, padding=1)
        self.n2, self.c2 = _norm(ch), nn.Conv2d(ch, ch, 3, padding=dilation, dilation=dilation)
        self.film = nn.Linear(cond, 2 * ch)
        nn.init.zeros_(self.film.weight)
        nn.init.zeros_(self.film.bias)

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        h = self.c1(torch.nn.functional.silu(self.n1(x)))
        scale, shift = self.film(cond)[:, :, None, None].chunk(2, dim=1)
        h = self.n2(h) * (1 + scale) + shift
        return x + self.c2(torch.nn.functional.silu(h))


def level_embedding(level: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal features of a scalar noise level (any real number, e.g. t in [0, 1] or log sigma)."""
    half = dim // 2
    freqs = torch.exp(-math.log(1000.0) * torch.arange(half, device=level.device) / half)
    ang = 100.0 * level[:, None] * freqs[None]
    return torch.cat([ang.sin(), ang.cos()], dim=1)


def clip_inputs(latents: torch.Tensor, clip: float) -> torch.Tensor:
    """The context latents the stem reads, clipped to +-clip (normalised units; 0: as they are). A state
    far outside the training data (a puck tipped on its side, 4-7 standard deviations out) then reads as
    no further out than the clip instead of sending the network further into extrapolation. Only the
    stem's input: the imagined state itself is never clipped."""
    return latents.clamp(-clip, clip) if clip else latents


@dataclass
class Context:
    """Stem output for one batch of windows: reused by every trunk call of a sampler."""

    features: torch.Tensor  # (B, width, h, w)
    cond: torch.Tensor  # (B, cond_dim)
    heads: torch.Tensor  # (B, 3): reward, success logit, done logit


class Backbone(nn.Module):
    def __init__(self, cfg: WorldModelConfig):
        super().__init__()
        d, c = cfg.dynamics, cfg.latent_channels
        self.cfg, self.clip = cfg, d.input_clip
        self.act = nn.Sequential(
            nn.Linear(cfg.action_dim * d.history, d.cond_dim), nn.SiLU(), nn.Linear(d.cond_dim, d.cond_dim)
        )
        self.domain = nn.Embedding(d.domains, d.cond_dim)
        self.level = nn.Sequential(nn.Linear(64, d.cond_dim), nn.SiLU(), nn.Linear(d.cond_dim, d.cond_dim))
        self.stem_in = nn.Conv2d(c * d.history, d.width, 3, padding=1)
        self.stem = nn.ModuleList([FiLMBlock(d.width, d.cond_dim, 2)])
        self.heads = nn.Sequential(nn.Linear(d.width + d.cond_dim, 128), nn.SiLU(), nn.Linear(128, 3))
        self.trunk_in = nn.Conv2d(c, d.width, 3, padding=1)
        self.trunk = nn.ModuleList([FiLMBlock(d.width, d.cond_dim, 1 + i % 2) for i in range(d.blocks)])
        self.out = nn.Sequential(_norm(d.width), nn.SiLU(), nn.Conv2d(d.width, c, 3, padding=1))
        nn.init.zeros_(self.out[-1].weight)  # start as "no change", the copy-last-frame baseline
        nn.init.zeros_(self.out[-1].bias)

    def context(self, latents: torch.Tensor, actions: torch.Tensor, domain: torch.Tensor) -> Context:
        """latents (B, K, C, h, w), actions (B, K, A) with the current action last, domain (B,)."""
        cond = self.act(actions.flatten(1)) + self.domain(domain)
        h = self.stem_in(clip_inputs(latents, self.clip).flatten(1, 2))
        for blk in self.stem:
            h = blk(h, cond)
        heads = self.heads(torch.cat([h.mean(dim=(2, 3)), cond], dim=1))
        return Context(h, cond, heads)

    def trunk_forward(self, ctx: Context, x: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
        cond = ctx.cond + self.level(level_embedding(level, 64))
        h = self.trunk_in(x) + ctx.features
        for blk in self.trunk:
            h = blk(h, cond)
        return self.out(h)


class MLPBackbone(nn.Module):
    """The same two halves for a state-only model on a 1x1 latent grid, as MLPs: the stem reads the
    flattened window of latents with the action/domain embedding; the trunk maps the generator's input,
    the stem's features and the embedding plus the noise level to the generator's output. Convolutions
    with group norms on a 1x1 grid learn small exact changes (the state's copy of its previous frame,
    a hand moved by its action) poorly; an MLP on the raw numbers does not."""

    def __init__(self, cfg: WorldModelConfig):
        super().__init__()
        d, c = cfg.dynamics, cfg.latent_channels
        self.clip = d.input_clip
        self.act = nn.Sequential(
            nn.Linear(cfg.action_dim * d.history, d.cond_dim), nn.SiLU(), nn.Linear(d.cond_dim, d.cond_dim)
        )
        self.domain = nn.Embedding(d.domains, d.cond_dim)
        self.level = nn.Sequential(nn.Linear(64, d.cond_dim), nn.SiLU(), nn.Linear(d.cond_dim, d.cond_dim))
        self.stem = nn.Sequential(nn.Linear(c * d.history + d.cond_dim, d.width), nn.SiLU(),
                                  nn.Linear(d.width, d.width), nn.SiLU())
        self.heads = nn.Sequential(nn.Linear(d.width + d.cond_dim, 128), nn.SiLU(), nn.Linear(128, 3))
        layers: list[nn.Module] = [nn.Linear(d.width + c + d.cond_dim, d.width), nn.SiLU()]
        for _ in range(max(d.blocks // 2 - 1, 0)):
            layers += [nn.Linear(d.width, d.width), nn.SiLU()]
        self.trunk = nn.Sequential(*layers, nn.Linear(d.width, c))
        nn.init.zeros_(self.trunk[-1].weight)  # start as "no change", the copy-last-state baseline
        nn.init.zeros_(self.trunk[-1].bias)

    def context(self, latents: torch.Tensor, actions: torch.Tensor, domain: torch.Tensor) -> Context:
        cond = self.act(actions.flatten(1)) + self.domain(domain)
        h = self.stem(torch.cat([clip_inputs(latents, self.clip).flatten(1), cond], dim=1))
        heads = self.heads(torch.cat([h, cond], dim=1))
        return Context(h[:, :, None, None], cond, heads)

    def trunk_forward(self, ctx: Context, x: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
        cond = ctx.cond + self.level(level_embedding(level, 64))
        out = self.trunk(torch.cat([ctx.features.flatten(1), x.flatten(1), cond], dim=1))
        return out[:, :, None, None]


class Dynamics(nn.Module):
    """`ensemble` independent backbones; member i is used by `member(i)`."""

    def __init__(self, cfg: WorldModelConfig):
        super().__init__()
        make = MLPBackbone if cfg.backbone == "mlp" else Backbone
        self.members = nn.ModuleList([make(cfg) for _ in range(cfg.dynamics.ensemble)])

    def __len__(self) -> int:
        return len(self.members)

    def member(self, i: int) -> Backbone:
        return self.members[i]
