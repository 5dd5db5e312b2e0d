"""Potential-based reward shaping (Ng, Harada and Russell, 1999): the learner's reward gains
`gamma^n * Phi(s_{t+n}) - Phi(s_t)` on every n-step transition, with Phi = 0 at a terminal state.

The shaped return telescopes to the sparse one plus `-Phi(s_0)`, so the shaping changes no
optimal policy; what it changes is how soon the critic sees which actions make progress: each
step's reward carries the change in the potential instead of waiting for the success at the end
of the episode to be bootstrapped back, step by step, through the critic.

A negative potential (minus a distance still to go) pays standing still far away `(1 - gamma) * |Phi|`
per step, the interest on what reaching the goal pays; a positive one (a value) charges it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

from worldsample.sim.layout import GOAL, HAND, OBJECT, STATE_DIM

if TYPE_CHECKING:
    from worldsample.loop.config import LoopConfig

Batch = dict[str, np.ndarray]


class Potential(Protocol):
    def __call__(self, obs: Batch, prefix: str) -> np.ndarray: ...


class DistancePotential:
    """Phi = -scale * (|hand - object| + |object - goal|) from the simulated arm's 39-dim state (its
    layout: worldsample/sim/layout.py). A real arm has it only with an object tracker; in simulation it
    measures what a dense progress signal is worth to the learner."""

    def __init__(self, scale: float, key: str = "state"):
        self.scale, self.key = scale, key

    def __call__(self, batch: Batch, prefix: str) -> np.ndarray:
        s = batch[f"{prefix}{self.key}"]
        if s.shape[-1] != STATE_DIM:
            raise ValueError(
                f"shaping=distance reads the {STATE_DIM}-dim state from {self.key!r}, got {s.shape[-1]} dims")
        to_go = np.linalg.norm(s[:, HAND] - s[:, OBJECT], axis=1) + np.linalg.norm(s[:, OBJECT] - s[:, GOAL], axis=1)
        return (-self.scale * to_go).astype(np.float32)


def shape(batch: Batch, potential: Potential, gamma: float) -> Batch:
    """The batch with its reward shaped in place: + gamma^n_step * (1 - done) * Phi(next) - Phi(obs)."""
    n = batch["n_step"].astype(np.float32)
    alive = 1.0 - batch["done"].astype(np.float32)
    bonus = (gamma ** n) * alive * potential(batch, "next_obs/") - potential(batch, "obs/")
    batch["reward"] = (batch["reward"] + bonus).astype(np.float32)
    return batch


def steps_to_go(cache, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(flattened observations, actions still to take until the first success) for every step up to
    the first success of each cached episode that has one (the operator's label, where there is one,
    already decides the cache's `success`); episodes with no success give no labels."""
    from worldsample.learner.sac import flatten_obs

    success = cache.view("success").reshape(-1).astype(bool)
    rows, to_go = [], []
    for s, n in zip(cache.ep_start, cache.ep_len):
        hit = np.flatnonzero(success[s : s + n])
        if len(hit):
            f = int(hit[0])
            rows.append(np.arange(s, s + f + 1))
            to_go.append(np.arange(f + 1, 0, -1))
    if not rows:
        return np.zeros((0, 0), np.float32), np.zeros(0, np.float32)
    idx = np.concatenate(rows)
    obs = flatten_obs({f"obs/{k}": cache.view(k)[idx] for k in keys}, keys)
    return obs, np.concatenate(to_go).astype(np.float32)


class ProgressPotential:
    """Phi(s) = scale * V(s), V regressed on the successful episodes (demos, and real episodes
    that reached the goal, the human's included): gamma^(actions still to take), the discounted value
    of the behaviour that succeeded from there. Learned from what a real arm has (its observations and
    its success signal), so it needs no object tracker; fitted again as new successes come in. Where V is
    the value of the policy itself, the shaped reward is its TD residual (zero along that behaviour, negative
    where it falls behind), and the critic is left to learn the advantage; at the success step the shaped
    reward is 1 - scale * V, since the terminal's potential is 0."""

    def __init__(self, scale: float, gamma: float, keys: list[str], hidden: int = 128, steps: int = 500,
                 batch: int = 256, seed: int = 0):
        self.scale, self.gamma, self.keys = scale, gamma, keys
        self.hidden, self.steps, self.batch, self.seed = hidden, steps, batch, seed
        self.net = None

    def fit(self, caches) -> dict[str, float]:
        """Fit V on every labelled step of these readers' caches; returns the fit's metrics."""
        import torch

        parts = [steps_to_go(c, self.keys) for c in caches]
        parts = [p for p in parts if len(p[1])]
        if not parts:
            return {}
        x = torch.from_numpy(np.concatenate([p[0] for p in parts]))
        y = torch.from_numpy(self.gamma ** np.concatenate([p[1] for p in parts]).astype(np.float32))
        g = torch.Generator().manual_seed(self.seed + len(y))
        with torch.random.fork_rng():  # seeded initial weights, without moving the learner's own torch RNG
            torch.manual_seed(self.seed + len(y))
            net = torch.nn.Sequential(torch.nn.Linear(x.shape[1], self.hidden), torch.nn.LayerNorm(self.hidden),
                                      torch.nn.ReLU(), torch.nn.Linear(self.hidden, self.hidden), torch.nn.ReLU(),
                                      torch.nn.Linear(self.hidden, 1), torch.nn.Sigmoid())
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        for _ in range(self.steps):
            i = torch.randint(len(y), (min(self.batch, len(y)),), generator=g)
            loss = torch.nn.functional.mse_loss(net(x[i]).squeeze(1), y[i])
            opt.zero_grad()
            loss.backward()
            opt.step()
        self.net = net.eval()
        with torch.no_grad():
            mse = float(torch.nn.functional.mse_loss(net(x).squeeze(1), y))
        return {"shaping/value_mse": mse, "shaping/examples": float(len(y))}

    def __call__(self, batch: Batch, prefix: str) -> np.ndarray:
        import torch

        from worldsample.learner.sac import flatten_obs

        if self.net is None:
            return np.zeros(len(batch["reward"]), np.float32)
        with torch.no_grad():
            v = self.net(torch.from_numpy(flatten_obs(batch, self.keys, prefix))).squeeze(1).numpy()
        return (self.scale * v).astype(np.float32)


def make_potential(loop: LoopConfig, keys: list[str]) -> Potential | None:
    """The run's potential (`loop.shaping`), or None when shaping is off."""
    if loop.shaping == "distance":
        return DistancePotential(loop.shaping_scale)
    if loop.shaping == "progress":
        return ProgressPotential(loop.shaping_scale, loop.learner.gamma, keys, seed=loop.seed)
    return None
