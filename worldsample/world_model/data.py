"""Training windows from the episode store, with a fixed held-out split.

Episode ids with `id % holdout_every == holdout_every - 1` are held out of training in every
group; evaluation uses exactly those. The rule depends only on the id, so it survives restarts
and new commits (an episode never moves between the splits).

Windows are sampled from each reader's in-RAM cache as row indices; the trainer gathers raw
steps (images, actions, labels) or the latents it has already encoded for the same rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from worldsample.store import EpisodeStore, split_counts
from worldsample.store.reader import GroupReader
from worldsample.world_model.errors import NotEnoughDataError

LABEL_KEYS = ("action", "reward", "success", "done")
# (store, group, keys) -> a cached reader of the group; the default is the store's own reader. The
# image profile (worldsample.loop.vision) passes one whose cache derives `latent` from the frames.
ReaderFactory = Callable[[EpisodeStore, str, list[str]], GroupReader]
DOMAIN_OF_GROUP = {"demo": 0, "real": 0, "synthetic": 0, "sim": 1}


def is_heldout(episode: int, every: int) -> bool:
    return every > 0 and episode % every == every - 1


class GroupWindows:
    """Window starts of one group's cached episodes in one split ("train" or "heldout")."""

    def __init__(self, reader: GroupReader, holdout_every: int, split: str = "train", max_episodes: int | None = None):
        self.reader, self.every, self.split = reader, holdout_every, split
        self.max_episodes = max_episodes  # train on the first n episodes of the split only (few-data studies)
        self._starts: dict[tuple[int, int], np.ndarray] = {}
        self._ending: dict[tuple[int, int, tuple[str, ...]], np.ndarray] = {}

    @property
    def cache(self):
        return self.reader.cache

    def keep(self, episode: int) -> bool:
        if is_heldout(episode, self.every) != (self.split == "heldout"):
            return False
        if self.max_episodes is None:
            return True
        want_heldout = self.split == "heldout"
        earlier = [e for e in self.cache.episode_ids if e < episode and is_heldout(e, self.every) == want_heldout]
        return len(earlier) < self.max_episodes

    def episodes(self) -> list[int]:
        return [e for e in self.cache.episode_ids if self.keep(e)]

    def starts(self, length: int) -> np.ndarray:
        c = self.cache
        key = (c.version, length)
        if key not in self._starts:
            spans = [
                np.arange(s, s + n - length + 1)
                for e, s, n in zip(c.episode_ids, c.ep_start, c.ep_len)
                if n >= length and self.keep(e)
            ]
            self._starts = {key: np.concatenate(spans) if spans else np.zeros(0, np.int64)}
        return self._starts[key]

    def starts_ending_on(self, length: int, labels: tuple[str, ...]) -> np.ndarray:
        """Window starts whose last step has any of the boolean `labels` set (success, done)."""
        key = (self.cache.version, length, labels)
        if key not in self._ending:
            starts = self.starts(length)
            last = starts + length - 1
            hit = np.zeros(len(starts), bool)
            for name in labels:
                hit |= self.cache.view(name)[last].astype(bool).reshape(len(last), -1).any(axis=1)
            self._ending = {key: starts[hit]}
        return self._ending[key]


@dataclass
class Windows:
    """Rows (B, L) of consecutive cached steps, per group, in batch order."""

    parts: list[tuple[str, np.ndarray]]

    def gather(self, tables: dict[str, np.ndarray]) -> np.ndarray:
        return np.concatenate([tables[g][rows] for g, rows in self.parts])

    def domains(self) -> np.ndarray:
        return np.concatenate([np.full(len(rows), DOMAIN_OF_GROUP.get(g, 0)) for g, rows in self.parts])


class WindowSource:
    """Windows mixed across groups by weight; a group with no window of the length gives its share away."""

    def __init__(self, store: EpisodeStore, weights: dict[str, float], keys: list[str], holdout_every: int,
                 split: str = "train", max_episodes: dict[str, int] | None = None, reader: ReaderFactory | None = None):
        missing = [g for g in weights if g not in store.groups]
        if missing:
            raise NotEnoughDataError(
                f"the store has no group {missing}; it has {store.groups or 'none'} "
                "(collect demonstrations first: worldsample demos collect)"
            )
        self.weights = {g: w for g, w in weights.items() if w > 0}
        limit = max_episodes or {}
        make = reader or (lambda st, g, k: st.reader(g, keys=k))
        self.groups = {g: GroupWindows(make(store, g, keys), holdout_every, split, limit.get(g)) for g in self.weights}

    def heldout(self, exclude: tuple[str, ...] = ()) -> WindowSource:
        """The held-out split of the same groups (but `exclude`), sharing this source's readers and caches."""
        out = object.__new__(WindowSource)
        out.weights = {g: w for g, w in self.weights.items() if g not in exclude}
        out.groups = {g: GroupWindows(self.groups[g].reader, self.groups[g].every, "heldout") for g in out.weights}
        return out

    def refresh(self) -> int:
        return sum(gw.reader.refresh() for gw in self.groups.values())

    def table(self, group: str, key: str) -> np.ndarray:
        return self.groups[group].cache.view(key)

    def tables(self, key: str) -> dict[str, np.ndarray]:
        return {g: self.table(g, key) for g in self.groups}

    def sample(self, rng: np.random.Generator, batch: int, length: int) -> Windows:
        live = {g: w for g, w in self.weights.items() if len(self.groups[g].starts(length))}
        if not live:
            raise NotEnoughDataError(f"no training episode of length >= {length} in groups {list(self.weights)}")
        parts = []
        for g, n in split_counts(live, batch).items():
            if n:
                pool = self.groups[g].starts(length)
                parts.append((g, pool[rng.integers(0, len(pool), n)][:, None] + np.arange(length)))
        return Windows(parts)

    def sample_ending_on(self, rng: np.random.Generator, batch: int, length: int, labels: tuple[str, ...]) -> Windows:
        """Like `sample`, but only windows whose last step has one of `labels` set; empty when none has."""
        live = {g: w for g, w in self.weights.items() if len(self.groups[g].starts_ending_on(length, labels))}
        parts = []
        for g, n in (split_counts(live, batch) if live else {}).items():
            if n:
                pool = self.groups[g].starts_ending_on(length, labels)
                parts.append((g, pool[rng.integers(0, len(pool), n)][:, None] + np.arange(length)))
        return Windows(parts)

    def frames(self, rng: np.random.Generator, batch: int) -> Windows:
        return self.sample(rng, batch, 1)


class LatentTable:
    """Latents of every cached step of a source's groups, row-aligned with the caches.

    Only episodes not seen before are encoded; a cache that was compacted (retention) is rebuilt."""

    def __init__(self, source: WindowSource, encode):
        self.source, self.encode = source, encode
        self._by_episode: dict[tuple[str, int], np.ndarray] = {}
        self._tables: dict[str, tuple[int, np.ndarray]] = {}

    def tables(self) -> dict[str, np.ndarray]:
        out = {}
        for g, gw in self.source.groups.items():
            c = gw.cache
            if g not in self._tables or self._tables[g][0] != c.version:
                eps = []
                for e, s, n in zip(c.episode_ids, c.ep_start, c.ep_len):
                    if (g, e) not in self._by_episode:
                        self._by_episode[(g, e)] = self.encode({k: v[s : s + n] for k, v in c.data.items()})
                    eps.append(self._by_episode[(g, e)])
                self._tables[g] = (c.version, np.concatenate(eps) if eps else np.zeros((0,)))
            out[g] = self._tables[g][1]
        return out
