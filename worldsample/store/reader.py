"""Readers of one group. Any number may run beside the writer, in any process.

`refresh()` picks up episodes committed (or dropped) since the last call by listing the commit
records, so a long-lived reader sees new data without reopening anything.
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
from worldsample.store.records import EpisodeRecord, list_record_ids, read_record

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
                rec = read_record(self._commits / f"{i:09d}.json")
            except StoreError:
                if not (self._commits / f"{i:09d}.json").exists():
                    continue  # dropped by retention between listing and reading
                raise
            if self.cache is not None:
                arrays = self._read(rec, self.keys)
                if not (self._commits / f"{i:09d}.json").exists():
                    continue  # dropped while we read: its chunks may be gone, do not keep them
                self.cache.add(i, arrays, rec.terminated)
            self.records[i] = rec
            added += 1
        return added

    def _read(self, rec: EpisodeRecord, keys: Iterable[str]) -> dict[str, np.ndarray]:
        out = {}
        for k in keys:
            if self._arrays[k].shape[0] < rec.end:  # the writer grew the array since we opened it
                self._arrays[k] = zarr.open_array(str(self.path / "data" / k), mode="r")
            if self._arrays[k].shape[0] < rec.end:
                raise StoreCorruptError(f"{self.name}/episode {rec.episode}: {k} ends at slot {self._arrays[k].shape[0]}, record says {rec.end}")
            out[k] = self._arrays[k][rec.start : rec.end]
        return out

    def episode(self, episode: int, keys: Iterable[str] | None = None) -> dict[str, np.ndarray]:
        """One committed episode read from disk (all keys unless `keys` is given)."""
        rec = self.records.get(episode)
        if rec is None:
            raise StoreError(f"group {self.name!r} has no committed episode {episode}")
        return self._read(rec, keys if keys is not None else self.schema.keys)

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
