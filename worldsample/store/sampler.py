"""Vectorised sampling from cached groups: transitions, n-step transitions, windows, mixtures.

Transition t of an episode of length L pairs obs[t] with obs[t+1]. The last step has no next
observation; it is sampled only when the episode terminated there (its bootstrap is masked by
`done`, and next_obs repeats obs). A truncated episode's last step is never sampled.

With `action_chunk` k > 1 a transition's action is the k actions played from step t on, one
vector of k times the action's size (Q-chunking): a step is sampled only if the chunk's k steps
and the state after them are in its episode, or the episode terminated within them (the actions
past the end repeat the last one; the backup masks everything after it).

With `returns_to_go`, `nstep` also returns `mc_return`: the discounted sum of the rewards from step
t to its episode's end (Monte-Carlo, the return the episode's own actions earned; Cal-QL's
reference value).

With `intervention_penalty` c > 0 the reward of a policy step whose next step a human drove (the
last step before a takeover) is lowered by c (RLIF: the human's decision to step in is itself a
reward signal), in transitions, n-step sums and `mc_return` alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from worldsample.errors import StoreError
from worldsample.store.reader import GroupReader
from worldsample.store.records import EpisodeRecord

Batch = dict[str, np.ndarray]


class _Index:
    """Per-step episode bounds for one cache version (recomputed only when the cache changes)."""

    def __init__(self, reader: GroupReader, where: Callable[[EpisodeRecord], bool] | None, step_key: str | None = None,
                 chunk: int = 1, penalty: float = 0.0):
        c = reader.cache
        self.version = c.version
        self.ep_end = np.repeat(c.ep_start + c.ep_len, c.ep_len)  # exclusive end of each step's episode
        self.terminal = np.repeat(c.ep_terminal, c.ep_len)
        last = self.ep_end - 1
        steps = np.arange(c.size)
        ok = (steps + chunk <= last) | self.terminal
        if where is not None:
            keep = np.array([where(reader.records[e]) for e in c.episode_ids], bool)
            ok &= np.repeat(keep, c.ep_len)
        if step_key is not None:
            ok &= c.view(step_key).reshape(c.size).astype(bool)
        self.transitions = steps[ok]
        self._windows: dict[int, np.ndarray] = {}
        self._returns: dict[tuple[str, float], np.ndarray] = {}
        self._rewards: dict[str, np.ndarray] = {}
        self._c = c
        self.penalty = float(penalty)

    def reward(self, reward_key: str) -> np.ndarray:
        """Per cached step (float32): the reward key, less `penalty` on each takeover's last policy step."""
        if reward_key in self._rewards:
            return self._rewards[reward_key]
        r = self._c.view(reward_key).reshape(self._c.size).astype(np.float32, copy=False)
        if not self.penalty:
            return r
        human = self._c.view("intervention").reshape(self._c.size).astype(bool)
        onset = np.zeros(self._c.size, bool)
        # step t hands over when the policy drove it and a human drives t + 1 in the same episode
        onset[:-1] = ~human[:-1] & human[1:] & (np.arange(1, self._c.size) < self.ep_end[:-1])
        self._rewards[reward_key] = r - np.float32(self.penalty) * onset
        return self._rewards[reward_key]

    def returns_to_go(self, reward_key: str, gamma: float) -> np.ndarray:
        """Per cached step: sum over k >= 0 of gamma^k r[t + k], up to the end of the step's episode."""
        key = (reward_key, float(gamma))
        if key not in self._returns:
            c = self._c
            r = self.reward(reward_key).astype(np.float64)
            out = np.zeros(c.size, np.float64)
            for s, n in zip(c.ep_start, c.ep_len):
                if gamma > 0 and n * -np.log(gamma) < 600:  # gamma^n stays clear of float64's underflow (1e-308)
                    disc = float(gamma) ** np.arange(n, dtype=np.float64)
                    out[s:s + n] = np.cumsum((r[s:s + n] * disc)[::-1])[::-1] / disc
                    continue
                acc = 0.0
                for t in range(s + n - 1, s - 1, -1):
                    acc = r[t] + gamma * acc
                    out[t] = acc
            self._returns[key] = out.astype(np.float32)
        return self._returns[key]

    def window_starts(self, length: int) -> np.ndarray:
        if length not in self._windows:
            c = self._c
            ok = c.ep_len >= length
            starts = [np.arange(s, s + n - length + 1) for s, n in zip(c.ep_start[ok], c.ep_len[ok])]
            self._windows[length] = np.concatenate(starts) if starts else np.zeros(0, np.int64)
        return self._windows[length]


class GroupSampler:
    """Samples one group. Call `reader.refresh()` (or `refresh()` here) to see new commits.

    `where` restricts transitions to episodes whose record passes it (e.g. the success pool of
    the synthetic group); `step_key` to steps whose boolean key is true (e.g. "intervention":
    the steps a human drove); `reward_key` names the step key summed as reward (e.g. "success" for
    a sparse success reward); `action_chunk` > 1 makes `nstep` return chunks of that many actions
    (then n must be the chunk's length); `returns_to_go` adds each step's Monte-Carlo return
    (`mc_return`) to `nstep`'s batches; `intervention_penalty` lowers the reward of the last policy
    step before each takeover (module docstring); several samplers may share one reader."""

    def __init__(
        self,
        reader: GroupReader,
        obs_keys: list[str] | None = None,
        where: Callable[[EpisodeRecord], bool] | None = None,
        step_key: str | None = None,
        reward_key: str = "reward",
        action_chunk: int = 1,
        returns_to_go: bool = False,
        intervention_penalty: float = 0.0,
    ):
        if reader.cache is None:
            raise StoreError("sampling needs a reader with cache=True")
        self.reader = reader
        self.obs_keys = obs_keys or [k for k in reader.schema.obs_keys if k in reader.keys]
        self.where = where
        if step_key is not None and step_key not in reader.keys:
            raise StoreError(
                f"group {reader.name!r} does not cache key {step_key!r} to select steps by; it has {reader.keys}"
            )
        self.step_key = step_key
        if reward_key not in reader.keys:
            raise StoreError(f"group {reader.name!r} does not cache key {reward_key!r} to use as the reward")
        self.reward_key = reward_key
        if action_chunk < 1:
            raise ValueError(f"action_chunk must be >= 1, got {action_chunk}")
        self.action_chunk = action_chunk
        self.returns_to_go = returns_to_go
        if intervention_penalty < 0:
            raise ValueError(f"intervention_penalty must be >= 0, got {intervention_penalty}")
        if intervention_penalty and "intervention" not in reader.keys:
            raise StoreError(f"group {reader.name!r} does not cache key 'intervention' for intervention_penalty")
        self.intervention_penalty = float(intervention_penalty)
        self._index: _Index | None = None

    def refresh(self) -> int:
        return self.reader.refresh()

    def _idx(self) -> _Index:
        if self._index is None or self._index.version != self.reader.cache.version:
            self._index = _Index(self.reader, self.where, self.step_key, self.action_chunk, self.intervention_penalty)
        return self._index

    @property
    def num_transitions(self) -> int:
        return len(self._idx().transitions)

    def _pick(self, pool: np.ndarray, rng: np.random.Generator, batch: int, what: str) -> np.ndarray:
        if len(pool) == 0:
            raise StoreError(f"group {self.reader.name!r} has no {what} to sample yet")
        return pool[rng.integers(0, len(pool), size=batch)]

    def transitions(self, rng: np.random.Generator, batch: int) -> Batch:
        ix = self._idx()
        t = self._pick(ix.transitions, rng, batch, "transitions")
        nxt = np.minimum(t + 1, ix.ep_end[t] - 1)
        return self._gather(t, nxt, done=ix.terminal[t] & (t == ix.ep_end[t] - 1), n_step=np.ones(batch, np.int64),
                            reward=self._rewards(t), discount=None)

    def nstep(self, rng: np.random.Generator, batch: int, n: int, gamma: float) -> Batch:
        """n-step returns, cut at the episode end. `n_step` holds the steps actually summed;
        `discount` is gamma ** n_step, the factor in front of the bootstrap value. With an action
        chunk, `action` holds the chunk's actions and `chunk_human` whether a human chose every one
        of them that was played (demonstration or intervention steps)."""
        if n < 1:
            raise ValueError("n must be >= 1")
        if self.action_chunk > 1 and n != self.action_chunk:
            raise ValueError(f"a sampler of {self.action_chunk}-action chunks backs up over the chunk: n must be "
                             f"{self.action_chunk}, got {n}")
        ix = self._idx()
        t = self._pick(ix.transitions, rng, batch, "transitions")
        end = ix.ep_end[t]
        term = ix.terminal[t]
        # steps summed: up to n, fewer near the end; a truncated episode needs a next obs to exist
        m = np.minimum(n, np.where(term, end - t, end - 1 - t))
        k = np.arange(n)
        rows = np.minimum(t[:, None] + k, end[:, None] - 1)
        r = self._rewards(rows)
        mask = k[None, :] < m[:, None]
        ret = (r * mask * gamma ** k[None, :]).sum(axis=1).astype(np.float32)
        nxt = np.minimum(t + m, end - 1)
        done = term & (t + m >= end)
        out = self._gather(t, nxt, done=done, n_step=m, reward=ret, discount=(gamma**m).astype(np.float32))
        if self.action_chunk > 1:
            c = self.reader.cache
            out["action"] = c.view("action")[rows].reshape(len(t), -1)
            human = c.view("intervention")[rows].reshape(len(t), n).astype(bool)
            out["chunk_human"] = (human | ~mask).all(axis=1)
        if self.returns_to_go:
            out["mc_return"] = ix.returns_to_go(self.reward_key, gamma)[t]
        return out

    def _rewards(self, rows: np.ndarray) -> np.ndarray:
        if self.intervention_penalty:
            return self._idx().reward(self.reward_key)[rows]
        # no copy for the float32 reward itself: the default path is one gather, as before
        return self.reader.cache.view(self.reward_key)[rows].astype(np.float32, copy=False)

    def _gather(self, t, nxt, done, n_step, reward, discount) -> Batch:
        c = self.reader.cache
        out: Batch = {}
        for k in self.obs_keys:
            v = c.view(k)
            out[f"obs/{k}"] = v[t]
            out[f"next_obs/{k}"] = v[nxt]
        out["action"] = c.view("action")[t]
        out["reward"] = reward
        out["done"] = done
        out["n_step"] = n_step
        out["intervention"] = c.view("intervention")[t]
        out["index"] = t
        if discount is not None:
            out["discount"] = discount
        return out

    def windows(self, rng: np.random.Generator, batch: int, length: int, keys: list[str] | None = None) -> Batch:
        """Fixed-length windows inside single episodes: key -> (batch, length, ...)."""
        starts = self._pick(self._idx().window_starts(length), rng, batch, f"windows of length {length}")
        rows = starts[:, None] + np.arange(length)
        c = self.reader.cache
        return {k: c.view(k)[rows] for k in (keys or self.reader.keys)}


def split_counts(weights: Mapping[str, float], batch: int) -> dict[str, int]:
    """Integer batch shares proportional to `weights` that sum to `batch` (largest remainder)."""
    total = sum(weights.values())
    if total <= 0:
        raise StoreError("mixture weights must have a positive sum")
    raw = {k: batch * w / total for k, w in weights.items()}
    counts = {k: int(np.floor(v)) for k, v in raw.items()}
    left = batch - sum(counts.values())
    order = list(raw)  # ties go to the group listed first
    for k in sorted(order, key=lambda k: (counts[k] - raw[k], order.index(k)))[:left]:
        counts[k] += 1
    return counts


class MixtureSampler:
    """Draws each batch from several groups by weight; groups with nothing to sample yet give
    their share to the others. `composition` of the last batch is kept for metrics."""

    def __init__(self, samplers: Mapping[str, GroupSampler], weights: Mapping[str, float]):
        unknown = set(weights) - set(samplers)
        if unknown:
            raise StoreError(f"mixture weights name groups without a sampler: {sorted(unknown)}")
        if any(w < 0 for w in weights.values()):
            raise StoreError("mixture weights must be >= 0")
        self.samplers = dict(samplers)
        self.weights = dict(weights)
        self.composition: dict[str, int] = {}

    def _counts(self, batch: int) -> dict[str, int]:
        live = {k: w for k, w in self.weights.items() if w > 0 and self.samplers[k].num_transitions > 0}
        if not live:
            raise StoreError("no group in the mixture has transitions to sample yet")
        return split_counts(live, batch)

    def sample(self, rng: np.random.Generator, batch: int, n: int = 1, gamma: float = 0.99) -> Batch:
        counts = self._counts(batch)
        parts, names = [], []
        for g, cnt in counts.items():
            if cnt:
                parts.append(self.samplers[g].nstep(rng, cnt, n, gamma))
                names.append(np.full(cnt, g))
        keys = set.intersection(*(set(p) for p in parts))
        out = {k: np.concatenate([p[k] for p in parts]) for k in keys}
        out["group"] = np.concatenate(names)
        self.composition = counts
        return out
