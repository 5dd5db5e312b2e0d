"""Training: vector statistics, autoencoder, latent statistics, then dynamics on cached latents.

Stage 2 never runs the image encoder per step: every cached step is encoded once (and new
episodes as they arrive), so a dynamics step costs only the backbone. The same `Trainer` serves
all three modes; `modes.py` decides which groups feed it and where it starts from.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch.nn import functional as F

from worldsample.world_model.config import WorldModelConfig
from worldsample.world_model.data import LABEL_KEYS, LatentTable, Windows, WindowSource
from worldsample.world_model.model import WorldModel

OnStep = Callable[[str, int, float], None]  # stage, step, loss


def cache_keys(cfg: WorldModelConfig) -> list[str]:
    return [*cfg.image_keys, *cfg.vector_keys, *LABEL_KEYS]


class Trainer:
    def __init__(self, model: WorldModel, cfg: WorldModelConfig | None = None):
        self.model = model
        self.cfg = cfg or model.cfg
        t = self.cfg.train
        torch.manual_seed(t.seed)
        self.rng = np.random.default_rng(t.seed)
        ae_params = list(model.ae.parameters())  # none for a state model with `vector_identity`
        self.ae_opt = torch.optim.AdamW(ae_params, lr=t.ae_lr, weight_decay=1e-4) if ae_params else None
        self.dyn_opt = torch.optim.AdamW(model.dynamics.parameters(), lr=t.dyn_lr, weight_decay=1e-4)
        self.latents: LatentTable | None = None

    # -- statistics --------------------------------------------------------------------------------

    def fit_vector_stats(self, source: WindowSource) -> None:
        m = self.model
        rewards = np.concatenate([source.table(g, "reward") for g in source.groups])
        m.reward_scale.fill_(float(max(rewards.std(), 1e-3)) if len(rewards) else 1.0)
        if not self.cfg.vector_keys:
            return
        v = np.concatenate(
            [
                np.concatenate(
                    [source.table(g, k).reshape(len(source.table(g, k)), -1) for k in self.cfg.vector_keys], axis=1
                )
                for g in source.groups
            ]
        )
        m.vec_mean.copy_(torch.as_tensor(v.mean(0)))
        m.vec_std.copy_(torch.as_tensor(np.maximum(v.std(0), 1e-3)))

    @torch.no_grad()
    def fit_latent_stats(self, source: WindowSource, n: int = 512) -> None:
        m = self.model
        m.lat_mean.zero_()
        m.lat_std.fill_(1.0)
        w = source.sample(self.rng, n, 2)
        z = self._encode_windows(source, w)
        m.lat_mean.copy_(z.mean(dim=(0, 1, 3, 4)))
        m.lat_std.copy_(z.std(dim=(0, 1, 3, 4)).clamp_min(1e-3))
        z = m.align_window((z - m.lat_mean[:, None, None]) / m.lat_std[:, None, None], 0)
        m.delta_std.copy_((z[:, 1] - z[:, 0]).std(dim=(0, 2, 3)).clamp_min(1e-3))

    def _encode_windows(self, source: WindowSource, w) -> torch.Tensor:
        """Raw (unnormalised) latents of windows: (B, L, C, h, w)."""
        obs = {}
        for k in [*self.cfg.image_keys, *self.cfg.vector_keys]:
            v = w.gather(source.tables(k))
            length = v.shape[1]
            obs[k] = v.reshape(-1, *v.shape[2:])
        n = len(next(iter(obs.values())))
        z = torch.cat([self.model.encode_raw({k: v[i:i + 256] for k, v in obs.items()}) for i in range(0, n, 256)])
        return z.view(-1, length, *z.shape[1:])

    # -- stage 1 -----------------------------------------------------------------------------------

    def fit_autoencoder(self, source: WindowSource, steps: int, on_step: OnStep | None = None) -> list[float]:
        m, losses = self.model, []
        if self.ae_opt is None:  # nothing to learn: the latent is the normalised vector
            return losses
        m.ae.train()
        for i in range(steps):
            w = source.frames(self.rng, self.cfg.train.batch)
            obs = {k: w.gather(source.tables(k))[:, 0] for k in [*self.cfg.image_keys, *self.cfg.vector_keys]}
            loss = m.ae.loss(m.images_in(obs), m.vector_in(obs))
            self._update(self.ae_opt, m.ae.parameters(), loss)
            losses.append(loss.item())
            if on_step:
                on_step("autoencoder", i, losses[-1])
        m.ae.eval()
        self.latents = None  # the encoder changed: cached latents are stale
        return losses

    # -- stage 2 -----------------------------------------------------------------------------------

    @torch.no_grad()
    def _encode_episode(self, arrays: dict[str, np.ndarray]) -> np.ndarray:
        n = len(arrays["action"])
        out = [
            self.model.encode({k: arrays[k][i : i + 256] for k in [*self.cfg.image_keys, *self.cfg.vector_keys]})
            for i in range(0, n, 256)
        ]
        return torch.cat(out).cpu().numpy()

    def fit_dynamics(
        self, source: WindowSource, steps: int, on_step: OnStep | None = None, refresh_every: int = 0
    ) -> list[float]:
        if self.latents is None or self.latents.source is not source:
            self.latents = LatentTable(source, self._encode_episode)
        m, losses = self.model, []
        m.dynamics.train()
        for i in range(steps):
            if refresh_every and i and i % refresh_every == 0:
                source.refresh()
            loss = self._dynamics_loss(source)
            self._update(self.dyn_opt, m.dynamics.parameters(), loss)
            losses.append(loss.item())
            if on_step:
                on_step("dynamics", i, losses[-1])
        m.dynamics.eval()
        return losses

    def _batch(self, source: WindowSource, batch: int, length: int, positive_share: float = 0.0):
        """Windows of `length`; a `positive_share` of them end on a success or done step (while any does)."""
        d = self.cfg.dynamics
        dev = self.model.device
        n_pos = int(round(positive_share * batch))
        pos = source.sample_ending_on(self.rng, n_pos, length, ("success", "done")).parts if n_pos else []
        n_pos = sum(len(rows) for _, rows in pos)
        w = Windows(pos + source.sample(self.rng, batch - n_pos, length).parts) if pos else source.sample(
            self.rng, batch, length
        )
        # the frames before the current one (K - 1) and after it take its quaternions' sign: targets are motion
        z = self.model.align_window(torch.as_tensor(w.gather(self.latents.tables()), device=dev), d.history - 1)
        labels = {k: torch.as_tensor(w.gather(source.tables(k)), device=dev).float() for k in LABEL_KEYS}
        act = labels.pop("action")
        if d.history > 1 and d.start_pad_prob > 0:
            # some windows look like an episode start: the first frame repeated, no past actions
            z, act = z.clone(), act.clone()
            for b in np.flatnonzero(self.rng.random(len(z)) < d.start_pad_prob):
                j = int(self.rng.integers(1, d.history))
                z[b, :j] = z[b, j]
                act[b, :j] = 0
        return z, act, labels, torch.as_tensor(w.domains(), device=dev)

    def _head_loss(self, heads: torch.Tensor, labels: dict[str, torch.Tensor], t: int) -> torch.Tensor:
        return (
            F.mse_loss(heads[:, 0], labels["reward"][:, t] / self.model.reward_scale)
            + F.binary_cross_entropy_with_logits(heads[:, 1], labels["success"][:, t])
            + F.binary_cross_entropy_with_logits(heads[:, 2], labels["done"][:, t])
        )

    def _dynamics_loss(self, source: WindowSource) -> torch.Tensor:
        m, d, t = self.model, self.cfg.dynamics, self.cfg.train
        K, R = d.history, t.rollout_steps
        z, act, labels, dom = self._batch(source, t.batch, K + R)
        loss = z.new_zeros(())
        for member in range(len(m.dynamics)):
            net = m.dynamics.member(member)
            hist = z[:, :K]
            for r in range(R):
                a = act[:, r : r + K]
                noisy = hist + d.context_noise * torch.randn_like(hist)
                ctx = net.context(noisy, a, dom)
                y = (z[:, r + K] - hist[:, -1] - m.prior_change(hist)) / m.delta_std[:, None, None]
                loss = (
                    loss + m.generator.loss(net, ctx, y) + t.head_weight * self._head_loss(ctx.heads, labels, r + K - 1)
                )
                if r + 1 < R:  # continue from the model's own prediction, as at imagination time
                    with torch.no_grad():
                        nxt, _ = m.step(hist, a, dom, member)
                    hist = torch.cat([hist[:, 1:], nxt[:, None]], dim=1)
            # success and done are rare: this batch oversamples windows that end on them
            zh, ah, lh, dh = self._batch(source, max(t.batch // 2, 1), K, self.cfg.heads.positive_share)
            loss = loss + t.head_weight * self._head_loss(net.context(zh, ah, dh).heads, lh, K - 1)
        return loss / (len(m.dynamics) * R)

    def _update(self, opt: torch.optim.Optimizer, params, loss: torch.Tensor) -> None:
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params), self.cfg.train.grad_clip)
        opt.step()
