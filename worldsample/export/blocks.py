"""A stored episode read a time-chunk at a time, checked against its commit record's checksums.

Exporters stream long image keys through this, so an episode never sits whole in RAM; damage
raises StoreCorruptError (the reader sets the episode aside), after the last block at the latest.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from worldsample.errors import ExportError, StoreCorruptError, StoreError
from worldsample.store import EpisodeRecord, GroupReader


def episode_blocks(reader: GroupReader, rec: EpisodeRecord, keys: Iterable[str]) -> Iterator[dict[str, np.ndarray]]:
    """{key: steps lo..hi-1} for each time-chunk of the episode, in order; the checksums of all
    keys are compared after the last block."""
    keys = list(keys)
    crcs = dict.fromkeys(keys, 0)
    c = reader.schema.chunk_len
    for lo in range(0, rec.length, c):
        block = {k: reader.read_steps(rec.episode, k, lo, min(rec.length, lo + c)) for k in keys}
        for k, a in block.items():
            crcs[k] = zlib.crc32(np.ascontiguousarray(a).data, crcs[k])
        yield block
    bad = [k for k, crc in crcs.items() if k in rec.checksums and crc != rec.checksums[k]]
    if bad:
        reader.verify(rec.episode, bad)  # raises StoreCorruptError and sets the episode aside
        raise StoreCorruptError(f"{reader.name}/episode {rec.episode}: {bad} changed while it was exported")


def committed(reader: GroupReader, episode: int) -> EpisodeRecord:
    """The episode's record, or an error that says what the group has."""
    rec = reader.records.get(episode)
    if rec is not None:
        return rec
    if episode in reader.damaged:
        raise StoreCorruptError(f"{reader.name}/episode {episode} is set aside as damaged: {reader.damaged[episode]}")
    ids = sorted(reader.records)
    have = f"{ids[0]}..{ids[-1]} ({len(ids)} committed)" if ids else "none"
    raise StoreError(f"group {reader.name!r} has no committed episode {episode}; its episodes: {have}")


def check_out(out: Path, overwrite: bool, what: str) -> None:
    """OUT may be written: not there (or `overwrite`), its parent a directory."""
    if (out.exists() or out.is_symlink()) and not overwrite:
        raise ExportError(f"{out} exists; choose another name or overwrite it (--force)")
    if not out.parent.is_dir():
        raise ExportError(f"{out.parent} is not a directory; create it first")
    if what == "file" and out.is_dir():
        raise ExportError(f"{out} is a directory; name the file to write")
    if what == "dir" and out.exists() and not out.is_dir():
        raise ExportError(f"{out} is a file; name the directory to write")
