"""A store group written as a LeRobotDataset v3.0 directory (layout: lerobot_format.py).

Every committed episode of the group, in id order, becomes episode_index 0, 1, ...; one row per
step in data/chunk-000/file-000.parquet (vectors as fixed-size lists, scalars as plain columns,
`timestamp` = frame_index / fps), one mp4 per camera with every episode's frames back to back
(`from_timestamp`/`to_timestamp` in the episode table say where). The episodes are read a
time-chunk at a time and checked against their checksums; the dataset is built in a temp
directory beside OUT and renamed onto it when complete, so a failure leaves nothing behind.

Imports pyarrow and PyAV inside the functions that need them.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from worldsample.errors import ExportError
from worldsample.export import lerobot_format as fmt
from worldsample.export.blocks import check_out, episode_blocks
from worldsample.export.video import DEFAULT_FPS, VideoWriter, codec
from worldsample.store import EpisodeRecord, EpisodeStore, GroupReader


@dataclass
class LeRobotExport:
    path: Path
    group: str
    episodes: int
    frames: int
    fps: int
    fps_source: str  # "option", "control_rate_hz" (the records') or "default"
    features: dict[str, str] = field(default_factory=dict)  # store key -> feature
    bytes: int = 0


def pick_fps(records: list[EpisodeRecord], fps: int | None) -> tuple[int, str]:
    """The dataset's fps: the caller's; else the records' common, whole `control_rate_hz`; else 10."""
    if fps is not None:
        if fps <= 0:
            raise ExportError(f"fps must be a positive whole number, got {fps}")
        return fps, "option"
    rates = {r.extra.get("control_rate_hz") for r in records}
    if len(rates) == 1:
        (hz,) = rates
        if isinstance(hz, int | float) and not isinstance(hz, bool) and hz > 0:
            if not float(hz).is_integer():
                raise ExportError(f"the episodes were recorded at {hz} Hz; LeRobot's fps is a whole number: "
                                  "pass --fps")
            return int(hz), "control_rate_hz"
    return DEFAULT_FPS, "default"


def _column(a: np.ndarray):
    import pyarrow as pa

    if a.ndim == 1:
        return pa.array(a)
    flat = np.ascontiguousarray(a.reshape(len(a), -1))
    return pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1)), flat.shape[1])


def _stats(a: np.ndarray) -> dict:
    x = a.reshape(len(a), -1).astype(np.float64)
    return {"min": x.min(0).tolist(), "max": x.max(0).tolist(), "mean": x.mean(0).tolist(),
            "std": x.std(0).tolist(), "count": [len(x)]}


class _PixelStats:
    """Per-channel min, max, mean and std of a camera's frames, scaled to [0, 1] as LeRobot keeps them."""

    def __init__(self):
        self.s = self.ss = 0.0
        self.lo, self.hi = np.full(3, 255.0), np.zeros(3)
        self.pixels = self.frames = 0

    def add(self, frames: np.ndarray) -> None:
        x = frames.reshape(-1, frames.shape[-1]).astype(np.float64)
        if x.shape[1] == 1:
            x = np.repeat(x, 3, axis=1)
        self.s, self.ss = self.s + x.sum(0), self.ss + (x * x).sum(0)
        self.lo, self.hi = np.minimum(self.lo, x.min(0)), np.maximum(self.hi, x.max(0))
        self.pixels, self.frames = self.pixels + len(x), self.frames + len(frames)

    def result(self) -> dict:
        mean = self.s / self.pixels
        std = np.sqrt(np.maximum(self.ss / self.pixels - mean * mean, 0.0))
        per = lambda v: [[[float(c) / 255.0]] for c in v]  # noqa: E731  (3, 1, 1)
        return {"min": per(self.lo), "max": per(self.hi), "mean": per(mean), "std": per(std), "count": [self.frames]}


def _task(rec: EpisodeRecord, task: str | None, group: str) -> str:
    if task is not None:
        return task
    t = rec.extra.get("task")
    return t if isinstance(t, str) and t else f"worldsample {group} episode"


def _features(reader: GroupReader, fps: int, codec_name: str) -> tuple[dict[str, str], dict[str, dict]]:
    schema = reader.schema
    names = {k: fmt.feature_name(k, schema.keys[k].kind == "image") for k in schema.keys}
    feats: dict[str, dict] = {}
    c = codec(codec_name)
    for k, spec in schema.keys.items():
        if spec.kind == "image":
            h, w, _ = spec.shape
            feats[names[k]] = {
                "dtype": "video", "shape": [h, w, 3], "names": ["height", "width", "channels"],
                "info": {"video.height": h, "video.width": w, "video.codec": c.name, "video.pix_fmt": c.pix_fmt,
                         "video.is_depth_map": False, "video.fps": fps, "video.channels": 3, "has_audio": False},
            }
        else:
            n = int(np.prod(spec.shape))
            feats[names[k]] = {"dtype": spec.dtype, "shape": [n],
                               "names": [f"{k}_{i}" for i in range(n)] if spec.shape else None}
    for name, dtype in fmt.INDEX_FEATURES.items():
        feats[name] = {"dtype": dtype, "shape": [1], "names": None}
    return names, feats


def write_lerobot(reader: GroupReader, out: Path | str, *, fps: int | None = None, codec_name: str = "av1",
                  task: str | None = None, robot_type: str | None = None, overwrite: bool = False,
                  run_name: str = "", progress: Callable[[int], None] | None = None) -> LeRobotExport:
    """Write every committed episode of the reader's group to the directory OUT (module docstring).

    ExportError for an empty group or an OUT that cannot be written as asked; StoreCorruptError
    for a damaged episode (the reader sets it aside; nothing is written)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    codec(codec_name)
    records = reader.episode_records()
    if not records:
        raise ExportError(f"group {reader.name!r} has no committed episodes to export")
    out = Path(out)
    check_out(out, overwrite, "dir")
    rate, fps_source = pick_fps(records, fps)
    schema = reader.schema
    names, feats = _features(reader, rate, codec_name)
    image_keys = schema.image_keys
    lowdim = [k for k in schema.keys if k not in image_keys]
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    writers: dict[str, VideoWriter] = {}
    try:
        for k in image_keys:
            path = tmp / fmt.VIDEO_PATH.format(video_key=names[k], chunk_index=0, file_index=0)
            path.parent.mkdir(parents=True)
            h, w, _ = schema.keys[k].shape
            writers[k] = VideoWriter(path, rate, h, w, codec_name)
        pixels = {k: _PixelStats() for k in image_keys}
        cols: dict[str, list[np.ndarray]] = {k: [] for k in lowdim}
        tasks: dict[str, int] = {}
        rows: list[dict] = []
        start = 0
        for i, rec in enumerate(records):
            ep_cols: dict[str, list[np.ndarray]] = {k: [] for k in lowdim}
            for block in episode_blocks(reader, rec, schema.keys):
                for k in image_keys:
                    writers[k].add(block[k])
                    pixels[k].add(block[k])
                for k in lowdim:
                    ep_cols[k].append(block[k])
            t = _task(rec, task, reader.name)
            tasks.setdefault(t, len(tasks))
            row = {"episode_index": i, "tasks": [t], "length": rec.length,
                   "data/chunk_index": 0, "data/file_index": 0,
                   "dataset_from_index": start, "dataset_to_index": start + rec.length}
            for k in image_keys:
                row |= {f"videos/{names[k]}/chunk_index": 0, f"videos/{names[k]}/file_index": 0,
                        f"videos/{names[k]}/from_timestamp": start / rate,
                        f"videos/{names[k]}/to_timestamp": (start + rec.length) / rate}
            for k in lowdim:
                a = np.concatenate(ep_cols[k])
                cols[k].append(a)
                row |= {f"stats/{names[k]}/{s}": v for s, v in _stats(a).items()}
            row |= {"meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0,
                    "worldsample/episode": rec.episode, "worldsample/task_index": tasks[t]}
            rows.append(row)
            start += rec.length
            if progress is not None:
                progress(1)
        for k in image_keys:
            writers.pop(k).close()
        total = start
        frame_index = np.concatenate([np.arange(r.length, dtype=np.int64) for r in records])
        index_cols = {
            "timestamp": (frame_index / rate).astype(np.float32),
            "frame_index": frame_index,
            "episode_index": np.repeat(np.arange(len(records), dtype=np.int64), [r.length for r in records]),
            "index": np.arange(total, dtype=np.int64),
            "task_index": np.repeat(np.asarray([r["worldsample/task_index"] for r in rows], np.int64),
                                    [r.length for r in records]),
        }
        data = {names[k]: np.concatenate(cols[k]) for k in lowdim} | index_cols
        stats = {f: _stats(a) for f, a in data.items()} | {names[k]: p.result() for k, p in pixels.items()}
        _write_parquet(pa.table({f: _column(a) for f, a in data.items()}),
                       tmp / fmt.DATA_PATH.format(chunk_index=0, file_index=0), pq)
        for r in rows:
            del r["worldsample/task_index"]
        _write_parquet(pa.Table.from_pylist(rows), tmp / fmt.EPISODES_PATH.format(chunk_index=0, file_index=0), pq)
        _write_tasks(tasks, tmp / fmt.TASKS_PATH, pa, pq)
        info = {
            "codebase_version": fmt.CODEBASE_VERSION, "robot_type": robot_type,
            "total_episodes": len(records), "total_frames": total, "total_tasks": len(tasks),
            "chunks_size": fmt.CHUNKS_SIZE, "data_files_size_in_mb": fmt.DATA_FILES_SIZE_IN_MB,
            "video_files_size_in_mb": fmt.VIDEO_FILES_SIZE_IN_MB, "fps": rate,
            "splits": {"train": f"0:{len(records)}"}, "data_path": fmt.DATA_PATH,
            "video_path": fmt.VIDEO_PATH if image_keys else None, "features": feats,
        }
        sidecar = {"format": fmt.SIDECAR_FORMAT, "version": 1, "run": run_name, "group": reader.name,
                   "schema": schema.model_dump(mode="json"), "features": names,
                   "records": [json.loads(r.model_dump_json()) for r in records]}
        for rel, obj in ((fmt.INFO_PATH, info), (fmt.STATS_PATH, stats), (fmt.SIDECAR_PATH, sidecar)):
            (tmp / rel).write_text(json.dumps(obj, indent=4) + "\n")
        os.chmod(tmp, 0o755)
        if out.exists():
            shutil.rmtree(out)
        os.rename(tmp, out)
    except BaseException:
        for w in writers.values():
            w.abort()
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    return LeRobotExport(out, reader.name, len(records), total, rate, fps_source, names, size)


def _write_parquet(table, path: Path, pq) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, compression="snappy")


def _write_tasks(tasks: dict[str, int], path: Path, pa, pq) -> None:
    """task_index with the task text as the pandas index, which is how LeRobot reads it back."""
    pandas_meta = {
        "index_columns": ["task"], "column_indexes": [],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64",
             "metadata": None},
            {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": None},
        ],
        "creator": {"library": "worldsample"}, "pandas_version": "2.2.3",
    }
    table = pa.table({"task_index": pa.array(list(tasks.values()), pa.int64()), "task": pa.array(list(tasks))})
    table = table.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})
    _write_parquet(table, path, pq)


def export_lerobot(run_dir: Path | str, out: Path | str, group: str = "demo", **options) -> LeRobotExport:
    """`write_lerobot` for `group` of the run's store."""
    reader = EpisodeStore(run_dir).reader(group, cache=False)
    return write_lerobot(reader, out, run_name=Path(run_dir).resolve().name, **options)
