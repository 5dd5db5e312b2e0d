"""`worldsample store export-foxglove`: an episode written as MCAP with the foxglove-sdk and read
back with the `mcap` package: topics, counts, schemas, log times, pixels and values."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from services.cli.main import app
from tests.dashboard.rundata import episode, schema
from tests.export.mcapread import jpeg_pixels, read_mcap
from worldsample.errors import ExportError, StoreCorruptError, StoreError
from worldsample.export.foxglove import export_episode, step_times, write_episode
from worldsample.store import EpisodeRecord, EpisodeStore
from worldsample.store.layout import chunk_path

CHUNK, SIZE, LENGTH = 8, 32, 21  # three time-chunks, the last one partial
T0 = 1_760_000_000_000_000_000
LOWDIM = ("proprio", "action", "reward", "done", "success", "intervention")
runner = CliRunner()


@pytest.fixture()
def run(tmp_path):
    store = EpisodeStore(tmp_path / "run", create=True)
    store.ensure_group("real", schema(SIZE, chunk_len=CHUNK))
    with store.writer("real") as w:
        w.append_episode(episode(0, LENGTH, SIZE, success=True, intervene=True), policy_version=3,
                         extra={"control_rate_hz": 20, "t0_ns": T0})
        w.append_episode(episode(1, LENGTH, SIZE, success=False))  # no rate: the wall-clock span
        w.append_episode(episode(2, LENGTH, SIZE, success=False))
    store.labels("real").append(0, False, source="test")
    return store


def stored(store: EpisodeStore, i: int) -> dict[str, np.ndarray]:
    return store.reader("real", cache=False).episode(i)


def test_export_reads_back_with_the_mcap_reader(run, tmp_path):
    out = tmp_path / "ep0.mcap"
    s = export_episode(run.run_dir, "real", 0, out)
    got = read_mcap(out.read_bytes())
    data = stored(run, 0)
    cams = ["/camera/front", "/camera/wrist"]
    assert set(got.schemas) == {*cams, *(f"/{k}" for k in LOWDIM), "/worldsample/episode"}
    assert s.messages == got.counts and s.time_source == "control_rate_hz" and s.bytes == out.stat().st_size
    for topic in [*cams, *(f"/{k}" for k in LOWDIM)]:
        assert got.counts[topic] == LENGTH == len(got.messages[topic]), topic
        # 20 Hz from t0_ns: every topic of step k at t0 + k * 50 ms, strictly increasing
        assert got.times[topic] == [T0 + k * 50_000_000 for k in range(LENGTH)], topic
    for topic in cams:
        assert got.schemas[topic] == ("foxglove.CompressedImage", "protobuf")
        assert got.encodings[topic] == "protobuf"
        for k, msg in enumerate(got.messages[topic]):
            assert msg.format == "jpeg" and msg.frame_id == topic.split("/")[-1]
            assert msg.timestamp.seconds * 10**9 + msg.timestamp.nanos == got.times[topic][k]
            frame = data[f"image_{topic.split('/')[-1]}"][k].astype(int)
            diff = np.abs(jpeg_pixels(msg).astype(int) - frame)
            assert diff.mean() < 4 and np.percentile(diff, 99) < 40, (topic, k, diff.mean())
    for key in LOWDIM:
        assert got.encodings[f"/{key}"] == "json"
        assert got.schemas[f"/{key}"] == (f"worldsample.step.{key}", "jsonschema")
        msgs = got.messages[f"/{key}"]
        assert [m["step"] for m in msgs] == list(range(LENGTH))
        values = np.asarray([m["value"] for m in msgs], dtype=data[key].dtype)
        np.testing.assert_array_equal(values, data[key])  # exact: float32 -> JSON -> float32
    assert data["intervention"].any() and data["success"].any()


def test_the_episode_record_rides_along(run, tmp_path):
    out = tmp_path / "ep0.mcap"
    export_episode(run.run_dir, "real", 0, out)
    got = read_mcap(out.read_bytes())
    rec = run.reader("real", cache=False).records[0]
    (first,) = got.messages["/worldsample/episode"]
    assert got.times["/worldsample/episode"] == [T0]
    assert first["record"] == json.loads(rec.model_dump_json())
    assert first["group"] == "real" and first["run"] == "run" and first["time_source"] == "control_rate_hz"
    assert first["label"]["success"] is False  # the operator's verdict, beside the recorded success
    meta = got.metadata["worldsample.episode"]
    assert json.loads(meta["record"]) == first["record"] and meta["episode"] == "0" and meta["group"] == "real"


def test_raw_images_are_exact(run, tmp_path):
    out = tmp_path / "raw.mcap"
    export_episode(run.run_dir, "real", 1, out, images="raw")
    got = read_mcap(out.read_bytes())
    data = stored(run, 1)
    assert got.schemas["/camera/front"] == ("foxglove.RawImage", "protobuf")
    for k, msg in enumerate(got.messages["/camera/front"]):
        assert (msg.encoding, msg.width, msg.height, msg.step) == ("rgb8", SIZE, SIZE, SIZE * 3)
        np.testing.assert_array_equal(np.frombuffer(msg.data, np.uint8).reshape(SIZE, SIZE, 3), data["image_front"][k])


def test_log_times_without_a_control_rate_span_the_wall_clock(run, tmp_path):
    out = tmp_path / "ep1.mcap"
    s = export_episode(run.run_dir, "real", 1, out)
    rec = run.reader("real", cache=False).records[1]
    times = read_mcap(out.read_bytes()).times["/action"]
    assert s.time_source == "wall_clock_span" and times[0] == round(rec.wall_time_start * 1e9)
    assert all(b > a for a, b in zip(times, times[1:]))
    assert times[-1] <= rec.wall_time_end * 1e9
    s = export_episode(run.run_dir, "real", 1, tmp_path / "p.mcap", period_s=0.1)
    times = read_mcap((tmp_path / "p.mcap").read_bytes()).times["/action"]
    assert s.time_source == "period" and np.all(np.diff(times) == 100_000_000)


def _record(**kw) -> EpisodeRecord:
    base = dict(episode=0, start=0, length=3, episode_return=0.0, success=False, terminated=False,
                wall_time_start=100.0, wall_time_end=100.3)
    return EpisodeRecord(**{**base, **kw})


def test_step_time_rules():
    offsets = {"t0_ns": T0, "step_offsets_ns": [0, 7, 30]}  # a rosbag2 import: the bag's own ticks
    assert step_times(_record(extra=offsets)) == ([T0, T0 + 7, T0 + 30], "step_offsets_ns")
    assert step_times(_record(extra={"control_rate_hz": 4})) == ([100 * 10**9 + k * 250_000_000 for k in range(3)],
                                                                 "control_rate_hz")
    assert step_times(_record()) == ([100 * 10**9 + k * 100_000_000 for k in range(3)], "wall_clock_span")
    # written in one go (a synthetic episode): still strictly increasing
    times, _ = step_times(_record(wall_time_end=100.0))
    assert times[0] < times[1] < times[2]
    with pytest.raises(ExportError, match="positive"):
        step_times(_record(), period_s=0)


def test_unknown_group_or_episode_and_an_existing_file(run, tmp_path):
    with pytest.raises(StoreError, match="no committed episode 9; its episodes: 0..2"):
        export_episode(run.run_dir, "real", 9, tmp_path / "x.mcap")
    with pytest.raises(StoreError, match="group 'demo' does not exist"):
        export_episode(run.run_dir, "demo", 0, tmp_path / "x.mcap")
    with pytest.raises(StoreError, match="unknown group 'bogus'"):
        export_episode(run.run_dir, "bogus", 0, tmp_path / "x.mcap")
    out = tmp_path / "x.mcap"
    out.write_bytes(b"keep me")
    with pytest.raises(ExportError, match="exists"):
        export_episode(run.run_dir, "real", 0, out)
    assert out.read_bytes() == b"keep me"
    export_episode(run.run_dir, "real", 0, out, overwrite=True)
    assert read_mcap(out.read_bytes()).counts["/action"] == LENGTH
    assert list(tmp_path.glob(".*.tmp")) == []


def _chunk(store: EpisodeStore, episode: int, key: str, index: int):
    rec = store.reader("real", cache=False).records[episode]
    return chunk_path(store.root / "real", key, rec.start // CHUNK + index).joinpath(*("0",) * 3)


@pytest.mark.parametrize("damage", ["garbled", "deleted"])
def test_a_damaged_episode_is_an_error_and_leaves_no_file(run, tmp_path, damage):
    path = _chunk(run, 2, "image_wrist", 2)  # the last chunk: the first two were written already
    path.write_bytes(b"garbled" * 20) if damage == "garbled" else path.unlink()
    reader = run.reader("real", cache=False)
    out = tmp_path / "out" / "ep2.mcap"
    out.parent.mkdir()

    why = "do not decode" if damage == "garbled" else "not on disk"
    with pytest.raises(StoreCorruptError, match=why):
        write_episode(reader, 2, out)
    assert list(out.parent.iterdir()) == []  # neither the file nor its temp file
    assert 2 in reader.damaged and 2 not in reader.records  # set aside
    with pytest.raises(StoreCorruptError, match="set aside as damaged"):
        write_episode(reader, 2, out)


def test_cli(run, tmp_path):
    out = tmp_path / "cli.mcap"
    res = runner.invoke(app, ["store", "export-foxglove", str(run.run_dir), str(out), "--group", "real",
                              "--episode", "0"])
    assert res.exit_code == 0, res.output
    assert f"{LENGTH} steps on 9 topics" in res.output and "control_rate_hz" in res.output
    assert read_mcap(out.read_bytes()).counts["/camera/wrist"] == LENGTH
    for target, args, words in [
        (out, ["--episode", "0"], "exists"),
        (out, ["--episode", "7"], "no committed episode 7"),
        (out, ["--episode", "0", "--group", "bogus", "--force"], "unknown group 'bogus'"),
        (tmp_path / "no" / "x.mcap", ["--episode", "0"], "is not a directory"),
    ]:
        res = runner.invoke(app, ["store", "export-foxglove", str(run.run_dir), str(target), *args])
        assert res.exit_code == 2, res.output
        assert res.output.startswith("error:") and words in res.output and len(res.output.strip().splitlines()) == 1
    res = runner.invoke(app, ["store", "export-foxglove", str(run.run_dir), str(out), "-e", "1", "--force", "--raw",
                              "--period-ms", "40"])
    assert res.exit_code == 0, res.output
    got = read_mcap(out.read_bytes())
    assert got.schemas["/camera/front"][0] == "foxglove.RawImage"
    assert np.all(np.diff(got.times["/reward"]) == 40_000_000)


def test_importing_the_exporter_leaves_the_sdk_unloaded():
    code = "import sys, worldsample.export.foxglove; assert 'foxglove' not in sys.modules, 'sdk loaded'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
