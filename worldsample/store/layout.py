"""On-disk layout of a run's episode store, and group creation.

    RUN/store/zarr.json                     root zarr group (format marker)
    RUN/store/<group>/zarr.json             group attrs: schema, retention
    RUN/store/<group>/data/<key>/           one zarr array per step key, time first,
                                            chunks of `chunk_len` steps, episodes chunk-aligned
    RUN/store/<group>/commits/<id>.json     commit records (see records.py)
    RUN/store/<group>/writer.lock           one-writer lock
    RUN/store/<group>/writer_state.json     id/slot high-water mark, so ids are never reused

Arrays only grow (zarr writes metadata atomically, by temp file and rename), and a commit
writes new chunk files plus one record: no chunk of a committed episode is ever rewritten.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Literal

import zarr
from pydantic import BaseModel, ConfigDict, Field
from zarr.codecs import BloscCodec

from worldsample.errors import SchemaError, StoreError
from worldsample.paths import RunFiles
from worldsample.store.schema import GroupSchema, KeySpec

GROUPS = ("demo", "real", "sim", "synthetic")
Provenance = Literal["demo", "real", "sim", "synthetic"]
STORE_FORMAT = "worldsample-episode-store"
STORE_VERSION = 1


class Retention(BaseModel):
    """A bounded pool: when exceeded, episodes of the oldest world-model version go first."""

    model_config = ConfigDict(extra="forbid")
    max_episodes: int | None = Field(None, ge=1)
    max_steps: int | None = Field(None, ge=1)


def store_path(run_dir: Path) -> Path:
    return RunFiles.of(run_dir).store


def check_group_name(name: str) -> None:
    if name not in GROUPS:
        raise StoreError(f"unknown group {name!r}; groups are named by provenance: {', '.join(GROUPS)}")


def _codec(spec: KeySpec) -> BloscCodec:
    if spec.kind == "image":
        return BloscCodec(cname="lz4", clevel=5, shuffle="noshuffle")
    return BloscCodec(cname="zstd", clevel=3, shuffle="shuffle")


def init_store(root: Path) -> None:
    if (root / "zarr.json").exists():
        return
    root.mkdir(parents=True, exist_ok=True)
    g = zarr.open_group(str(root), mode="a")
    g.attrs.update({"format": STORE_FORMAT, "version": STORE_VERSION})


def create_group(root: Path, name: str, schema: GroupSchema, retention: Retention | None) -> None:
    """Create group `name`, atomically: it is built in a temp dir and renamed into place."""
    check_group_name(name)
    final = root / name
    if final.exists():
        return
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{name}.tmp-"))
    try:
        g = zarr.open_group(str(tmp), mode="w")
        g.attrs.update(
            {
                "schema": schema.model_dump(mode="json"),
                "retention": (retention or Retention()).model_dump(mode="json"),
            }
        )
        data = g.require_group("data")
        for key, spec in schema.keys.items():
            data.create_array(
                key,
                shape=(0, *spec.shape),
                chunks=(schema.chunk_len, *spec.shape),
                dtype=spec.np_dtype,
                compressors=[_codec(spec)],
                fill_value=0,
            )
        (tmp / "commits").mkdir()
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def set_group_retention(root: Path, name: str, retention: Retention) -> None:
    """Replace the group's retention (zarr rewrites its metadata file atomically); writers opened
    after this apply the new bound."""
    g = zarr.open_group(str(root / name), mode="r+")
    g.attrs["retention"] = retention.model_dump(mode="json")


def read_group_attrs(root: Path, name: str) -> tuple[GroupSchema, Retention]:
    check_group_name(name)
    path = root / name
    if not (path / "zarr.json").exists():
        raise StoreError(f"group {name!r} does not exist in {root}")
    attrs = zarr.open_group(str(path), mode="r").attrs
    try:
        return GroupSchema.model_validate(attrs["schema"]), Retention.model_validate(attrs.get("retention", {}))
    except (KeyError, ValueError) as e:
        raise SchemaError(f"group {name!r} in {root} has an unreadable schema: {e}") from e


def writer_lock_path(group_path: Path) -> Path:
    return group_path / "writer.lock"


def open_arrays(group_path: Path, schema: GroupSchema, mode: str) -> dict[str, zarr.Array]:
    # write_empty_chunks: zarr's emptiness test costs several times the encode of a large image
    # chunk, and skipping "empty" chunks would delete a file instead of writing one
    return {
        k: zarr.open_array(str(group_path / "data" / k), mode=mode, config={"write_empty_chunks": True})
        for k in schema.keys
    }


def chunk_path(group_path: Path, key: str, chunk_index: int) -> Path:
    """Directory (n-d) or file (1-d) that holds time-chunk `chunk_index` of `key`."""
    return group_path / "data" / key / "c" / str(chunk_index)


def remove_chunks(group_path: Path, key: str, first: int, stop: int | None = None) -> None:
    """Delete time-chunks first..stop-1 of `key` (all from `first` on when stop is None)."""
    cdir = group_path / "data" / key / "c"
    if not cdir.exists():
        return
    for entry in os.listdir(cdir):
        if entry.isdigit() and int(entry) >= first and (stop is None or int(entry) < stop):
            p = cdir / entry
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
