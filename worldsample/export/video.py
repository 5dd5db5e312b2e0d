"""Camera frames to and from mp4 with PyAV, and one stored episode as an mp4 file.

Codecs (`CODECS`): `av1` (libsvtav1, yuv420p: LeRobot's default), `h264` (libx264, yuv420p:
plays in every browser; even width and height only) and `lossless` (libx264rgb at qp 0, rgb24:
decodes to the exact pixels, several times larger). A keyframe every 2 frames, as LeRobot
writes them, so a reader seeks to any frame cheaply. Grayscale (H, W, 1) frames are written as
RGB with three equal channels.

`episode_mp4` writes one committed episode's cameras (side by side, or one `camera`) to OUT,
through a temp file renamed onto OUT when complete; the frames are read a time-chunk at a time
and checked against the commit record's checksums.

Importing this module loads no PyAV; the functions that need it import it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from worldsample.errors import DatasetError, ExportError
from worldsample.export.blocks import check_out, committed, episode_blocks
from worldsample.store import EpisodeStore, GroupReader


@dataclass(frozen=True)
class Codec:
    encoder: str  # FFmpeg's encoder
    name: str  # the codec as a decoder reports it (LeRobot's `video.codec`)
    pix_fmt: str
    options: dict[str, str]


CODECS = {
    "av1": Codec("libsvtav1", "av1", "yuv420p", {"crf": "30", "g": "2", "preset": "12"}),
    "h264": Codec("libx264", "h264", "yuv420p", {"crf": "20", "g": "2", "preset": "fast"}),
    "lossless": Codec("libx264rgb", "h264", "rgb24", {"qp": "0", "g": "2", "preset": "fast"}),
}
DEFAULT_FPS = 10  # when neither the caller nor the records give a rate


def codec(name: str) -> Codec:
    if name not in CODECS:
        raise ExportError(f"unknown codec {name!r}; codecs: {', '.join(CODECS)}")
    return CODECS[name]


class VideoWriter:
    """Frames (H, W, C) uint8, C in (1, 3), appended in order to one mp4 at `fps`."""

    def __init__(self, path: Path, fps: int, height: int, width: int, codec_name: str = "av1"):
        import av

        c = codec(codec_name)
        if c.pix_fmt == "yuv420p" and c.encoder == "libx264" and (height % 2 or width % 2):
            raise ExportError(f"h264 (yuv420p) needs an even width and height, got {width}x{height}; "
                              "use the av1 or lossless codec")
        os.environ.setdefault("SVT_LOG", "1")  # libsvtav1 prints its whole configuration at info level
        self.path, self.fps, self.shape, self.frames = Path(path), fps, (height, width), 0
        self.codec = c
        self._av = av
        self._out = av.open(str(self.path), "w", format="mp4")
        try:
            self._stream = self._out.add_stream(c.encoder, rate=Fraction(fps))
            self._stream.width, self._stream.height, self._stream.pix_fmt = width, height, c.pix_fmt
            self._stream.options = dict(c.options)
        except BaseException:
            self._out.close()
            raise

    def add(self, frames: np.ndarray) -> None:
        for f in frames:
            if f.shape[:2] != self.shape:
                raise ExportError(f"{self.path.name}: frame of {f.shape[1]}x{f.shape[0]}, the video is "
                                  f"{self.shape[1]}x{self.shape[0]}")
            rgb = np.repeat(f, 3, axis=2) if f.shape[2] == 1 else f
            frame = self._av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
            frame.pts, frame.time_base = self.frames, Fraction(1, self.fps)
            for packet in self._stream.encode(frame):
                self._out.mux(packet)
            self.frames += 1

    def close(self) -> None:
        try:
            for packet in self._stream.encode():
                self._out.mux(packet)
        finally:
            self._out.close()

    def abort(self) -> None:
        """Close without the file being of use (the caller removes it); the encoder still gets its end of stream."""
        try:
            self._stream.encode()
        except Exception:  # the encoder's state does not matter any more
            pass
        finally:
            self._out.close()


def iter_frames(path: Path, fps: int) -> Iterator[tuple[int, np.ndarray]]:
    """(frame number, RGB frame) of every frame of the file's first video stream, in order; the
    number is the frame's presentation time times `fps`, rounded. DatasetError for a file that
    does not open or decode."""
    import av

    try:
        container = av.open(str(path))
    except (av.FFmpegError, OSError) as e:
        raise DatasetError(f"{path}: not a readable video: {e}") from e
    with container:
        if not container.streams.video:
            raise DatasetError(f"{path} has no video stream")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        try:
            for k, frame in enumerate(container.decode(stream)):
                n = round(frame.time * fps) if frame.time is not None else k
                yield n, frame.to_ndarray(format="rgb24")
        except av.FFmpegError as e:
            raise DatasetError(f"{path}: does not decode: {e}") from e


def read_frames(path: Path, fps: int = DEFAULT_FPS) -> np.ndarray:
    """All frames of a video, (N, H, W, 3) uint8."""
    frames = [f for _, f in iter_frames(Path(path), fps)]
    if not frames:
        raise DatasetError(f"{path} holds no frames")
    return np.stack(frames)


def episode_fps(rec_extra: dict, fps: int | None) -> int:
    if fps is not None:
        if fps <= 0:
            raise ExportError(f"fps must be a positive whole number, got {fps}")
        return fps
    hz = rec_extra.get("control_rate_hz")
    if isinstance(hz, int | float) and not isinstance(hz, bool) and hz > 0 and float(hz).is_integer():
        return int(hz)
    return DEFAULT_FPS


def _tile(block: dict[str, np.ndarray], keys: list[str], height: int) -> np.ndarray:
    """The cameras' frames side by side, each padded (black, at the bottom) to `height`."""
    parts = []
    for k in keys:
        a = block[k]
        if a.shape[3] == 1:
            a = np.repeat(a, 3, axis=3)
        if a.shape[1] < height:
            a = np.pad(a, ((0, 0), (0, height - a.shape[1]), (0, 0), (0, 0)))
        parts.append(a)
    return np.concatenate(parts, axis=2)


@dataclass
class Mp4Summary:
    path: Path
    group: str
    episode: int
    frames: int
    fps: int
    cameras: list[str]
    size: tuple[int, int]  # width, height
    codec: str
    bytes: int


def write_episode_mp4(reader: GroupReader, episode: int, out: Path | str, *, camera: str | None = None,
                      fps: int | None = None, codec_name: str = "h264", overwrite: bool = False) -> Mp4Summary:
    """One committed episode's camera frames as an mp4 at OUT (see the module's docstring)."""
    codec(codec_name)
    rec = committed(reader, episode)
    schema = reader.schema
    cams = {schema.keys[k].camera: k for k in schema.image_keys}
    if not cams:
        raise ExportError(f"group {reader.name!r} has no cameras; its keys: {sorted(schema.keys)}")
    if camera is not None and camera not in cams:
        raise ExportError(f"group {reader.name!r} has no camera {camera!r}; its cameras: {', '.join(cams)}")
    names = [camera] if camera is not None else list(cams)
    keys = [cams[c] for c in names]
    height = max(schema.keys[k].shape[0] for k in keys)
    width = sum(schema.keys[k].shape[1] for k in keys)
    rate = episode_fps(rec.extra, fps)
    out = Path(out)
    check_out(out, overwrite, "file")
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp.mp4")
    os.close(fd)
    try:
        w = VideoWriter(Path(tmp), rate, height, width, codec_name)
        try:
            for block in episode_blocks(reader, rec, keys):
                w.add(_tile(block, keys, height))
        except BaseException:
            w.abort()
            raise
        w.close()
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Mp4Summary(out, reader.name, rec.episode, w.frames, rate, names, (width, height), codec_name,
                      out.stat().st_size)


def export_episode_mp4(run_dir: Path | str, group: str, episode: int, out: Path | str, **options) -> Mp4Summary:
    """`write_episode_mp4` for episode `episode` of `group` in the run's store."""
    return write_episode_mp4(EpisodeStore(run_dir).reader(group, cache=False), episode, out, **options)
