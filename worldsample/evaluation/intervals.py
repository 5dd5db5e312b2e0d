"""Confidence intervals for success rates.

`wilson(successes, n)` is the Wilson score interval (Wilson 1927) for a binomial proportion:

    p = k / n,  z = the two-sided normal quantile (1.959963984540054 for 95 %)
    centre = (p + z^2 / (2n)) / (1 + z^2 / n)
    half   = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / (4 n^2))
    [centre - half, centre + half], clipped to [0, 1]

Unlike the normal ("Wald") interval it stays inside [0, 1] and is not zero-width at 0/n or n/n,
which matters for the few evaluation episodes a run can afford (0/10 gives [0, 0.28]).
"""

from __future__ import annotations

import math
from statistics import NormalDist


def z_for(confidence: float) -> float:
    """The two-sided standard normal quantile for `confidence` (0.95 -> 1.96)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """(low, high) Wilson score interval of `successes` out of `n` trials; ValueError for n < 1
    or successes outside 0..n (no interval without trials)."""
    if isinstance(successes, bool) or isinstance(n, bool) or int(successes) != successes or int(n) != n:
        raise ValueError(f"successes and n must be integers, got {successes!r} and {n!r}")
    k, n = int(successes), int(n)
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if not 0 <= k <= n:
        raise ValueError(f"successes must be in 0..{n}, got {k}")
    z = z_for(confidence)
    p, z2 = k / n, z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    low, high = max(0.0, centre - half), min(1.0, centre + half)
    # exact ends where they are exact (no 1e-17 from rounding at 0/n and n/n)
    return (0.0 if k == 0 else low), (1.0 if k == n else high)
