"""The single writer of one group: validates steps, streams full chunks, commits episodes.

Steps are checked at `add_step` (a bad step raises EpisodeRejected and is not kept). Full chunks
are flushed as the episode grows, so long episodes do not sit in RAM; they stay invisible until
`commit()` writes the commit record. `append_episode` checks a whole episode before writing any
of it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from zarr.core.sync import sync

from worldsample.atomic import atomic_write_text
from worldsample.errors import EpisodeRejected, StoreCorruptError, StoreError
from worldsample.store.layout import Retention, open_arrays, read_group_attrs, remove_chunks, writer_lock_path
from worldsample.store.lock import WriterLock
from worldsample.store.records import (
    EpisodeRecord,
    list_record_ids,
    read_record,
    record_name,
    record_path,
    write_record,
)
from worldsample.store.schema import STEP_DEFAULTS, KeySpec

log = logging.getLogger(__name__)


async def _gather(coros):
    return await asyncio.gather(*coros)


def coerce_value(key: str, spec: KeySpec, value: Any, leading: tuple[int, ...] = ()) -> np.ndarray:
    """Check one key's value against its spec; return it in the declared dtype."""
    arr = np.asarray(value)
    want = (*leading, *spec.shape)
    if arr.shape != want:
        raise EpisodeRejected(f"{key}: expected shape {want}, got {arr.shape}")
    dst = spec.np_dtype
    if spec.kind == "image" and arr.dtype != dst:
        raise EpisodeRejected(f"{key}: images must be {dst}, got {arr.dtype}")
    if dst == np.bool_ and arr.dtype != np.bool_:
        raise EpisodeRejected(f"{key}: expected bool, got {arr.dtype}")
    if arr.dtype.kind not in "biuf" or not np.can_cast(arr.dtype, dst, casting="same_kind"):
        raise EpisodeRejected(f"{key}: dtype {arr.dtype} does not convert safely to {dst}")
    if spec.finite and arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise EpisodeRejected(f"{key}: contains NaN or inf")
    with np.errstate(over="ignore"):
        out = arr.astype(dst, copy=False)
    if spec.finite and dst.kind == "f" and not np.isfinite(out).all():
        raise EpisodeRejected(f"{key}: value overflows {dst}")
    return out


class GroupWriter:
    """Holds the group's write lock from construction until `close()`."""

    def __init__(self, group_path: Path, name: str):
        self.name = name
        self.path = group_path
        self.schema, self.retention = read_group_attrs(group_path.parent, name)
        self._lock = WriterLock(writer_lock_path(group_path), f"group {name!r} in {group_path.parent}")
        self._lock.acquire()
        try:
            self._arrays = open_arrays(group_path, self.schema, mode="r+")
            self._commits = group_path / "commits"
            self._state_path = group_path / "writer_state.json"
            self._records: dict[int, EpisodeRecord] = {}
            self.damaged: dict[int, str] = {}  # unreadable records: their ids stay used, their slots untouched
            for i in list_record_ids(self._commits):
                try:
                    rec = read_record(record_path(self._commits, i))
                    if rec.episode != i:
                        raise StoreCorruptError(f"commit record {record_name(i)} names episode {rec.episode}")
                    self._records[i] = rec
                except StoreCorruptError as e:
                    log.error("group %r: leaving episode %d aside: %s", name, i, e)
                    self.damaged[i] = str(e)
            self._next_id, self._next_slot = self._high_water()
            self._drop_uncommitted_chunks()
        except BaseException:
            self._lock.release()
            raise
        self._episode: EpisodeBuilder | None = None

    # -- bookkeeping -----------------------------------------------------------------------
    def _high_water(self) -> tuple[int, int]:
        next_id, next_slot = 0, 0
        if self._state_path.exists():
            try:
                st = json.loads(self._state_path.read_text())
                next_id, next_slot = int(st["next_id"]), int(st["next_slot"])
            except (ValueError, KeyError) as e:
                log.warning("ignoring unreadable %s: %s", self._state_path, e)
        for r in self._records.values():
            next_id = max(next_id, r.episode + 1)
            next_slot = max(next_slot, self._align(r.end))
        # a damaged record's slots are unknown: they lie below the saved high-water mark
        next_id = max(next_id, *(i + 1 for i in self.damaged), 0)
        return next_id, next_slot

    def _align(self, slot: int) -> int:
        c = self.schema.chunk_len
        return math.ceil(slot / c) * c

    def _ensure_capacity(self, end: int) -> None:
        """Grow the time axis to hold slot `end - 1`; geometric growth keeps metadata writes rare."""
        for arr in self._arrays.values():
            if arr.shape[0] < end:
                arr.resize((self._align(max(end, arr.shape[0] * 3 // 2)), *arr.shape[1:]))

    def _drop_uncommitted_chunks(self) -> None:
        """Chunks past the last commit belong to an episode that never committed: remove them."""
        first = self._next_slot // self.schema.chunk_len
        for key in self.schema.keys:
            remove_chunks(self.path, key, first)

    def _save_state(self) -> None:
        atomic_write_text(self._state_path, json.dumps({"next_id": self._next_id, "next_slot": self._next_slot}))

    # -- public API ------------------------------------------------------------------------
    @property
    def num_episodes(self) -> int:
        return len(self._records)

    @property
    def next_episode_id(self) -> int:
        return self._next_id

    @property
    def records(self) -> list[EpisodeRecord]:
        return [self._records[i] for i in sorted(self._records)]

    def begin_episode(self) -> EpisodeBuilder:
        if not self._lock.held:
            raise StoreError(f"writer of group {self.name!r} is closed")
        if self._episode is not None:
            raise StoreError("an episode is already open; commit() or discard() it first")
        self._episode = EpisodeBuilder(self, self._next_slot)
        return self._episode

    def append_episode(self, data: Mapping[str, Any], **meta: Any) -> EpisodeRecord:
        """Validate a whole episode (key -> array with time first), then write and commit it."""
        lengths = {k: len(np.asarray(v)) for k, v in data.items() if np.ndim(v) > 0}
        if not lengths or max(lengths.values()) == 0:
            raise EpisodeRejected(f"group {self.name!r}: an episode needs at least one step")
        n = max(lengths.values())
        checked = {}
        for key, spec in self.schema.keys.items():
            if key not in data:
                if key not in STEP_DEFAULTS:
                    raise EpisodeRejected(f"missing key {key!r}")
                checked[key] = np.full((n, *spec.shape), STEP_DEFAULTS[key], dtype=spec.np_dtype)
            else:
                checked[key] = coerce_value(key, spec, data[key], leading=(n,))
        unknown = set(data) - set(self.schema.keys)
        if unknown:
            raise EpisodeRejected(f"unknown keys {sorted(unknown)}; the schema has {sorted(self.schema.keys)}")
        ep = self.begin_episode()
        try:
            ep._extend(checked, n)
            return ep.commit(**meta)
        except BaseException:
            if self._episode is ep:
                ep.discard()
            raise

    def _commit(self, ep: EpisodeBuilder, meta: dict[str, Any]) -> EpisodeRecord:
        rewards = ep.collected("reward")
        meta.setdefault("episode_return", float(rewards.sum(dtype=np.float64)))
        meta.setdefault("success", bool(ep.collected("success").any()))
        meta.setdefault("terminated", bool(ep.collected("done")[-1]))
        meta.setdefault("interventions", int(ep.collected("intervention").sum()))
        meta.setdefault("cameras", self.schema.cameras)
        meta.setdefault("wall_time_end", time.time())
        rec = EpisodeRecord(
            episode=self._next_id, start=ep.start, length=ep.length, wall_time_start=ep.t0, checksums=ep.crcs, **meta
        )
        write_record(self._commits, rec)  # the commit point
        self._records[rec.episode] = rec
        self._next_id = rec.episode + 1
        self._next_slot = self._align(rec.end)
        self._save_state()
        self._apply_retention()
        return rec

    def _apply_retention(self, retention: Retention | None = None) -> list[int]:
        """Drop episodes past the pool bound: oldest world-model version first, then oldest id."""
        ret = retention or self.retention
        if ret.max_episodes is None and ret.max_steps is None:
            return []
        order = sorted(
            self._records.values(), key=lambda r: (r.wm_version if r.wm_version is not None else -1, r.episode)
        )
        n_eps, n_steps = len(order), sum(r.length for r in order)
        dropped = []
        for r in order:
            over_eps = ret.max_episodes is not None and n_eps > ret.max_episodes
            over_steps = ret.max_steps is not None and n_steps > ret.max_steps
            if not (over_eps or over_steps) or n_eps == 1:
                break
            self.delete_episode(r.episode)
            n_eps, n_steps = n_eps - 1, n_steps - r.length
            dropped.append(r.episode)
        if dropped:
            log.info("retention dropped %d episode(s) from group %r", len(dropped), self.name)
        return dropped

    def delete_episode(self, episode: int) -> None:
        """Unpublish first (record), then free its chunks: a reader never sees a half-deleted episode."""
        rec = self._records.pop(episode)
        record_path(self._commits, episode).unlink(missing_ok=True)
        c = self.schema.chunk_len
        for key in self.schema.keys:
            remove_chunks(self.path, key, rec.start // c, math.ceil(rec.end / c))

    def close(self) -> None:
        if self._episode is not None:
            self._episode.discard()
        self._lock.release()

    def __enter__(self) -> GroupWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EpisodeBuilder:
    """An episode being recorded. Invisible to readers until `commit()`."""

    def __init__(self, writer: GroupWriter, start: int):
        self.w = writer
        self.start = start
        self.length = 0
        self.t0 = time.time()
        self._flushed = 0
        self._pending: dict[str, list[np.ndarray]] = {k: [] for k in writer.schema.keys}
        self._summary: dict[str, list[np.ndarray]] = {k: [] for k in ("reward", "success", "done", "intervention")}
        self.crcs = {k: 0 for k in writer.schema.keys}

    def add_step(self, step: Mapping[str, Any]) -> None:
        schema = self.w.schema
        unknown = set(step) - set(schema.keys)
        if unknown:
            raise EpisodeRejected(f"unknown keys {sorted(unknown)}; the schema has {sorted(schema.keys)}")
        checked = {}
        for key, spec in schema.keys.items():
            if key in step:
                checked[key] = coerce_value(key, spec, step[key])[None]
            elif key in STEP_DEFAULTS:
                checked[key] = np.full((1, *spec.shape), STEP_DEFAULTS[key], dtype=spec.np_dtype)
            else:
                raise EpisodeRejected(f"step lacks key {key!r}")
        self._extend(checked, 1)

    def _extend(self, checked: dict[str, np.ndarray], n: int) -> None:
        if self.w._episode is not self:
            raise StoreError("this episode was already committed or discarded")
        for key, arr in checked.items():
            self._pending[key].append(arr)
            if key in self._summary:
                self._summary[key].append(arr)
        self.length += n
        if self.length - self._flushed >= self.w.schema.chunk_len:
            self._flush(final=False)

    def _flush(self, final: bool) -> None:
        c = self.w.schema.chunk_len
        todo = self.length - self._flushed
        n = todo if final else (todo // c) * c
        if n == 0:
            return
        lo = self.start + self._flushed
        self.w._ensure_capacity(lo + n)
        writes = []
        for key, parts in self._pending.items():
            block = np.concatenate(parts) if len(parts) > 1 else parts[0]
            head, tail = block[:n], block[n:]
            writes.append(self.w._arrays[key].async_array.setitem(slice(lo, lo + n), head))
            self.crcs[key] = zlib.crc32(np.ascontiguousarray(head).data, self.crcs[key])
            self._pending[key] = [tail] if len(tail) else []
        # all keys in one event-loop round trip: encoding and file writes overlap
        sync(_gather(writes))
        self._flushed += n

    def collected(self, key: str) -> np.ndarray:
        return np.concatenate(self._summary[key])

    def commit(self, **meta: Any) -> EpisodeRecord:
        if self.length == 0:
            raise EpisodeRejected(f"group {self.w.name!r}: an episode needs at least one step")
        self._flush(final=True)
        rec = self.w._commit(self, meta)
        self.w._episode = None
        return rec

    def discard(self) -> None:
        """Drop the episode; chunks it already flushed are removed."""
        if self.w._episode is not self:
            return
        c = self.w.schema.chunk_len
        if self._flushed:
            for key in self.w.schema.keys:
                remove_chunks(self.w.path, key, self.start // c, math.ceil((self.start + self._flushed) / c))
        self.w._episode = None
