"""Readers of one group. Any number may run beside the writer, in any process.

`refresh()` picks up episodes committed (or dropped) since the last call by listing the commit
records, so a long-lived reader sees new data without reopening anything. `read_steps` reads a
window of one key, for viewers that page through an episode a chunk at a time.

Damage costs one episode, not the group: an episode whose commit record cannot be read, whose
chunks do not decode, are missing, or do not match the record's checksums is set aside (logged,
left out of `records` and the cache, listed with the reason in `damaged`) and the rest of the
group reads on. Whole-episode reads check the checksums; window reads check that the chunk files
are there and decode (`verify` checks a key's checksum a chunk at a time).

Operator labels (store/labels.py) are read at every `refresh()` when the group's label file
changed: `labels` holds each labelled episode's verdict, and a cached reader's `success` and
`done` steps and terminal flags follow them (the commit record and the data on disk do not change).
"""

from __future__ import annotations

import logging
import threading
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import zarr

from worldsample.errors import StoreCorruptError, StoreError
from worldsample.store.cache import StepCache
from worldsample.store.labels import Label, LabelLog, Recorded, apply_label
from worldsample.store.layout import chunk_path, open_arrays, read_group_attrs
from worldsample.store.records import EpisodeRecord, list_record_ids, read_record, record_name, record_path

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
        self.damaged: dict[int, str] = {}  # episode id -> why it was set aside
        self._lock = threading.RLock()  # refresh and setting aside (a viewer may read from threads)
        specs = {k: (self.schema.keys[k].shape, self.schema.keys[k].np_dtype) for k in self.keys}
        self.cache = StepCache(specs) if cache else None
        self.label_log = LabelLog(group_path, name)
        self.labels: dict[int, Label] = {}  # episode id -> the operator's verdict (the newest label)
        self._labels_seen: tuple[int, int, int] | None = None
        self._recorded: dict[int, Recorded] = {}  # cached labelled episodes: their columns as recorded
        self.refresh()

    def refresh(self) -> int:
        """Load newly committed episodes; forget dropped ones. Returns how many were added.

        A damaged episode is set aside (see `damaged`), never raised: one bad record or chunk
        costs that episode only."""
        with self._lock:
            return self._refresh()

    def _refresh(self) -> int:
        relabel = self._load_labels()
        ids = list_record_ids(self._commits)
        listed = set(ids)
        gone = set(self.records) - listed
        for i in gone:
            del self.records[i]
            self._recorded.pop(i, None)
        if gone and self.cache is not None:
            self.cache.remove(gone)
        for i in [i for i in list(self.damaged) if i not in listed]:
            del self.damaged[i]
        added = 0
        for i in ids:
            if i in self.records or i in self.damaged:
                continue
            try:
                rec = read_record(record_path(self._commits, i))
                if rec.episode != i:
                    raise StoreCorruptError(f"commit record {record_name(i)} names episode {rec.episode}")
                arrays = self._read(rec, self.keys, verify=True) if self.cache is not None else None
            except StoreError as e:
                if not self.is_committed(i):
                    continue  # dropped by retention between listing and reading: its chunks may be gone
                if not isinstance(e, StoreCorruptError):
                    raise
                self._set_aside(i, str(e))
                continue
            if arrays is not None:
                if not self.is_committed(i):
                    continue  # dropped while we read: its chunks may be gone, do not keep them
                arrays, terminal = self._labelled(rec, arrays)
                self.cache.add(i, arrays, terminal)
                relabel.discard(i)
            self.records[i] = rec
            added += 1
        if self.cache is not None:
            for i in sorted(relabel & set(self.records)):
                self._relabel_cached(self.records[i])
        return added

    # -- operator labels ------------------------------------------------------------------------
    def _load_labels(self) -> set[int]:
        """Re-read the label file when it changed; the episodes whose label changed."""
        sig = self.label_log.signature()
        if sig == self._labels_seen:
            return set()
        try:
            new = self.label_log.current()
        except (OSError, StoreError) as e:  # the labels held so far stay in force
            log.error("group %r: labels not read: %s", self.name, e)
            self._labels_seen = sig  # logged once per change of the file
            return set()
        self._labels_seen = sig
        changed = {e for e in set(new) | set(self.labels) if new.get(e) != self.labels.get(e)}
        self.labels = new
        return changed

    def _labelled(self, rec: EpisodeRecord, arrays: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], bool]:
        """An episode's arrays and terminal flag as its label says, before it enters the cache."""
        label = self.labels.get(rec.episode)
        if label is None:
            return arrays, rec.terminated
        recorded = Recorded(arrays["success"].copy(), arrays["done"].copy(), rec.terminated)
        self._recorded[rec.episode] = recorded
        success, done, terminal = apply_label(rec, recorded, label)
        return {**arrays, "success": success, "done": done}, terminal

    def _relabel_cached(self, rec: EpisodeRecord) -> None:
        e, c = rec.episode, self.cache
        if e not in c.episode_ids:
            return
        recorded = self._recorded.get(e)
        if recorded is None:
            i = c.episode_ids.index(e)
            s, n = int(c.ep_start[i]), int(c.ep_len[i])
            recorded = Recorded(c.view("success")[s : s + n].copy(), c.view("done")[s : s + n].copy(), rec.terminated)
            self._recorded[e] = recorded
        success, done, terminal = apply_label(rec, recorded, self.labels.get(e))
        c.relabel(e, {"success": success, "done": done}, terminal)

    def _set_aside(self, episode: int, why: str) -> None:
        with self._lock:
            if episode not in self.damaged:
                log.error("group %r: setting episode %d aside: %s", self.name, episode, why)
            self.damaged[episode] = why
            self._recorded.pop(episode, None)
            if episode in self.records:
                # a new dict, so that a thread iterating the old one is not disturbed
                self.records = {i: r for i, r in self.records.items() if i != episode}
                if self.cache is not None:
                    self.cache.remove({episode})

    def _read(self, rec: EpisodeRecord, keys: Iterable[str], verify: bool = False) -> dict[str, np.ndarray]:
        out = {k: self._slots(rec, k, rec.start, rec.end) for k in keys}
        if verify:
            for k, arr in out.items():
                want = rec.checksums.get(k)
                if want is not None and zlib.crc32(np.ascontiguousarray(arr).data) != want:
                    raise StoreCorruptError(self._mismatch(rec, k))
        return out

    def _mismatch(self, rec: EpisodeRecord, key: str) -> str:
        where = f"{self.name}/episode {rec.episode}: {key} does not match its checksum in the commit record"
        missing = self.missing_chunks(rec, key, 0, rec.length)
        if missing:  # the likely cause: they read as zeros
            return f"{where}; chunk file(s) {missing[:8]} are not on disk ({self.path / 'data' / key / 'c'})"
        return f"{where} (data changed after commit)"

    def _slots(self, rec: EpisodeRecord, key: str, lo: int, hi: int) -> np.ndarray:
        if self._arrays[key].shape[0] < rec.end:  # the writer grew the array since we opened it
            self._arrays[key] = zarr.open_array(str(self.path / "data" / key), mode="r")
        if self._arrays[key].shape[0] < rec.end:
            raise StoreCorruptError(
                f"{self.name}/episode {rec.episode}: {key} ends at slot {self._arrays[key].shape[0]}, "
                f"record says {rec.end}"
            )
        try:
            return self._arrays[key][lo:hi]
        except Exception as e:  # a chunk that does not decode (truncated, garbled): zarr's codecs raise anything
            raise StoreCorruptError(
                f"{self.name}/episode {rec.episode}: {key} steps {lo - rec.start}..{hi - rec.start} do not decode: "
                f"{type(e).__name__}: {str(e)[:200]}"
            ) from e

    def missing_chunks(self, rec: EpisodeRecord, key: str, start: int, stop: int) -> list[int]:
        """Time-chunks holding steps start..stop-1 of the episode whose file is not on disk: zarr
        reads them as zeros (and writes none for a chunk of zeros, so this alone is no damage)."""
        if stop <= start:
            return []
        c = self.schema.chunk_len
        inner = ("0",) * len(self.schema.keys[key].shape)
        first, last = (rec.start + start) // c, (rec.start + stop - 1) // c
        return [i for i in range(first, last + 1) if not chunk_path(self.path, key, i).joinpath(*inner).is_file()]

    def _record(self, episode: int) -> EpisodeRecord:
        rec = self.records.get(episode)
        if rec is None:
            # set aside meanwhile (e.g. by another thread reading another key): damaged, not missing
            why = self.damaged.get(episode)
            if why is not None:
                raise StoreCorruptError(f"{self.name}/episode {episode} is set aside as damaged: {why}")
            raise StoreError(f"group {self.name!r} has no committed episode {episode}")
        return rec

    def episode(self, episode: int, keys: Iterable[str] | None = None, verify: bool = True) -> dict[str, np.ndarray]:
        """One committed episode read from disk (all keys unless `keys` is given), checked against
        the record's checksums unless `verify` is False.

        Raises StoreError when retention dropped the episode while it was read; StoreCorruptError
        (and sets the episode aside) when its data is damaged."""
        rec = self._record(episode)
        try:
            out = self._read(rec, keys if keys is not None else self.schema.keys, verify=verify)
        except StoreCorruptError as e:
            self._damage_or_dropped(episode, e)
        self._check_still_committed(episode)
        return out

    def read_steps(self, episode: int, key: str, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Steps start..stop-1 (counted from the episode's first step) of one key of a committed
        episode, read from disk; only the chunks that hold them are decoded.

        Raises StoreError when retention dropped the episode while it was read (its chunks may
        already be gone), so freed data is never returned; StoreCorruptError (and sets the
        episode aside) when the arrays are shorter than the record says or a chunk of the window
        does not decode. A chunk file that is not on disk reads as zeros (zarr skips writing chunks
        that hold only the fill value, so absence alone is no damage): `verify` checks a key
        against its checksum."""
        rec = self._record(episode)
        if key not in self.schema.keys:
            raise StoreError(f"group {self.name!r} has no key {key!r}; it has {sorted(self.schema.keys)}")
        stop = rec.length if stop is None else stop
        if not 0 <= start <= stop <= rec.length:
            raise StoreError(
                f"steps {start}..{stop} are outside {self.name}/episode {episode}: "
                f"it has {rec.length} steps, so 0 <= start <= stop <= {rec.length}"
            )
        try:
            out = self._slots(rec, key, rec.start + start, rec.start + stop)
        except StoreCorruptError as e:
            self._damage_or_dropped(episode, e)
        self._check_still_committed(episode)
        return out

    def verify(
        self,
        episode: int,
        keys: Iterable[str] | None = None,
        on_block: Callable[[str, int, np.ndarray], None] | None = None,
    ) -> None:
        """Check keys of an episode against the record's checksums, reading one time-chunk at a
        time (so a long image key never sits whole in RAM). `on_block(key, index, block)` sees
        each chunk's steps (index counted from the episode's first chunk), e.g. to cache them.
        Raises like `read_steps`; a key the record has no checksum for is only read."""
        rec = self._record(episode)
        c = self.schema.chunk_len
        for key in keys if keys is not None else self.schema.keys:
            crc = 0
            for index in range((rec.length + c - 1) // c):
                block = self.read_steps(episode, key, index * c, min(rec.length, (index + 1) * c))
                crc = zlib.crc32(np.ascontiguousarray(block).data, crc)
                if on_block is not None:
                    on_block(key, index, block)
            want = rec.checksums.get(key)
            if want is not None and crc != want:
                self._damage_or_dropped(episode, StoreCorruptError(self._mismatch(rec, key)))

    def _damage_or_dropped(self, episode: int, e: StoreCorruptError):
        """Raise for damage found while reading: dropped by retention meanwhile, or set aside."""
        self._check_still_committed(episode)
        self._set_aside(episode, str(e))
        raise e

    def _check_still_committed(self, episode: int) -> None:
        if not self.is_committed(episode):
            raise StoreError(
                f"{self.name}/episode {episode} was dropped by retention while it was read; refresh() and pick another"
            )

    def is_committed(self, episode: int) -> bool:
        """Whether the episode's commit record is on disk now, so its data is there to read.

        `records` changes only at `refresh()`; retention may drop an episode at any moment."""
        return record_path(self._commits, episode).exists()

    def episode_records(self) -> list[EpisodeRecord]:
        records = self.records
        return [records[i] for i in sorted(records)]

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
