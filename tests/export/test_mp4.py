"""`worldsample store episode-mp4`: one stored episode's cameras as an mp4, decoded back with PyAV."""

from __future__ import annotations

import av
import numpy as np
import pytest
from typer.testing import CliRunner

from services.cli.main import app
from tests.dashboard.rundata import episode, schema
from worldsample.errors import ExportError, StoreCorruptError, StoreError
from worldsample.export.video import export_episode_mp4
from worldsample.store import EpisodeStore, GroupSchema, KeySpec
from worldsample.store.layout import chunk_path

CHUNK, SIZE, LENGTH = 8, 32, 19
runner = CliRunner()


@pytest.fixture()
def run(tmp_path):
    store = EpisodeStore(tmp_path / "run", create=True)
    store.ensure_group("real", schema(SIZE, chunk_len=CHUNK))
    with store.writer("real") as w:
        w.append_episode(episode(0, LENGTH, SIZE, success=True), extra={"control_rate_hz": 25})
        w.append_episode(episode(1, LENGTH + 4, SIZE, success=False))
    return store


def decode(path):
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        got = [(f.time, f.to_ndarray(format="rgb24")) for f in c.decode(s)]
        return np.stack([f for _, f in got]), [t for t, _ in got], s.codec_context.name


def test_all_cameras_side_by_side(run, tmp_path):
    out = tmp_path / "ep0.mp4"
    s = export_episode_mp4(run.run_dir, "real", 0, out)
    data = run.reader("real", cache=False).episode(0)
    video, times, name = decode(out)
    assert (s.frames, s.fps, s.cameras, s.size, s.codec) == (LENGTH, 25, ["front", "wrist"], (2 * SIZE, SIZE), "h264")
    assert name == "h264" and video.shape == (LENGTH, SIZE, 2 * SIZE, 3) and s.bytes == out.stat().st_size
    np.testing.assert_allclose(times, np.arange(LENGTH) / 25, atol=1e-6)
    for k, cam in enumerate(("front", "wrist")):
        part = video[:, :, k * SIZE : (k + 1) * SIZE].astype(int)
        assert np.abs(part - data[f"image_{cam}"].astype(int)).mean() < 6, cam


def test_one_camera_lossless_is_exact(run, tmp_path):
    out = tmp_path / "wrist.mp4"
    s = export_episode_mp4(run.run_dir, "real", 1, out, camera="wrist", codec_name="lossless", fps=7)
    video, times, _ = decode(out)
    assert s.fps == 7 and times[1] == pytest.approx(1 / 7)
    np.testing.assert_array_equal(video, run.reader("real", cache=False).episode(1)["image_wrist"])


def test_cameras_of_other_sizes_are_padded_and_grayscale_is_rgb(tmp_path):
    obs = {"image_a": KeySpec(dtype="uint8", shape=(16, 20, 3), kind="image", camera="a"),
           "image_b": KeySpec(dtype="uint8", shape=(10, 12, 1), kind="image", camera="b"),
           "proprio": KeySpec(dtype="float32", shape=(2,), finite=True)}
    store = EpisodeStore(tmp_path / "run", create=True)
    store.ensure_group("sim", GroupSchema.build(obs, action_dim=2, chunk_len=4))
    rng = np.random.default_rng(1)
    ep = {"image_a": rng.integers(0, 255, (6, 16, 20, 3), dtype=np.uint8),
          "image_b": rng.integers(0, 255, (6, 10, 12, 1), dtype=np.uint8),
          "proprio": np.zeros((6, 2), np.float32), "action": np.zeros((6, 2), np.float32), "reward": np.zeros(6)}
    with store.writer("sim") as w:
        w.append_episode(ep)
    s = export_episode_mp4(store.run_dir, "sim", 0, tmp_path / "x.mp4", codec_name="lossless")
    video, _, _ = decode(tmp_path / "x.mp4")
    assert s.size == (32, 16) and video.shape == (6, 16, 32, 3)
    np.testing.assert_array_equal(video[:, :, :20], ep["image_a"])
    np.testing.assert_array_equal(video[:, :10, 20:], np.repeat(ep["image_b"], 3, axis=3))
    assert not video[:, 10:, 20:].any()  # the padding is black


def test_errors_leave_no_file(run, tmp_path):
    with pytest.raises(StoreError, match="no committed episode 5"):
        export_episode_mp4(run.run_dir, "real", 5, tmp_path / "x.mp4")
    with pytest.raises(ExportError, match="no camera 'side'; its cameras: front, wrist"):
        export_episode_mp4(run.run_dir, "real", 0, tmp_path / "x.mp4", camera="side")
    with pytest.raises(ExportError, match="unknown codec 'vp9'"):
        export_episode_mp4(run.run_dir, "real", 0, tmp_path / "x.mp4", codec_name="vp9")
    (tmp_path / "x.mp4").write_bytes(b"keep")
    with pytest.raises(ExportError, match="exists"):
        export_episode_mp4(run.run_dir, "real", 0, tmp_path / "x.mp4")
    assert (tmp_path / "x.mp4").read_bytes() == b"keep"
    rec = run.reader("real", cache=False).records[1]
    chunk_path(run.root / "real", "image_front", rec.start // CHUNK + 2).joinpath("0", "0", "0").write_bytes(b"bad" * 9)
    with pytest.raises(StoreCorruptError, match="do not decode"):
        export_episode_mp4(run.run_dir, "real", 1, tmp_path / "y.mp4")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "x.mp4"]


def test_odd_sizes_need_another_codec_than_h264(tmp_path):
    obs = {"image_a": KeySpec(dtype="uint8", shape=(15, 21, 3), kind="image", camera="a")}
    store = EpisodeStore(tmp_path / "run", create=True)
    store.ensure_group("sim", GroupSchema.build(obs, action_dim=1, chunk_len=4))
    with store.writer("sim") as w:
        w.append_episode({"image_a": np.zeros((3, 15, 21, 3), np.uint8), "action": np.zeros((3, 1)),
                          "reward": np.zeros(3)})
    with pytest.raises(ExportError, match="even width and height"):
        export_episode_mp4(store.run_dir, "sim", 0, tmp_path / "a.mp4")
    assert not (tmp_path / "a.mp4").exists()
    export_episode_mp4(store.run_dir, "sim", 0, tmp_path / "a.mp4", codec_name="av1")
    assert decode(tmp_path / "a.mp4")[0].shape == (3, 15, 21, 3)


def test_cli(run, tmp_path):
    out = tmp_path / "cli.mp4"
    res = runner.invoke(app, ["store", "episode-mp4", str(run.run_dir), "0", str(out), "--camera", "front"])
    assert res.exit_code == 0, res.output
    assert f"{LENGTH} frames of {SIZE}x{SIZE} (front) at 25 fps, h264" in res.output
    assert decode(out)[0].shape == (LENGTH, SIZE, SIZE, 3)
    res = runner.invoke(app, ["store", "episode-mp4", str(run.run_dir), "0", str(out)])
    assert res.exit_code == 2 and res.output.startswith("error:") and "exists" in res.output
    res = runner.invoke(app, ["store", "episode-mp4", str(run.run_dir), "1", str(out), "--force", "--fps", "5"])
    assert res.exit_code == 0 and "at 5 fps" in res.output
