"""a'_t = clip(a_t * xi + eps_t): xi ~ U(1 - s, 1 + s) once per segment and dimension,
eps_t ~ N(0, sigma^2) per step. Dimensions that are zero over the whole real segment are inactive
(e.g. a gripper that never moved) and stay exactly zero."""

from __future__ import annotations

import numpy as np


def perturb_actions(
    actions: np.ndarray, rng: np.random.Generator, scale: float, sigma: float, low: np.ndarray | float = -1.0,
    high: np.ndarray | float = 1.0,
) -> np.ndarray:
    """actions: (B, T, A) real segments -> perturbed copies, same shape, float32."""
    a = np.asarray(actions, np.float32)
    b, _, d = a.shape
    xi = rng.uniform(1.0 - scale, 1.0 + scale, size=(b, 1, d))
    eps = rng.normal(0.0, sigma, size=a.shape)
    active = np.any(a != 0.0, axis=1, keepdims=True)
    out = np.clip(a * xi + eps, low, high) * active
    return out.astype(np.float32)
