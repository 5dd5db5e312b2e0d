"""In-RAM copy of a group's committed episodes, packed end to end (no chunk padding).

Sampling reads only from here, so a batch is a handful of numpy gathers. Episodes are added as
they are committed and removed when retention drops them.
"""

from __future__ import annotations

import numpy as np


class StepCache:
    def __init__(self, specs: dict[str, tuple[tuple[int, ...], np.dtype]]):
        self._specs = specs
        self._cap = 0
        self.size = 0
        self.data: dict[str, np.ndarray] = {k: np.empty((0, *s), d) for k, (s, d) in specs.items()}
        self.episode_ids: list[int] = []
        self.ep_start = np.zeros(0, np.int64)  # cache index of each episode's first step
        self.ep_len = np.zeros(0, np.int64)
        self.ep_terminal = np.zeros(0, bool)
        self.version = 0  # bumped on every change; samplers key their derived indices on it

    def _reserve(self, need: int) -> None:
        if need <= self._cap:
            return
        cap = max(need, 2 * self._cap, 1024)
        for k, arr in self.data.items():
            grown = np.empty((cap, *arr.shape[1:]), arr.dtype)
            grown[: self.size] = arr[: self.size]
            self.data[k] = grown
        self._cap = cap

    def add(self, episode_id: int, arrays: dict[str, np.ndarray], terminal: bool) -> None:
        n = len(next(iter(arrays.values())))
        self._reserve(self.size + n)
        for k in self.data:
            self.data[k][self.size : self.size + n] = arrays[k]
        self.episode_ids.append(episode_id)
        self.ep_start = np.append(self.ep_start, self.size)
        self.ep_len = np.append(self.ep_len, n)
        self.ep_terminal = np.append(self.ep_terminal, terminal)
        self.size += n
        self.version += 1

    def remove(self, episode_ids: set[int]) -> None:
        keep_ep = np.array([e not in episode_ids for e in self.episode_ids], bool)
        if keep_ep.all():
            return
        step_keep = np.repeat(keep_ep, self.ep_len)
        for k in self.data:
            kept = self.data[k][: self.size][step_keep]
            self.data[k][: len(kept)] = kept
        self.size = int(step_keep.sum())
        self.episode_ids = [e for e, k in zip(self.episode_ids, keep_ep) if k]
        self.ep_len = self.ep_len[keep_ep]
        self.ep_terminal = self.ep_terminal[keep_ep]
        self.ep_start = np.concatenate([[0], np.cumsum(self.ep_len)[:-1]]).astype(np.int64)
        self.version += 1

    def relabel(self, episode_id: int, columns: dict[str, np.ndarray], terminal: bool) -> None:
        """Replace some keys' steps of one cached episode (an operator's label) and its terminal flag."""
        i = self.episode_ids.index(episode_id)
        s, n = int(self.ep_start[i]), int(self.ep_len[i])
        for k, v in columns.items():
            self.data[k][s : s + n] = v
        self.ep_terminal[i] = terminal
        self.version += 1

    def view(self, key: str) -> np.ndarray:
        return self.data[key][: self.size]

    @property
    def num_episodes(self) -> int:
        return len(self.episode_ids)
