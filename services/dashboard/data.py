"""The run's episode store as the dashboard sees it: cached readers, records and frames.

Readers are opened without step caches (the dashboard reads single episodes on demand) and
refreshed at most every `store_refresh_min_s`, so a burst of requests lists the commit
directory once. Frames are read one time-chunk at a time (episodes start on chunk
boundaries, so a chunk of an episode is one zarr chunk): fifty viewers of fifty episodes need
fifty chunks in RAM, not fifty whole episodes. Decoded blocks and encoded images live in
byte-bounded LRUs; committed episodes never change, so cached data stays valid until
retention drops the episode.

Damage is per episode: the store's readers set aside an episode whose record or chunks are
damaged (`damaged()` lists them with the reason), and before a key of an episode is first
served it is checked against the commit record's checksum, a chunk at a time (the chunks it
reads are cached), so a deleted chunk is an error instead of black frames. A group whose
attributes cannot be read is left out and listed too.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from pathlib import Path

import numpy as np

from services.dashboard.cache import ByteLRU
from services.dashboard.errors import EpisodeDamaged, NotFound
from services.dashboard.settings import DashboardSettings
from worldsample.errors import StoreCorruptError, StoreError
from worldsample.store import EpisodeRecord, EpisodeStore, GroupReader, GroupSchema, Label

log = logging.getLogger(__name__)


class RunData:
    def __init__(self, run_dir: Path, settings: DashboardSettings):
        self.run_dir = Path(run_dir)
        self._min_interval = settings.store_refresh_min_s
        self._store: EpisodeStore | None = None
        self._readers: dict[str, GroupReader] = {}
        self._lock = threading.RLock()
        self._last_refresh = -1e9
        self.version = 0  # bumped whenever the set of committed episodes changes
        budget = settings.frame_cache_mb << 20
        self.arrays = ByteLRU(budget * 3 // 4)  # decoded frames and step arrays
        self.images = ByteLRU(budget // 4)  # encoded JPEG/PNG bytes
        self.verified = ByteLRU(1 << 20)  # (group, episode, key) checked against its checksum
        self.broken_groups: dict[str, str] = {}  # group -> why it could not be opened
        self._damaged_seen: dict[str, int] = {}

    # -- refreshing ----------------------------------------------------------------------------
    def refresh(self, force: bool = False) -> bool:
        """Pick up new commits (throttled). True when the episode set changed."""
        with self._lock:
            now = time.monotonic()
            if not force and now - self._last_refresh < self._min_interval:
                return False
            self._last_refresh = now
            if self._store is None:
                try:
                    self._store = EpisodeStore(self.run_dir)
                except StoreError:
                    return False  # no store yet: a run that has not recorded anything
            changed = False
            for g in self._store.groups:
                r = self._readers.get(g)
                if r is None:
                    try:
                        r = self._readers[g] = self._store.reader(g, cache=False)
                    except StoreError as e:  # unreadable group attributes: the other groups still serve
                        if self.broken_groups.get(g) != str(e):
                            log.error("store group %r cannot be opened: %s", g, e)
                        self.broken_groups[g] = str(e)
                        continue
                    self.broken_groups.pop(g, None)
                    changed = changed or r.num_episodes > 0
                    continue
                before = set(r.records)
                r.refresh()
                gone = before - set(r.records)
                if gone:
                    self.arrays.discard(lambda k, g=g, gone=gone: k[0] == g and k[1] in gone)
                    self.images.discard(lambda k, g=g, gone=gone: k[0] == g and k[1] in gone)
                changed = changed or bool(gone) or len(r.records) != len(before)
            # an episode set aside while it was read (not by refresh) changes the list too
            damaged = {g: len(r.damaged) for g, r in self._readers.items()}
            changed = changed or damaged != self._damaged_seen
            self._damaged_seen = damaged
            if changed:
                self.version += 1
            return changed

    # -- queries -------------------------------------------------------------------------------
    @property
    def has_store(self) -> bool:
        return self._store is not None

    def groups(self) -> list[str]:
        self.refresh()
        with self._lock:
            return list(self._readers)

    def reader(self, group: str) -> GroupReader:
        self.refresh()
        with self._lock:
            r = self._readers.get(group)
        if r is None:
            raise NotFound(
                f"group {group!r} has no data in this run; groups with data: {list(self._readers) or 'none'}"
            )
        return r

    def schema(self, group: str) -> GroupSchema:
        return self.reader(group).schema

    def records(self, group: str | None = None) -> list[tuple[str, EpisodeRecord]]:
        groups = [group] if group is not None else self.groups()
        out = []
        for g in groups:
            r = self.reader(g)
            with self._lock:
                out.extend((g, rec) for rec in r.episode_records())
        return out

    def record(self, group: str, episode: int) -> EpisodeRecord:
        r = self.reader(group)
        rec = r.records.get(episode)
        if rec is None:
            why = r.damaged.get(episode)
            if why is not None:
                raise EpisodeDamaged(f"{group}/{episode} is set aside as damaged: {why}")
            raise NotFound(f"{group}/{episode}: no such committed episode (ids in {group}: {_id_span(r)})")
        return rec

    def labels(self, group: str) -> dict[int, Label]:
        """The operator labels of a group's episodes (read at each reader refresh)."""
        return dict(self.reader(group).labels)

    def damaged(self) -> list[tuple[str, int | None, str]]:
        """(group, episode, why) of each episode set aside, and (group, None, why) of each group
        that could not be opened."""
        self.refresh()
        with self._lock:
            readers = dict(self._readers)
            out: list[tuple[str, int | None, str]] = [(g, None, why) for g, why in self.broken_groups.items()]
        for g, r in readers.items():
            out.extend((g, i, why) for i, why in sorted(dict(r.damaged).items()))
        return out

    def writer_active(self, group: str) -> bool:
        with self._lock:
            store, known = self._store, group in self._readers
        return store is not None and known and store.writer_active(group)

    # -- data ----------------------------------------------------------------------------------
    def steps(self, group: str, episode: int, key: str) -> np.ndarray:
        """One per-step array of an episode (cached)."""
        self.record(group, episode)
        if key not in self.schema(group).keys:
            raise NotFound(f"group {group!r} has no key {key!r}")
        return self.arrays.get_or_load((group, episode, key), lambda: self._read(group, episode, key))

    def camera_key(self, group: str, camera: str) -> str:
        cams = self.schema(group).cameras
        if camera not in cams:
            raise NotFound(f"group {group!r} has no camera {camera!r}; cameras: {cams or 'none'}")
        return f"image_{camera}"

    def frame(self, group: str, episode: int, camera: str, t: int) -> np.ndarray:
        """Frame t of one camera, (H, W, C) uint8, from its cached time-chunk."""
        key = self.camera_key(group, camera)
        c = self.schema(group).chunk_len
        return self._block(group, episode, key, t // c)[t % c]

    def frames(self, group: str, episode: int, camera: str, start: int, stop: int) -> np.ndarray:
        """Frames start..stop-1 of one camera, (N, H, W, C) uint8."""
        key = self.camera_key(group, camera)
        c = self.schema(group).chunk_len
        blocks = [self._block(group, episode, key, b) for b in range(start // c, (stop - 1) // c + 1)]
        first = (start // c) * c
        return np.concatenate(blocks)[start - first : stop - first]

    def _block(self, group: str, episode: int, key: str, index: int) -> np.ndarray:
        rec = self.record(group, episode)
        self.check(group, episode, key)
        return self.arrays.get_or_load((group, episode, key, index), lambda: self._read_block(group, rec, key, index))

    def check(self, group: str, episode: int, key: str) -> None:
        """Check a key of an episode against its checksum once (a chunk at a time, caching the
        chunks read): EpisodeDamaged when it does not match or does not decode."""
        self.verified.get_or_load((group, episode, key), lambda: self._verify(group, episode, key))

    def _verify(self, group: str, episode: int, key: str) -> bool:
        def keep(_: str, index: int, block: np.ndarray) -> None:
            block.setflags(write=False)
            self.arrays.put((group, episode, key, index), block)

        with self._errors(group, episode):
            self.reader(group).verify(episode, [key], on_block=keep)
        return True

    @contextlib.contextmanager
    def _errors(self, group: str, episode: int):
        try:
            yield
        except StoreCorruptError as e:  # the reader has set the episode aside
            self.arrays.discard(lambda k: k[0] == group and k[1] == episode)
            self.images.discard(lambda k: k[0] == group and k[1] == episode)
            raise EpisodeDamaged(f"{e}; the episode is set aside (listed under damaged in /api/run)") from e
        except StoreError as e:  # the record is gone: retention dropped the episode
            raise NotFound(f"{group}/{episode} was dropped by retention while it was read: {e}") from e

    def _read_block(self, group: str, rec: EpisodeRecord, key: str, index: int) -> np.ndarray:
        c = self.schema(group).chunk_len
        lo, hi = index * c, min(rec.length, (index + 1) * c)
        with self._errors(group, rec.episode):
            block = self.reader(group).read_steps(rec.episode, key, lo, hi)
        block.setflags(write=False)
        return block

    def _read(self, group: str, episode: int, key: str) -> np.ndarray:
        with self._errors(group, episode):
            arr = self.reader(group).episode(episode, keys=[key])[key]  # checked against its checksum
        self.verified.put((group, episode, key), True)
        arr.setflags(write=False)
        return arr


def _id_span(r: GroupReader) -> str:
    if not r.records:
        return "none"
    return f"{min(r.records)}..{max(r.records)}, {len(r.records)} committed"
