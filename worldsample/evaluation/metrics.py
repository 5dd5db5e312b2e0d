"""How well world-model scores S rank policies against their real success R (ALGORITHMS.md section 4).

    pearson(S, R)    sum (S_i - Sbar)(R_i - Rbar) / sqrt(sum (S_i - Sbar)^2 * sum (R_i - Rbar)^2)
    spearman(S, R)   Pearson on ranks; tied values share the average of their ranks
    mmrv(S, R)       (1/N) sum_i max_j |R_i - R_j| * 1[(S_i < S_j) xor (R_i < R_j)], lower is better

MMRV follows SIMPLER's convention: strict comparisons on both sides and the gap measured in real
score. A consequence worth knowing: a tie in S against a strict order in R counts as a violation
(S_i < S_j is false, R_i < R_j true), so a constant score is charged for every real gap, while a
tie in R never costs anything (the gap is 0). Pearson and Spearman are undefined (None) when
either side has no spread; MMRV is always defined for N >= 1.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _pair(scores: Sequence[float], real: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    s, r = np.asarray(scores, np.float64).reshape(-1), np.asarray(real, np.float64).reshape(-1)
    if len(s) != len(r):
        raise ValueError(f"{len(s)} scores but {len(r)} real values")
    if not (np.isfinite(s).all() and np.isfinite(r).all()):
        raise ValueError("scores and real values must be finite")
    return s, r


def pearson(scores: Sequence[float], real: Sequence[float]) -> float | None:
    """Pearson's r; None with fewer than two policies or when either side is constant."""
    s, r = _pair(scores, real)
    if len(s) < 2:
        return None
    ds, dr = s - s.mean(), r - r.mean()
    den = float(np.sqrt((ds * ds).sum() * (dr * dr).sum()))
    if den == 0.0 or not np.isfinite(den):
        return None
    return float(np.clip((ds * dr).sum() / den, -1.0, 1.0))


def average_ranks(values: Sequence[float]) -> np.ndarray:
    """Ranks 1..N, ties sharing the mean of the ranks they span: (10, 20, 20, 30) -> (1, 2.5, 2.5, 4)."""
    v = np.asarray(values, np.float64).reshape(-1)
    order = np.argsort(v, kind="stable")
    ranks = np.empty(len(v), np.float64)
    i = 0
    while i < len(v):
        j = i
        while j + 1 < len(v) and v[order[j + 1]] == v[order[i]]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1  # mean of ranks i+1 .. j+1
        i = j + 1
    return ranks


def spearman(scores: Sequence[float], real: Sequence[float]) -> float | None:
    """Spearman's rho: Pearson on average ranks; None where Pearson is."""
    s, r = _pair(scores, real)
    return pearson(average_ranks(s), average_ranks(r))


def mmrv(scores: Sequence[float], real: Sequence[float]) -> float:
    """Mean maximum rank violation (SIMPLER's convention, see the module doc); 0 is a perfect ranking."""
    s, r = _pair(scores, real)
    if len(s) == 0:
        raise ValueError("MMRV of no policies")
    swapped = (s[:, None] < s[None, :]) ^ (r[:, None] < r[None, :])
    gap = np.abs(r[:, None] - r[None, :]) * swapped
    return float(gap.max(axis=1).mean())


def ranking_report(scores: Sequence[float], real: Sequence[float]) -> dict[str, float | int | None]:
    """All three metrics, and the same for the baseline that gives every policy one constant score
    (its Pearson and Spearman are undefined; its MMRV is what ranking adds over knowing nothing)."""
    s, r = _pair(scores, real)
    const = np.zeros_like(s)
    return {
        "policies": len(s),
        "pearson": pearson(s, r),
        "spearman": spearman(s, r),
        "mmrv": mmrv(s, r) if len(s) else None,
        "mmrv_constant": mmrv(const, r) if len(s) else None,
    }
