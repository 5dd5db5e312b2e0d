"""The Best-of-N success score, numpy only: shared by the offline search (search.py, torch world
model) and the bridge's (robot_bridge/core/search.py, ONNX world model), so both choose alike.

Candidate c's rows are c*samples ... (c+1)*samples - 1 (one imagined future each). What ranks it:
the mean discounted imagined success, gamma^(t-1) for a success label at imagined step t and 0
without one (sooner is better, and a longer chunk must not win by piling up reward before it
succeeds), then the mean predicted return. Ties go to the lower index, so to the base policy's
chunk 0.
"""

from __future__ import annotations

import numpy as np

GAMMA = 0.97


def success_keys(success: np.ndarray, length: np.ndarray, returns: np.ndarray, n: int, samples: int,
                 gamma: float = GAMMA) -> list[tuple[float, float]]:
    """Per-row success (B,) bool, length (B,) and returns (B,), B = n * samples -> per candidate
    (discounted success, return), the tuples `best_candidate` compares."""
    s = (np.asarray(success) * gamma ** (np.asarray(length) - 1.0)).reshape(n, samples).mean(axis=1)
    r = np.asarray(returns).reshape(n, samples).mean(axis=1)
    return [(float(s[c]), float(r[c])) for c in range(n)]


def best_candidate(keys: list[tuple[float, ...]]) -> int:
    """The candidate with the greatest key tuple, the lowest index on a tie."""
    return max(range(len(keys)), key=lambda c: (*keys[c], -c))
