"""Readers of one group. Any number may run beside the writer, in any process.

`refresh()` picks up episodes committed (or dropped) since the last call by listing the commit
records, so a long-lived reader sees new data without reopening anything. `read_steps` reads a
window of one key, for viewers that page through an episode a chunk at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import zarr

from worldsample.errors import StoreCorruptError, StoreError
from worldsample.store.cache import StepCache
from worldsample.store.layout import open_arrays, read_group_attrs
from worldsample.store.records import EpisodeRecord, list_record_ids, read_record, record_path

log = logging.getLogger(__name__)


class GroupReader:
    def __init__(self, group_path: Path, name: str, keys: Iterable[str] | None = None, cache: bool = True):
        self.name = name
        self.path = group_path
        self.schema, self.retention = read_group_attrs(group_path.parent, name)
        self.keys = list(keys) if keys is not None else list(self.schema.keys)
        unknown = set(self.keys) - set(self.schema.keys)
        if unknown:
            raise StoreError(f"group {name!r} has no keys {sorted(unknown)}; it has {sorted(self.schema.keys)}")
        # the step keys samplers need are always cached
        for k in ("action", "reward", "done", "intervention", "success"):
            if k not in self.keys:
                self.keys.append(k)
        self._arrays = open_arrays(group_path, self.schema, mode="r")
        self._commits = group_path / "commits"
        self.records: dict[int, EpisodeRecord] = {}
        specs = {k: (self.schema.keys[k].shape, self.schema.keys[k].np_dtype) for k in self.keys}
        self.cache = StepCache(specs) if cache else None
        self.refresh()

    def refresh(self) -> int:
        """Load newly committed episodes; forget dropped ones. Returns how many were added."""
        ids = list_record_ids(self._commits)
        gone = set(self.records) - set(ids)
        for i in gone:
            del self.records[i]
        if gone and self.cache is not None:
            self.cache.remove(gone)
        added = 0
        for i in ids:
            if i in self.records:
                continue
            try:
                rec = read_record(record_path(self._commits, i))
            except StoreError:
                if not self.is_committed(i):
                    continue  # dropped by retention between listing and reading
                raise
            if self.cache is not None:
                arrays = self._read(rec, self.keys)
                if not self.is_committed(i):
                    continue  # dropped while we read: its chunks may be gone, do not keep them
                self.cache.add(i, arrays, rec.terminated)
            self.records[i] = rec
            added += 1
        return added

    def _read(self, rec: EpisodeRecord, keys: Iterable[str]) -> dict[str, np.ndarray]:
        return {k: self._slots(rec, k, rec.start, rec.end) for k in keys}

    def _slots(self, rec: EpisodeRecord, key: str, lo: int, hi: int) -> np.ndarray:
        if self._arrays[key].shape[0] < rec.end:  # the writer grew the array since we opened it
            self._arrays[key] = zarr.open_array(str(self.path / "data" / key), mode="r")
        if self._arrays[key].shape[0] < rec.end:
            raise StoreCorruptError(
                f"{self.name}/episode {rec.episode}: {key} ends at slot {self._arrays[key].shape[0]}, "
                f"record says {rec.end}"
            )
        return self._arrays[key][lo:hi]

    def _record(self, episode: int) -> EpisodeRecord:
        rec = self.records.get(episode)
        if rec is None:
            raise StoreError(f"group {self.name!r} has no committed episode {episode}")
        return rec

    def episode(self, episode: int, keys: Iterable[str] | None = None) -> dict[str, np.ndarray]:
        """One committed episode read from disk (all keys unless `keys` is given)."""
        return self._read(self._record(episode), keys if keys is not None else self.schema.keys)

    def read_steps(self, episode: int, key: str, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Steps start..stop-1 (counted from the episode's first step) of one key of a committed
        episode, read from disk; only the chunks that hold them are decoded.

        Raises StoreError when retention dropped the episode while it was read (its chunks may
        already be gone), so freed data is never returned; StoreCorruptError when the arrays are
        shorter than the record says."""
        rec = self._record(episode)
        if key not in self.schema.keys:
            raise StoreError(f"group {self.name!r} has no key {key!r}; it has {sorted(self.schema.keys)}")
        stop = rec.length if stop is None else stop
        if not 0 <= start <= stop <= rec.length:
            raise StoreError(
                f"steps {start}..{stop} are outside {self.name}/episode {episode}: "
                f"it has {rec.length} steps, so 0 <= start <= stop <= {rec.length}"
            )
        out = self._slots(rec, key, rec.start + start, rec.start + stop)
        if not self.is_committed(episode):
            raise StoreError(
                f"{self.name}/episode {episode} was dropped by retention while it was read; refresh() and pick another"
            )
        return out

    def is_committed(self, episode: int) -> bool:
        """Whether the episode's commit record is on disk now, so its data is there to read.

        `records` changes only at `refresh()`; retention may drop an episode at any moment."""
        return record_path(self._commits, episode).exists()

    def episode_records(self) -> list[EpisodeRecord]:
        return [self.records[i] for i in sorted(self.records)]

    @property
    def episode_ends(self) -> np.ndarray:
        """Cumulative episode lengths, as in diffusion_policy's `meta/episode_ends`."""
        return np.cumsum([r.length for r in self.episode_records()], dtype=np.int64)

    @property
    def num_episodes(self) -> int:
        return len(self.records)

    @property
    def num_steps(self) -> int:
        return sum(r.length for r in self.records.values())
