"""The four generative mechanisms on the shared backbone.

Every generator works on the normalised change of the latent, y = (z_next - z_last - prior) / delta_std,
so "no change beyond the prior" is y = 0 and all of them start from the prior's baseline: copying the
last frame (prior 0, the default) or extrapolating its change (`dynamics.velocity_prior`). Each has
`loss(net, ctx, y)` for training (torch's global RNG, seeded by the trainer) and
`sample(net, ctx, shape, noise)` for imagination, where `noise(shape)` draws standard-normal
tensors from a seeded generator, so imagination is deterministic under a seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch.nn import functional as F

from worldsample.world_model.config import GeneratorConfig
from worldsample.world_model.drift_field import drift_field
from worldsample.world_model.dynamics import Backbone, Context

Noise = Callable[[tuple[int, ...]], torch.Tensor]


def _expand(ctx: Context, n: int) -> Context:
    """The same context repeated n times per sample (sample-major), for groups of draws."""
    rep = lambda t: t.repeat_interleave(n, dim=0)  # noqa: E731
    return Context(rep(ctx.features), rep(ctx.cond), rep(ctx.heads))


def _level(ctx: Context, value: float | torch.Tensor) -> torch.Tensor:
    b = ctx.cond.shape[0]
    return value.expand(b) if torch.is_tensor(value) else ctx.cond.new_full((b,), float(value))


class Regression:
    """Deterministic one-pass prediction of the mean change; the trunk input is zeros."""

    stochastic = False
    passes = 1

    def __init__(self, cfg: GeneratorConfig):
        self.cfg = cfg

    def predict(self, net: Backbone, ctx: Context, shape) -> torch.Tensor:
        return net.trunk_forward(ctx, ctx.cond.new_zeros(shape), _level(ctx, 0.0))

    def loss(self, net: Backbone, ctx: Context, y: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(self.predict(net, ctx, y.shape), y)

    def sample(self, net: Backbone, ctx: Context, shape, noise: Noise) -> torch.Tensor:
        return self.predict(net, ctx, shape)


class Diffusion:
    """DDPM training (cosine schedule, clean-sample prediction) and a deterministic DDIM sampler."""

    stochastic = True

    def __init__(self, cfg: GeneratorConfig):
        self.cfg = cfg
        self.passes = cfg.diffusion_steps

    def alpha_bar(self, t: torch.Tensor) -> torch.Tensor:
        s = 0.008
        return (torch.cos((t + s) / (1 + s) * math.pi / 2) ** 2 / math.cos(s / (1 + s) * math.pi / 2) ** 2).clamp(0, 1)

    def loss(self, net: Backbone, ctx: Context, y: torch.Tensor) -> torch.Tensor:
        T = self.cfg.diffusion_train_steps
        t = torch.randint(1, T + 1, (y.shape[0],), device=y.device).float() / T
        ab = self.alpha_bar(t)[:, None, None, None]
        x = ab.sqrt() * y + (1 - ab).sqrt() * torch.randn_like(y)
        return F.mse_loss(net.trunk_forward(ctx, x, t), y)

    def sample(self, net: Backbone, ctx: Context, shape, noise: Noise) -> torch.Tensor:
        times = torch.linspace(1.0, 0.0, self.cfg.diffusion_steps + 1, device=ctx.cond.device)
        x = noise(shape)
        x0 = x
        for t, t_prev in zip(times[:-1], times[1:]):
            ab, ab_prev = self.alpha_bar(t), self.alpha_bar(t_prev)
            x0 = net.trunk_forward(ctx, x, _level(ctx, t))
            eps = (x - ab.sqrt() * x0) / (1 - ab).sqrt().clamp_min(1e-4)
            x = ab_prev.sqrt() * x0 + (1 - ab_prev).sqrt() * eps
        return x0


class Consistency:
    """Consistency training with an EDM parametrisation: f(x, sigma) maps any noise level back to the
    clean sample, so one pass from pure noise (or a few, re-noising in between) generates.

    Training pairs adjacent noise levels on a fixed Karras discretisation and pulls the higher
    level's output onto the (stop-gradient) lower one's, plus a small denoising anchor that keeps
    training stable on little data (weight `consistency_x0_weight`; 0 = pure consistency training)."""

    stochastic = True
    sigma_data = 1.0
    n_levels = 40

    def __init__(self, cfg: GeneratorConfig):
        self.cfg = cfg
        self.passes = cfg.consistency_steps

    def sigmas(self, n: int, device) -> torch.Tensor:
        lo, hi, rho = self.cfg.consistency_sigma_min, self.cfg.consistency_sigma_max, 7.0
        r = torch.linspace(0, 1, n, device=device)
        return (lo ** (1 / rho) + r * (hi ** (1 / rho) - lo ** (1 / rho))) ** rho

    def f(self, net: Backbone, ctx: Context, x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        sd, lo = self.sigma_data, self.cfg.consistency_sigma_min
        s = sigma[:, None, None, None]
        c_skip = sd**2 / ((s - lo) ** 2 + sd**2)
        c_out = (s - lo) * sd / (s**2 + sd**2).sqrt()
        c_in = 1 / (s**2 + sd**2).sqrt()
        return c_skip * x + c_out * net.trunk_forward(ctx, c_in * x, sigma.log() / 4)

    def loss(self, net: Backbone, ctx: Context, y: torch.Tensor) -> torch.Tensor:
        sig = self.sigmas(self.n_levels, y.device)
        n = torch.randint(0, self.n_levels - 1, (y.shape[0],), device=y.device)
        lo, hi = sig[n], sig[n + 1]
        z = torch.randn_like(y)
        out_hi = self.f(net, ctx, y + hi[:, None, None, None] * z, hi)
        with torch.no_grad():
            out_lo = self.f(net, ctx, y + lo[:, None, None, None] * z, lo)
        gaps = sig[1:] - sig[:-1]
        weight = (1 / (hi - lo)) / (1 / gaps).mean()
        c = 0.00054 * math.sqrt(y[0].numel())
        pseudo_huber = ((out_hi - out_lo).pow(2).flatten(1).sum(1) + c**2).sqrt() - c
        anchor = F.mse_loss(out_hi, y)
        return (weight * pseudo_huber).mean() / y[0].numel() ** 0.5 + self.cfg.consistency_x0_weight * anchor

    def sample(self, net: Backbone, ctx: Context, shape, noise: Noise) -> torch.Tensor:
        b = shape[0]
        top = self.cfg.consistency_sigma_max
        levels = [top] + (
            self.sigmas(self.passes + 1, ctx.cond.device)[1:-1].flip(0).tolist() if self.passes > 1 else []
        )
        y = self.f(net, ctx, noise(shape) * top, ctx.cond.new_full((b,), top))
        for s in levels[1:]:
            x = y + math.sqrt(max(s**2 - self.cfg.consistency_sigma_min**2, 0.0)) * noise(shape)
            y = self.f(net, ctx, x, ctx.cond.new_full((b,), s))
        return y


class Drift:
    """One pass from noise; trained with the drifting objective: a group of draws per context is
    pulled to the true next frame and pushed from each other and from the "nothing moved" frame."""

    stochastic = True
    passes = 1

    def __init__(self, cfg: GeneratorConfig):
        self.cfg = cfg

    def generate(self, net: Backbone, ctx: Context, x: torch.Tensor) -> torch.Tensor:
        return net.trunk_forward(ctx, x, _level(ctx, 1.0))

    def loss(self, net: Backbone, ctx: Context, y: torch.Tensor) -> torch.Tensor:
        b, g = y.shape[0], self.cfg.drift_group
        out = self.generate(net, _expand(ctx, g), torch.randn((b * g, *y.shape[1:]), device=y.device))
        x = out.view(b, g, -1)
        neg = x.detach()
        is_self = torch.eye(g, dtype=torch.bool, device=y.device)
        if self.cfg.drift_no_action_negative:  # y = 0 is the unchanged last frame
            neg = torch.cat([neg, torch.zeros_like(neg[:, :1])], dim=1)
            is_self = torch.cat([is_self, torch.zeros(g, 1, dtype=torch.bool, device=y.device)], dim=1)
        v = drift_field(x.detach(), y.view(b, 1, -1), neg, is_self, self.cfg.drift_temperatures)
        # more weight where the scene moves: most latent cells never change
        motion = y.abs().mean(dim=1, keepdim=True)
        motion = motion / (motion.mean(dim=(2, 3), keepdim=True) + 1e-6)
        w = (1 + self.cfg.drift_motion_weight * motion.clamp(max=10)).repeat_interleave(g, dim=0)
        target = (x + v).detach().view_as(out)
        return (w * (out - target).pow(2)).mean() / w.mean()

    def sample(self, net: Backbone, ctx: Context, shape, noise: Noise) -> torch.Tensor:
        return self.generate(net, ctx, noise(shape))


GENERATORS = {"regression": Regression, "diffusion": Diffusion, "consistency": Consistency, "drift": Drift}


def make_generator(cfg: GeneratorConfig):
    return GENERATORS[cfg.kind](cfg)
