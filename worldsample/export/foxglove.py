"""One stored episode as an MCAP file that Foxglove opens, written with the foxglove-sdk.

    /camera/<name>        foxglove.CompressedImage (JPEG), or foxglove.RawImage (rgb8 / mono8)
                          with images="raw"; frame_id is the camera's name
    /<key>                JSON {"step": k, "value": ...} for every non-image key of the group:
                          the observations (proprio, ...), action, reward, done, success, intervention
    /worldsample/episode  one JSON message at the first step's time: run, group, the commit
                          record, the operator's label, and which rule gave the log times
    metadata record "worldsample.episode": the same, as strings

Each step's messages share one log time (`step_times`). The episode is read a time-chunk at a
time through the store's reader and checked against the commit record's checksums; damage
raises StoreCorruptError (the reader sets the episode aside) and leaves no file behind: the
MCAP is written to a temp file beside OUT and renamed onto it at the end.
"""

from __future__ import annotations

import io
import json
import math
import os
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from worldsample.errors import ExportError, StoreCorruptError
from worldsample.export.blocks import committed
from worldsample.store import EpisodeRecord, EpisodeStore, GroupReader

MEDIA_TYPE = "application/vnd.mcap"  # IANA's type for MCAP
EPISODE_TOPIC = "/worldsample/episode"
METADATA_NAME = "worldsample.episode"
ImageMode = Literal["jpeg", "raw"]


@dataclass
class ExportSummary:
    path: Path
    group: str
    episode: int
    steps: int
    messages: dict[str, int]  # topic -> messages written
    time_source: str  # the rule of `step_times` that gave the log times
    bytes: int


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def step_times(rec: EpisodeRecord, period_s: float | None = None) -> tuple[list[int], str]:
    """Log time of each step (ns since the epoch) and the rule that gave them, first that applies:
    `period` (period_s given: t0 + k * period_s), `step_offsets_ns` (a rosbag2 import keeps the
    bag's own tick times), `control_rate_hz` (recorded through the bridge: t0 + k / rate), else
    `wall_clock_span` (the steps spread evenly over wall_time_start..wall_time_end). t0 is the
    record's `extra.t0_ns` when it has one, else wall_time_start."""
    extra = rec.extra
    t0 = extra.get("t0_ns")
    t0 = t0 if _is_int(t0) and t0 > 0 else round(rec.wall_time_start * 1e9)
    offsets = extra.get("step_offsets_ns")
    if (
        period_s is None
        and isinstance(offsets, list)
        and len(offsets) == rec.length
        and all(_is_int(o) for o in offsets)
        and all(b > a for a, b in zip(offsets, offsets[1:]))
        and t0 + offsets[0] >= 0
    ):
        return [t0 + o for o in offsets], "step_offsets_ns"
    hz = extra.get("control_rate_hz")
    if period_s is not None:
        if not (math.isfinite(period_s) and period_s > 0):
            raise ExportError(f"the step period must be a positive number of seconds, got {period_s}")
        period, how = period_s * 1e9, "period"
    elif isinstance(hz, int | float) and not isinstance(hz, bool) and math.isfinite(hz) and hz > 0:
        period, how = 1e9 / hz, "control_rate_hz"
    else:
        period, how = (rec.wall_time_end - rec.wall_time_start) * 1e9 / rec.length, "wall_clock_span"
    p = max(1, round(period))  # strictly increasing even when the recorded span is ~0
    return [t0 + k * p for k in range(rec.length)], how


def _jsonable(v: np.ndarray) -> Any:
    if v.dtype.kind == "f" and not np.isfinite(v).all():  # JSON has no NaN: null in its place
        return np.where(np.isfinite(v), v, None).tolist() if v.ndim else None
    return v.tolist()


def _value_schema(shape: tuple[int, ...], dtype: np.dtype) -> dict:
    s: dict = {"type": "boolean" if dtype == np.bool_ else "number"}
    for _ in shape:
        s = {"type": "array", "items": s}
    return s


def _check_out(out: Path, overwrite: bool) -> None:
    if out.is_dir():
        raise ExportError(f"{out} is a directory; name the .mcap file to write")
    if (out.exists() or out.is_symlink()) and not overwrite:
        raise ExportError(f"{out} exists; choose another name or overwrite it (--force)")
    if not out.parent.is_dir():
        raise ExportError(f"{out.parent} is not a directory; create it first")


def _image(frame: np.ndarray, cam: str, ts, mode: ImageMode, quality: int):
    from foxglove.messages import CompressedImage, RawImage

    h, w, c = frame.shape
    if mode == "raw":
        enc = "rgb8" if c == 3 else "mono8"
        return RawImage(timestamp=ts, frame_id=cam, width=w, height=h, encoding=enc, step=w * c, data=frame.tobytes())
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame[..., 0] if c == 1 else frame).save(buf, format="JPEG", quality=quality)
    return CompressedImage(timestamp=ts, frame_id=cam, data=buf.getvalue(), format="jpeg")


def _write(w, ctx, reader: GroupReader, rec: EpisodeRecord, times: list[int], header: dict, images: ImageMode,
           quality: int) -> dict[str, int]:
    import foxglove
    from foxglove.channels import CompressedImageChannel, RawImageChannel

    schema = reader.schema
    cams = {k: s.camera or k for k, s in schema.keys.items() if s.kind == "image"}
    lowdim = [k for k, s in schema.keys.items() if s.kind != "image"]
    image_cls = RawImageChannel if images == "raw" else CompressedImageChannel
    channels: dict[str, Any] = {k: image_cls(f"/camera/{cam}", context=ctx) for k, cam in cams.items()}
    for k in lowdim:
        spec = schema.keys[k]
        js = {"title": f"worldsample.step.{k}", "type": "object",
              "properties": {"step": {"type": "integer"}, "value": _value_schema(spec.shape, spec.np_dtype)}}
        channels[k] = foxglove.Channel(f"/{k}", schema=js, context=ctx)
    first = foxglove.Channel(EPISODE_TOPIC, schema={"title": "worldsample.Episode", "type": "object"}, context=ctx)
    first.log(header, log_time=times[0])
    w.write_metadata(METADATA_NAME, {k: v if isinstance(v, str) else json.dumps(v) for k, v in header.items()})
    try:
        return _steps(reader, rec, times, channels, cams, lowdim, images, quality)
    finally:
        # the SDK keeps each JSON channel in a module-level registry (foxglove/channel.py), a few
        # KiB per export that a long-running dashboard would otherwise keep for good (a private name of
        # the pinned version: if a later SDK drops it, the channels are still closed)
        registry = getattr(foxglove.channel, "_channels_by_id", {})
        for ch in [first, *(channels[k] for k in lowdim)]:
            ch.close()
            registry.pop(ch.id(), None)


def _steps(reader: GroupReader, rec: EpisodeRecord, times: list[int], channels: dict[str, Any], cams: dict[str, str],
           lowdim: list[str], images: ImageMode, quality: int) -> dict[str, int]:
    """Each time-chunk of every key, its steps logged in order; then the checksums compared."""
    from foxglove.messages import Timestamp

    crcs = dict.fromkeys(channels, 0)
    c = reader.schema.chunk_len
    for lo in range(0, rec.length, c):
        block = {k: reader.read_steps(rec.episode, k, lo, min(rec.length, lo + c)) for k in channels}
        for k, a in block.items():
            crcs[k] = zlib.crc32(np.ascontiguousarray(a).data, crcs[k])
        for i in range(len(block["action"])):
            t = times[lo + i]
            ts = Timestamp(t // 1_000_000_000, t % 1_000_000_000)
            for k, cam in cams.items():
                channels[k].log(_image(block[k][i], cam, ts, images, quality), log_time=t)
            for k in lowdim:
                channels[k].log({"step": lo + i, "value": _jsonable(block[k][i])}, log_time=t)
    bad = [k for k, crc in crcs.items() if k in rec.checksums and crc != rec.checksums[k]]
    if bad:
        reader.verify(rec.episode, bad)  # raises StoreCorruptError and sets the episode aside
        raise StoreCorruptError(f"{reader.name}/episode {rec.episode}: {bad} changed while it was exported")
    counts = {ch.topic(): rec.length for ch in channels.values()}
    return {EPISODE_TOPIC: 1, **counts}


def write_episode(
    reader: GroupReader,
    episode: int,
    out: Path | str,
    *,
    images: ImageMode = "jpeg",
    jpeg_quality: int = 90,
    period_s: float | None = None,
    overwrite: bool = False,
    run_name: str = "",
) -> ExportSummary:
    """Write one committed episode of the reader's group to `out` (see the module's docstring).

    StoreError for an episode the group does not have, StoreCorruptError for a damaged one (set
    aside), ExportError for an output that cannot be written as asked. OUT is replaced only by
    a complete file."""
    import foxglove
    from foxglove.mcap import MCAPWriteOptions

    if images not in ("jpeg", "raw"):
        raise ExportError(f"images must be 'jpeg' or 'raw', got {images!r}")
    if not 1 <= jpeg_quality <= 100:
        raise ExportError(f"the JPEG quality must be 1..100, got {jpeg_quality}")
    rec = committed(reader, episode)
    out = Path(out)
    _check_out(out, overwrite)
    times, how = step_times(rec, period_s)
    label = reader.labels.get(episode)
    header = {
        "run": run_name,
        "group": reader.name,
        "episode": rec.episode,
        "steps": rec.length,
        "time_source": how,
        "record": json.loads(rec.model_dump_json()),  # pydantic writes NaN as null here
        "label": label.model_dump(mode="json") if label is not None else None,
    }
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    os.close(fd)
    try:
        ctx = foxglove.Context()  # its own context: concurrent exports never share a channel or sink
        opts = MCAPWriteOptions(compression_threads=0)
        with foxglove.open_mcap(tmp, allow_overwrite=True, context=ctx, writer_options=opts) as w:
            counts = _write(w, ctx, reader, rec, times, header, images, jpeg_quality)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return ExportSummary(out, reader.name, rec.episode, rec.length, counts, how, out.stat().st_size)


def export_episode(run_dir: Path | str, group: str, episode: int, out: Path | str, **options: Any) -> ExportSummary:
    """`write_episode` for episode `episode` of `group` in the run's store."""
    reader = EpisodeStore(run_dir).reader(group, cache=False)
    return write_episode(reader, episode, out, run_name=Path(run_dir).resolve().name, **options)
