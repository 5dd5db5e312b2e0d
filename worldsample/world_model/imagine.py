"""Batched encode / decode / imagine API, for the synthesiser, evaluation and the dashboard.

    im = Imaginer(model)
    out = im.rollout(context, actions, seed=0)       # context: key -> (B, k, ...) observed frames
    out.frames["image_corner"]                        # (B, T, H, W, 3) uint8, frame t follows action t

With `autoencoder.residual_decode` the decoded change since the last real frame is added to that
frame (the decoder's error on the static scene cancels). Context frames shorter than the model's
history are padded the way the model was trained for episode starts: the first frame repeated with
zero actions. Randomness comes from one seeded generator on the CPU, so a rollout is reproducible
under a seed on any device. `success_label` and `done_label` cut the heads' probabilities at the
thresholds calibrated on held-out episodes (`heads.py`), stored in the model's config.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from worldsample.world_model.model import WorldModel
from worldsample.world_model.rotations import canonical_quaternions

Policy = Callable[[dict[str, np.ndarray], int], np.ndarray]  # (obs key -> (B, ...), step) -> actions (B, A)


@dataclass
class Rollout:
    latents: torch.Tensor  # (B, T, C, h, w), normalised
    frames: dict[str, np.ndarray] = field(default_factory=dict)  # images uint8 (B, T, H, W, 3); vectors float
    reward: np.ndarray | None = None  # (B, T) predicted reward of each imagined transition
    success: np.ndarray | None = None  # (B, T) probability
    done: np.ndarray | None = None  # (B, T) probability
    uncertainty: np.ndarray | None = None  # (B, T) ensemble / sample disagreement, None if not asked
    success_label: np.ndarray | None = None  # (B, T) bool: success above the model's calibrated threshold
    done_label: np.ndarray | None = None  # (B, T) bool: done above the model's calibrated threshold
    actions: np.ndarray | None = None  # (B, T, A) what the policy did, in a closed-loop rollout
    completed: bool = True  # False: `before_step` stopped the closed-loop rollout before its horizon


class Imaginer:
    def __init__(self, model: WorldModel):
        self.model = model.eval()
        self.cfg = model.cfg

    def _noise(self, seed: int):
        gen = torch.Generator().manual_seed(seed)
        dev = self.model.device
        return lambda shape: torch.randn(shape, generator=gen).to(dev)

    @torch.no_grad()
    def encode(self, obs: dict[str, np.ndarray], chunk: int = 256) -> torch.Tensor:
        """Observations key -> (N, ...) to normalised latents (N, C, h, w)."""
        keys = [*self.cfg.image_keys, *self.cfg.vector_keys]
        n = len(obs[keys[0]])
        return torch.cat([self.model.encode({k: obs[k][i : i + chunk] for k in keys}) for i in range(0, n, chunk)])

    @torch.no_grad()
    def decode(self, z: torch.Tensor, chunk: int = 256) -> dict[str, np.ndarray]:
        """Normalised latents (N, C, h, w) to images uint8 (N, H, W, 3) and vectors float32 (N, d)."""
        parts = [self.model.decode(z[i : i + chunk]) for i in range(0, len(z), chunk)]
        out = {}
        for k in parts[0]:
            v = torch.cat([p[k] for p in parts])
            out[k] = ((v * 255).round().byte() if k in self.cfg.image_keys else v.float()).cpu().numpy()
        return out

    @torch.no_grad()
    def rollout(
        self,
        context: dict[str, np.ndarray],
        actions: np.ndarray | None = None,
        context_actions: np.ndarray | None = None,
        domain: int | np.ndarray = 0,
        seed: int = 0,
        decode: bool = True,
        uncertainty: bool = False,
        samples: int = 4,
        policy: Policy | None = None,
        horizon: int | None = None,
        before_step: Callable[[int], bool] | None = None,
        until_end: bool = False,
    ) -> Rollout:
        """Imagine T steps: open loop under `actions`, or closed loop under `policy` for `horizon` steps.

        context: key -> (B, k, ...) observed frames, oldest first (k >= 1; the last k <= history are used);
        context_actions: (B, k-1, A) actions between those frames; actions: (B, T, A) to imagine.
        policy: (obs key -> (B, ...), step) -> (B, A), asked at each step on the observation the world model
        imagined last (the last real frame first); what it did is `Rollout.actions`. In that mode
        `before_step(t)` is asked before each step (False stops there, `Rollout.completed` False), and
        `until_end` stops once every row has a success or done label (rows are stepped on after their
        own end until then, so they never change each other's noise).
        uncertainty: with an ensemble, the members' disagreement on each step; otherwise the spread
        of `samples` draws of a stochastic generator (0 for regression)."""
        if (actions is None) == (policy is None) or (policy is not None and (horizon is None or horizon < 1)):
            raise ValueError("rollout takes either actions (B, T, A) or a policy with a horizon >= 1")
        if policy is None and (before_step is not None or until_end):
            raise ValueError("before_step and until_end apply to a closed-loop rollout (a policy)")
        m, K = self.model, self.cfg.dynamics.history
        dev = m.device
        keys = [*self.cfg.image_keys, *self.cfg.vector_keys]
        b, k = np.asarray(context[keys[0]]).shape[:2]
        z = self.encode(
            {key: np.asarray(context[key]).reshape(b * k, *np.asarray(context[key]).shape[2:]) for key in keys}
        ).view(b, k, -1, *([self.cfg.latent_grid] * 2))
        acts = None if actions is None else torch.as_tensor(np.asarray(actions, np.float32), device=dev)
        steps = acts.shape[1] if acts is not None else int(horizon)
        past = (
            torch.zeros(b, k - 1, self.cfg.action_dim, device=dev)
            if context_actions is None
            else torch.as_tensor(np.asarray(context_actions, np.float32), device=dev).view(b, k - 1, m.cfg.action_dim)
        )
        hist, past = self._pad(z[:, -K:], past[:, max(k - K, 0) :])
        dom = torch.as_tensor(np.broadcast_to(np.asarray(domain), (b,)).copy(), device=dev).long()
        noise = self._noise(seed)
        ref = self.decode(z[:, -1]) if policy is not None and self.cfg.autoencoder.residual_decode else None
        obs = {key: np.asarray(context[key])[:, -1] for key in keys}  # what the policy sees next
        out_z, heads, unc, seen, taken = [], {"reward": [], "success": [], "done": []}, [], [], []
        ended, completed = np.zeros(b, bool), True
        for t in range(steps):
            if before_step is not None and not before_step(t):
                completed = False
                break
            if policy is None:
                a_t = acts[:, t : t + 1]
            else:
                a_np = np.asarray(policy(obs, t), np.float32).reshape(b, self.cfg.action_dim)
                taken.append(a_np)
                a_t = torch.as_tensor(a_np, device=dev)[:, None]
            a = torch.cat([past, a_t], dim=1)
            h_in = (
                hist + self.cfg.dynamics.context_noise_infer * noise(hist.shape)
                if self.cfg.dynamics.context_noise_infer
                else hist
            )
            nxt, hd, members = m.predict(h_in, a, dom, noise)
            if uncertainty:
                unc.append(self._disagreement(h_in, a, dom, members, noise, samples))
            out_z.append(nxt)
            for key in heads:
                heads[key].append(hd[key])
            hist = torch.cat([hist[:, 1:], nxt[:, None]], dim=1)
            past = a[:, 1:]
            if policy is not None:  # the next observation, decoded (and anchored) as the frames are
                frame = {key: v[:, None] for key, v in self.decode(nxt).items()}
                if ref is not None:
                    self._anchor(frame, context, ref=ref)
                obs = {key: v[:, 0] for key, v in frame.items()}
                seen.append(obs)
            if until_end:
                h = self.cfg.heads
                ended |= (hd["success"].float().cpu().numpy().reshape(b) > h.success_threshold) | (
                    hd["done"].float().cpu().numpy().reshape(b) > h.done_threshold)
                if ended.all():
                    break
        if not out_z:  # stopped before the first step
            return self._empty(b, context, keys, completed)
        lat = torch.stack(out_z, dim=1)
        res = Rollout(lat, **{key: torch.stack(v, 1).cpu().numpy() for key, v in heads.items()})
        res.completed = completed
        res.success_label = res.success > self.model.cfg.heads.success_threshold
        res.done_label = res.done > self.model.cfg.heads.done_threshold
        if uncertainty:
            res.uncertainty = torch.stack(unc, 1).cpu().numpy()
        if policy is not None:
            res.actions = np.stack(taken, 1)
            res.frames = {key: np.stack([o[key] for o in seen], 1) for key in keys}
        elif decode:
            flat = self.decode(lat.flatten(0, 1))
            res.frames = {key: v.reshape(b, lat.shape[1], *v.shape[1:]) for key, v in flat.items()}
            if self.cfg.autoencoder.residual_decode:
                self._anchor(res.frames, context, ref=self.decode(z[:, -1]))
        return res

    def _empty(self, b: int, context: dict[str, np.ndarray], keys: list[str], completed: bool) -> Rollout:
        c = self.cfg
        none = np.zeros((b, 0))
        return Rollout(
            torch.zeros(b, 0, c.latent_channels, c.latent_grid, c.latent_grid), reward=none, success=none, done=none,
            success_label=none.astype(bool), done_label=none.astype(bool),
            actions=np.zeros((b, 0, c.action_dim), np.float32), completed=completed,
            frames={key: np.asarray(context[key])[:, :0] for key in keys},
        )

    def _anchor(self, frames: dict[str, np.ndarray], context: dict[str, np.ndarray], ref: dict) -> None:
        """Add the decoded change to the last real frame (`ref`: that frame's decode): the autoencoder's
        error on everything that does not move cancels, so only the moving parts carry reconstruction error."""
        for key in self.cfg.image_keys:
            real = np.asarray(context[key])[:, -1].astype(np.int16)
            delta = frames[key].astype(np.int16) - ref[key].astype(np.int16)[:, None]
            frames[key] = np.clip(real[:, None] + delta, 0, 255).astype(np.uint8)
        for key in self.cfg.vector_keys:  # the same for vectors: the decoder's static error cancels
            real = np.asarray(context[key], np.float32)[:, -1].reshape(len(ref[key]), -1)
            real = canonical_quaternions(real, self.cfg.quaternions.get(key, []))  # as the model sees it
            delta = frames[key].reshape(*frames[key].shape[:2], -1) - ref[key].reshape(len(ref[key]), 1, -1)
            frames[key] = (real[:, None] + delta).reshape(frames[key].shape).astype(np.float32)

    def _pad(self, z: torch.Tensor, past: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        K, k = self.cfg.dynamics.history, z.shape[1]
        if k < K:
            z = torch.cat([z[:, :1].expand(-1, K - k, *z.shape[2:]), z], dim=1)
            past = torch.cat(
                [past.new_zeros(len(z), K - k, past.shape[2] if past.dim() == 3 else self.cfg.action_dim), past], dim=1
            )
        return z, past[:, -(K - 1) :] if K > 1 else past[:, :0]

    def _disagreement(self, hist, a, dom, members: list[torch.Tensor], noise, samples: int) -> torch.Tensor:
        """The variance of the members' next latents (`members`: those `predict` already computed, member 0
        first), or of `samples` draws of a stochastic generator with one member."""
        m = self.model
        if len(m.dynamics) > 1:
            preds = members + [m.step(hist, a, dom, i, noise)[0] for i in range(len(members), len(m.dynamics))]
        elif m.generator.stochastic and samples > 1:
            preds = members + [m.step(hist, a, dom, 0, noise)[0] for _ in range(samples - 1)]
        else:
            return torch.zeros(len(hist), device=hist.device)
        return torch.stack(preds).var(dim=0).mean(dim=(1, 2, 3))
