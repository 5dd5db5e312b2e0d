"""Potential-based reward shaping (Ng, Harada and Russell, 1999): the learner's reward gains
`gamma^n * Phi(s_{t+n}) - Phi(s_t)` on every n-step transition, with Phi = 0 at a terminal state.

The shaped return telescopes to the sparse one plus `-Phi(s_0)`, so the shaping changes no
optimal policy; what it changes is how soon the critic sees which actions make progress: each
step's reward carries the change in the potential instead of waiting for the success at the end
of the episode to be bootstrapped back, step by step, through the critic.

The potential is negative before the end (a distance still to go, times a scale), so standing still
far away earns `(1 - gamma) * |Phi|`, the interest on what reaching the goal pays.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

Batch = dict[str, np.ndarray]


class Potential(Protocol):
    def __call__(self, obs: Batch, prefix: str) -> np.ndarray: ...


class DistancePotential:
    """Phi = -scale * (|hand - object| + |object - goal|) from the simulated arm's 39-dim state (its
    layout: worldsample/sim/layout.py). A real arm has it only with an object tracker; in simulation it
    measures what a dense progress signal is worth to the learner."""

    def __init__(self, scale: float, key: str = "state"):
        from worldsample.sim.layout import GOAL, HAND, OBJECT, STATE_DIM

        self.scale, self.key, self.dim = scale, key, STATE_DIM
        self.hand, self.obj, self.goal = HAND, OBJECT, GOAL

    def __call__(self, batch: Batch, prefix: str) -> np.ndarray:
        s = batch[f"{prefix}{self.key}"]
        if s.shape[-1] != self.dim:
            raise ValueError(f"shaping=distance reads the {self.dim}-dim state from {self.key!r}, got {s.shape[-1]} dims")
        to_go = np.linalg.norm(s[:, self.hand] - s[:, self.obj], axis=1) + np.linalg.norm(
            s[:, self.obj] - s[:, self.goal], axis=1)
        return (-self.scale * to_go).astype(np.float32)


def shape(batch: Batch, potential: Potential, gamma: float) -> Batch:
    """The batch with its reward shaped in place: + gamma^n_step * (1 - done) * Phi(next) - Phi(obs)."""
    n = batch["n_step"].astype(np.float32)
    alive = 1.0 - batch["done"].astype(np.float32)
    bonus = (gamma ** n) * alive * potential(batch, "next_obs/") - potential(batch, "obs/")
    batch["reward"] = (batch["reward"] + bonus).astype(np.float32)
    return batch
