"""rliable's aggregate statistics in a few lines (Agarwal et al., 2021, "Deep RL at the Edge of the
Statistical Precipice"): the interquartile mean over runs and its percentile-bootstrap confidence
interval. With one task, rliable's stratified bootstrap resamples runs within that one task, which is
the plain bootstrap over runs done here."""

from __future__ import annotations

import numpy as np
from scipy.stats import trim_mean


def iqm(scores) -> float:
    """Interquartile mean: the mean of the middle 50 % of the scores (25 % trimmed at each end)."""
    return float(trim_mean(np.asarray(scores, float), 0.25))


def bootstrap_ci(scores, stat=iqm, reps: int = 2000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of `stat` over runs (resampled with replacement)."""
    x = np.asarray(scores, float)
    rng = np.random.default_rng(seed)
    boots = [stat(x[rng.integers(0, len(x), len(x))]) for _ in range(reps)]
    lo, hi = np.percentile(boots, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def auc(points: list[tuple[int, float]], budget: int) -> float:
    """Area under a success-vs-real-steps curve (step interpolation: each evaluation holds until the
    next), divided by the budget: the mean success over the run, in [0, 1]."""
    if not points:
        return 0.0
    steps = [min(s, budget) for s, _ in points] + [budget]
    return float(sum((steps[i + 1] - steps[i]) * v for i, (_, v) in enumerate(points)) / max(budget, 1))
