"""Commit records: one small JSON file per committed episode.

A record is written last, with an atomic rename, after all of the episode's chunks are on disk.
Its presence is what makes an episode visible; a crash before it leaves only invisible chunks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worldsample.atomic import atomic_write_text
from worldsample.errors import StoreCorruptError, StoreError

RECORD_SUFFIX = ".json"


class SourceRef(BaseModel):
    """Where a synthetic episode was branched from."""

    model_config = ConfigDict(extra="forbid")
    group: str
    episode: int
    step: int = Field(ge=0)


class EpisodeRecord(BaseModel):
    """Per-episode metadata. `start` is the first slot on the group's time axis."""

    model_config = ConfigDict(extra="forbid")

    episode: int = Field(ge=0)
    start: int = Field(ge=0)
    length: int = Field(ge=1)
    episode_return: float
    success: bool
    terminated: bool = Field(description="ended in a terminal state (not a time-limit truncation)")
    interventions: int = Field(0, ge=0, description="steps where a human overrode the policy")
    policy_version: int | None = None
    wm_version: int | None = Field(None, description="world-model version (synthetic episodes)")
    domain: str = "real"
    domain_info: dict[str, Any] = {}
    cameras: list[str] = []
    source: SourceRef | None = None
    wall_time_start: float
    wall_time_end: float
    checksums: dict[str, int] = Field(default_factory=dict, description="crc32 of each key's bytes")
    extra: dict[str, Any] = {}

    @property
    def end(self) -> int:
        return self.start + self.length


def record_name(episode: int) -> str:
    return f"{episode:09d}{RECORD_SUFFIX}"


def record_path(commits_dir: Path, episode: int) -> Path:
    return commits_dir / record_name(episode)


def write_record(commits_dir: Path, rec: EpisodeRecord) -> None:
    atomic_write_text(record_path(commits_dir, rec.episode), rec.model_dump_json())


MAX_RECORD_BYTES = 1 << 20  # a record is a few hundred bytes; more is damage, not data


def read_record(path: Path) -> EpisodeRecord:
    """The record at `path`. StoreError when it is gone (retention dropped it); StoreCorruptError
    when it cannot be read as a record: truncated, garbled, oversized or nested past the parser."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_RECORD_BYTES + 1)
    except FileNotFoundError as e:
        raise StoreError(f"commit record {path} is gone") from e
    except OSError as e:
        raise StoreCorruptError(f"commit record {path} is unreadable: {e}") from e
    if len(raw) > MAX_RECORD_BYTES:
        raise StoreCorruptError(f"commit record {path} is unreadable: larger than {MAX_RECORD_BYTES} bytes")
    try:
        return EpisodeRecord.model_validate(json.loads(raw))
    except (ValueError, ValidationError, RecursionError) as e:
        why = "nested too deeply" if isinstance(e, RecursionError) else str(e)[:300]
        raise StoreCorruptError(f"commit record {path} is unreadable: {why}") from e


def list_record_ids(commits_dir: Path) -> list[int]:
    """Ids of committed episodes, ascending. Temp files of an interrupted write are ignored."""
    ids = []
    for name in os.listdir(commits_dir):
        if name.endswith(RECORD_SUFFIX) and not name.startswith("."):
            stem = name[: -len(RECORD_SUFFIX)]
            if stem.isdigit():
                ids.append(int(stem))
    ids.sort()
    return ids
