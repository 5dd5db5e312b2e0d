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


def prob_improvement(x, y) -> float:
    """P(X > Y): the chance that a run of arm X scores above a run of arm Y (ties count half), over all
    pairs of runs: rliable's probability of improvement on one task (the Mann-Whitney U statistic / nm)."""
    a, b = np.asarray(x, float)[:, None], np.asarray(y, float)[None, :]
    return float(np.mean((a > b) + 0.5 * (a == b)))


def bootstrap_ci2(x, y, stat, reps: int = 2000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of a two-arm statistic `stat(x, y)`, the runs of each arm resampled
    separately (rliable's stratified bootstrap with one task: the strata are the arms)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    rng = np.random.default_rng(seed)
    boots = [stat(x[rng.integers(0, len(x), len(x))], y[rng.integers(0, len(y), len(y))]) for _ in range(reps)]
    lo, hi = np.percentile(boots, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def performance_profile(scores, taus) -> np.ndarray:
    """Run-score distribution: the share of runs scoring above each threshold tau (rliable)."""
    s = np.asarray(scores, float)[:, None]
    return (s > np.asarray(taus, float)[None, :]).mean(0)


def detectable_difference(scores, n: int | None = None) -> float:
    """The smallest difference of means between two arms of `n` runs each (default: as many as given)
    that a two-sided test at 5 % finds with 80 % power, with the spread of `scores` as both arms' spread:
    (1.96 + 0.84) * sd * sqrt(2 / n). Used to say what a protocol can see, not as a test."""
    s = np.asarray(scores, float)
    n = n or len(s)
    return float(2.8 * s.std(ddof=1) * np.sqrt(2.0 / n)) if len(s) > 1 else float("nan")


def churn(rates: list[float]) -> tuple[float | None, float | None]:
    """Policy churn seen by a run's evaluations of one policy after another on the same held-out states:
    the mean absolute change of success between consecutive evaluations, and the largest fall from one
    to the next (0 when it never fell). (None, None) with fewer than two evaluations."""
    steps = np.diff(np.asarray(rates, np.float64))
    if not len(steps):
        return None, None
    return float(np.abs(steps).mean()), float(max(0.0, -steps.min()))
