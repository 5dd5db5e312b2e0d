"""Out-of-bounds limits for imagined vector observations, from the range the source data covers.

Per dimension of each vector key: the min and max over the source episodes, widened on both sides
by `margin` times the key's whole range (max over its dimensions minus min), so that a dimension
that never moved in the data still tolerates the world model's small numerical error.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable

import numpy as np


class ObservedRange:
    """Remembers each source episode's per-key min/max, so a moving window of recent episodes
    costs one read per new episode."""

    def __init__(self, keys: Iterable[str]):
        self.keys = list(keys)
        self._per_episode: dict[Hashable, dict[str, tuple[np.ndarray, np.ndarray]]] = {}

    def update(self, sources: Iterable[Hashable], read: Callable[[Hashable], dict[str, np.ndarray]]) -> None:
        """Make `sources` the episodes that count; `read(source)` -> key -> (T, ...) values of a new one."""
        sources = list(sources)
        keep = set(sources)
        self._per_episode = {s: v for s, v in self._per_episode.items() if s in keep}
        for s in sources:
            if s not in self._per_episode:
                data = read(s)
                self._per_episode[s] = {
                    k: (v.min(axis=0), v.max(axis=0))
                    for k in self.keys
                    for v in [np.asarray(data[k], np.float64).reshape(len(data[k]), -1)]
                }

    def limits(self, margin: float) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """key -> (low, high) per dimension; empty when no source episode is known."""
        if not self._per_episode:
            return {}
        out = {}
        for k in self.keys:
            lo = np.min([e[k][0] for e in self._per_episode.values()], axis=0)
            hi = np.max([e[k][1] for e in self._per_episode.values()], axis=0)
            slack = margin * float(hi.max() - lo.min())
            out[k] = (lo - slack, hi + slack)
        return out


def outside(obs: dict[str, np.ndarray], limits: dict[str, tuple[np.ndarray, np.ndarray]]) -> bool:
    """Whether any step of any limited key of `obs` (key -> (T, ...)) lies outside its limits."""
    for k, (lo, hi) in limits.items():
        v = np.asarray(obs[k], np.float64).reshape(len(obs[k]), -1)
        if (v < lo).any() or (v > hi).any():
            return True
    return False
