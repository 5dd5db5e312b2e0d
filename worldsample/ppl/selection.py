"""Q-aware selection between the synthetic success and failure pools.

lambda* = clip((Qr - Qn) / (Qp - Qn), 0, 1) makes lambda * Qp + (1 - lambda) * Qn match the real
mean Qr. When no lambda reaches the tolerance delta_Q (Qr outside [Qn, Qp]), the samples that
pull the synthetic mean away from Qr are given weight 0, farthest first, until it is within
delta_Q of Qr: the critic never trains on a synthetic mix that inflates (or deflates) its values.
"""

from __future__ import annotations

import numpy as np


def q_aware_lambda(q_real: float, q_pos: float, q_neg: float) -> float:
    """Fraction of the synthetic minibatch to draw from the success pool."""
    gap = q_pos - q_neg
    if abs(gap) < 1e-8:
        return 0.5  # the pools look alike to the critic: take both equally
    return float(np.clip((q_real - q_neg) / gap, 0.0, 1.0))


def zero_weights_breaking_bound(q: np.ndarray, q_real: float, delta_q: float) -> np.ndarray:
    """Weights (1 or 0) for synthetic samples with critic values `q` so that the weighted mean
    lies within delta_q of q_real, dropping as few samples as possible, farthest first."""
    w = np.ones(len(q), np.float32)
    if len(q) == 0:
        return w
    mean = float(q.mean())
    if abs(mean - q_real) <= delta_q:
        return w
    side = np.sign(mean - q_real)  # +1: synthetic mean too high (overestimation)
    dev = (q - q_real) * side
    order = np.argsort(-dev)  # offending samples, farthest first
    sums = q.sum() - np.concatenate([[0.0], np.cumsum(q[order])])[:-1]
    counts = len(q) - np.arange(len(q))
    means = sums / counts
    ok = np.nonzero(np.abs(means - q_real) <= delta_q)[0]
    k = int(ok[0]) if len(ok) else len(q)
    w[order[:k]] = 0.0
    return w
