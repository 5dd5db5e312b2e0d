"""`store export-lerobot` / `import-lerobot`: a group written as a LeRobotDataset v3.0, read back
with pyarrow, pandas and PyAV (not with the code that wrote it), imported back into a run with
equal arrays; a dataset built by hand in LeRobot's own conventions; corrupt inputs refused
with nothing written."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from services.cli.main import app
from tests.dashboard.rundata import episode, frames, schema
from worldsample.errors import DatasetError, ExportError, SchemaError, StoreCorruptError
from worldsample.export.lerobot_import import import_lerobot
from worldsample.export.lerobot_write import export_lerobot
from worldsample.store import EpisodeStore, GroupSchema, KeySpec
from worldsample.store.layout import chunk_path

CHUNK, SIZE, LENGTHS, FPS = 8, 32, (21, 17, 24), 20
KEYS = ("proprio", "action", "reward", "done", "success", "intervention")
runner = CliRunner()


@pytest.fixture()
def run(tmp_path):
    store = EpisodeStore(tmp_path / "run", create=True)
    store.ensure_group("demo", schema(SIZE, chunk_len=CHUNK))
    with store.writer("demo") as w:
        for i, n in enumerate(LENGTHS):
            w.append_episode(episode(i, n, SIZE, success=i != 1, intervene=i == 0), policy_version=i,
                             domain="sim", extra={"control_rate_hz": FPS, "task": "push the puck"})
    return store


def stored(store: EpisodeStore, group: str = "demo") -> list[dict[str, np.ndarray]]:
    r = store.reader(group, cache=False)
    return [r.episode(i) for i in sorted(r.records)]


def decode(path: Path) -> tuple[np.ndarray, list[float]]:
    with av.open(str(path)) as c:
        got = [(f.time, f.to_ndarray(format="rgb24")) for f in c.decode(c.streams.video[0])]
    return np.stack([f for _, f in got]), [t for t, _ in got]


def test_the_export_has_lerobots_v3_layout(run, tmp_path):
    out = tmp_path / "ds"
    s = export_lerobot(run.run_dir, out, codec_name="av1")
    total = sum(LENGTHS)
    assert (s.episodes, s.frames, s.fps, s.fps_source) == (3, total, FPS, "control_rate_hz")
    for rel in ("meta/info.json", "meta/stats.json", "meta/tasks.parquet", "meta/episodes/chunk-000/file-000.parquet",
                "data/chunk-000/file-000.parquet", "videos/observation.images.front/chunk-000/file-000.mp4",
                "videos/observation.images.wrist/chunk-000/file-000.mp4"):
        assert (out / rel).is_file(), rel
    assert list(tmp_path.glob(".ds.*")) == []  # no temp dir left

    info = json.loads((out / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == FPS
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (3, total, 1)
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert info["video_path"] == "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    assert info["chunks_size"] == 1000 and info["splits"] == {"train": "0:3"}
    feats = info["features"]
    assert feats["observation.state"] == {"dtype": "float32", "shape": [4], "names": [f"proprio_{i}" for i in range(4)]}
    assert feats["action"]["shape"] == [4] and feats["next.reward"] == {"dtype": "float32", "shape": [1], "names": None}
    assert feats["next.done"]["dtype"] == "bool" and feats["complementary_info.is_intervention"]["dtype"] == "bool"
    cam = feats["observation.images.front"]
    assert cam["dtype"] == "video" and cam["shape"] == [SIZE, SIZE, 3]
    assert cam["names"] == ["height", "width", "channels"]
    assert cam["info"]["video.codec"] == "av1" and cam["info"]["video.fps"] == FPS
    for k in ("timestamp", "frame_index", "episode_index", "index", "task_index"):
        assert feats[k]["shape"] == [1], k

    data = pq.read_table(out / "data/chunk-000/file-000.parquet")
    assert data.num_rows == total
    assert set(data.column_names) == {f for f, ft in feats.items() if ft["dtype"] != "video"}
    assert data.schema.field("observation.state").type == pa.list_(pa.float32(), 4)
    ep = data.column("episode_index").to_numpy()
    assert np.array_equal(ep, np.repeat([0, 1, 2], LENGTHS))
    assert np.array_equal(data.column("frame_index").to_numpy(), np.concatenate([np.arange(n) for n in LENGTHS]))
    assert np.array_equal(data.column("index").to_numpy(), np.arange(total))
    np.testing.assert_allclose(data.column("timestamp").to_numpy(),
                               np.concatenate([np.arange(n) for n in LENGTHS]) / FPS, rtol=1e-6)
    src = stored(run)
    np.testing.assert_array_equal(np.stack(data.column("action").to_numpy(zero_copy_only=False)),
                                  np.concatenate([e["action"] for e in src]))
    np.testing.assert_array_equal(data.column("next.done").to_numpy(zero_copy_only=False),
                                  np.concatenate([e["done"] for e in src]))

    eps = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    ends = np.cumsum(LENGTHS)
    assert [e["episode_index"] for e in eps] == [0, 1, 2] and [e["length"] for e in eps] == list(LENGTHS)
    assert [e["dataset_from_index"] for e in eps] == [0, *ends[:-1]] and [e["dataset_to_index"] for e in eps] == [*ends]
    assert [e["tasks"] for e in eps] == [["push the puck"]] * 3
    for e, start in zip(eps, [0, *ends[:-1]]):
        assert e["videos/observation.images.wrist/from_timestamp"] == pytest.approx(start / FPS)
        assert e["videos/observation.images.wrist/to_timestamp"] == pytest.approx((start + e["length"]) / FPS)
        assert (e["data/chunk_index"], e["data/file_index"]) == (0, 0)
    tasks = pd.read_parquet(out / "meta/tasks.parquet")  # as LeRobot reads it: the task text is the index
    assert int(tasks.loc["push the puck"].task_index) == 0

    stats = json.loads((out / "meta/stats.json").read_text())
    acts = np.concatenate([e["action"] for e in src]).astype(np.float64)
    np.testing.assert_allclose(stats["action"]["mean"], acts.mean(0), rtol=1e-6)
    assert stats["action"]["count"] == [total]
    assert np.asarray(stats["observation.images.front"]["mean"]).shape == (3, 1, 1)
    pix = stats["observation.images.front"]
    assert 0 <= np.min(pix["min"]) <= np.max(pix["max"]) <= 1

    video, times = decode(out / "videos/observation.images.front/chunk-000/file-000.mp4")
    assert video.shape == (total, SIZE, SIZE, 3)
    np.testing.assert_allclose(times, np.arange(total) / FPS, atol=1e-6)
    frames_in = np.concatenate([e["image_front"] for e in src]).astype(int)
    assert np.abs(video.astype(int) - frames_in).mean() < 6


def test_lossless_round_trip_is_exact(run, tmp_path):
    export_lerobot(run.run_dir, tmp_path / "ds", codec_name="lossless")
    s = import_lerobot(tmp_path / "ds", tmp_path / "back")
    assert (s.episodes, s.frames, s.ids, s.staged, s.skipped, s.defaulted) == (3, sum(LENGTHS), [0, 1, 2], True, [], [])
    back = EpisodeStore(tmp_path / "back")
    assert back.schema("demo") == run.schema("demo")
    for a, b in zip(stored(run), stored(back), strict=True):
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    recs_a = run.reader("demo", cache=False).episode_records()
    recs_b = back.reader("demo", cache=False).episode_records()
    assert [r.length for r in recs_b] == list(LENGTHS)
    for ra, rb in zip(recs_a, recs_b):
        assert (rb.success, rb.terminated, rb.interventions, rb.policy_version, rb.domain) == (
            ra.success, ra.terminated, ra.interventions, ra.policy_version, ra.domain)
        assert rb.episode_return == pytest.approx(ra.episode_return)
        assert rb.extra["task"] == "push the puck" and rb.extra["control_rate_hz"] == FPS
    assert [r.extra["lerobot"]["episode_index"] for r in recs_b] == [0, 1, 2]
    assert not list((tmp_path / "back").glob(".import-lerobot-*"))


def test_av1_round_trip_keeps_values_and_frames_close(run, tmp_path):
    export_lerobot(run.run_dir, tmp_path / "ds")  # av1, lossy
    import_lerobot(tmp_path / "ds", tmp_path / "back")
    for a, b in zip(stored(run), stored(EpisodeStore(tmp_path / "back")), strict=True):
        for k in KEYS:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
        for k in ("image_front", "image_wrist"):
            assert a[k].shape == b[k].shape
            assert np.abs(a[k].astype(int) - b[k].astype(int)).mean() < 6, k


def test_grayscale_cameras_come_back_with_one_channel(tmp_path):
    gray = GroupSchema.build({"image_top": KeySpec(dtype="uint8", shape=(16, 24, 1), kind="image", camera="top"),
                              "proprio": KeySpec(dtype="float32", shape=(2,), finite=True)}, action_dim=2, chunk_len=4)
    store = EpisodeStore(tmp_path / "run", create=True)
    store.ensure_group("sim", gray)
    rng = np.random.default_rng(0)
    ep = {"image_top": rng.integers(0, 255, (9, 16, 24, 1), dtype=np.uint8),
          "proprio": rng.normal(size=(9, 2)).astype(np.float32), "action": np.zeros((9, 2), np.float32),
          "reward": np.ones(9, np.float32)}
    with store.writer("sim") as w:
        w.append_episode(ep)
    export_lerobot(store.run_dir, tmp_path / "ds", group="sim", codec_name="lossless")
    assert json.loads((tmp_path / "ds/meta/info.json").read_text())["features"]["observation.images.top"]["shape"] == [
        16, 24, 3]
    import_lerobot(tmp_path / "ds", tmp_path / "back")
    (got,) = stored(EpisodeStore(tmp_path / "back"))
    np.testing.assert_array_equal(got["image_top"], ep["image_top"])


# -- a dataset in LeRobot's own conventions, written here with pyarrow and PyAV ----------------------
H, W = 24, 32
EPISODES = [(0, 12, "pick the cube"), (1, 9, "place the cube"), (2, 15, "pick the cube")]


def _mp4(path: Path, video: np.ndarray, fps: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w", format="mp4") as c:
        s = c.add_stream("libx264rgb", rate=Fraction(fps))
        s.width, s.height, s.pix_fmt, s.options = W, H, "rgb24", {"qp": "0"}
        for k, f in enumerate(video):
            vf = av.VideoFrame.from_ndarray(f, format="rgb24")
            vf.pts, vf.time_base = k, Fraction(1, fps)
            for p in s.encode(vf):
                c.mux(p)
        for p in s.encode():
            c.mux(p)


def lerobot_dataset(root: Path, fps: int = 15) -> dict[int, dict[str, np.ndarray]]:
    """Episodes 0 and 1 in data file 0 and video file 0, episode 2 in file 1 of each (a new file
    starts its timestamps at 0); float64 actions, no next.reward, a string feature, channels-first
    camera shape, as LeRobot's own datasets have them."""
    rng = np.random.default_rng(3)
    truth, tables, videos = {}, {0: [], 1: []}, {0: [], 1: []}
    index = 0
    episodes = []
    for e, n, task in EPISODES:
        file = 0 if e < 2 else 1
        t = {"state": rng.normal(size=(n, 6)).astype(np.float32), "env": rng.normal(size=(n, 3)).astype(np.float32),
             "action": rng.normal(size=(n, 6)), "done": np.arange(n) == n - 1,
             "frames": frames(n, max(H, W), e, 40 * e)[:, :H, :W]}
        truth[e] = t
        start_frame = sum(len(v) for v in videos[file])
        videos[file].append(t["frames"])
        tables[file].append(pa.table({
            "observation.state": pa.FixedSizeListArray.from_arrays(pa.array(t["state"].reshape(-1)), 6),
            "observation.environment_state": pa.array(list(t["env"]), pa.list_(pa.float32())),
            "action": pa.FixedSizeListArray.from_arrays(pa.array(t["action"].reshape(-1)), 6),
            "next.done": pa.array(t["done"]),
            "language_instruction": pa.array([task] * n),
            "timestamp": pa.array(np.arange(n, dtype=np.float32) / fps),
            "frame_index": pa.array(np.arange(n)), "episode_index": pa.array(np.full(n, e)),
            "index": pa.array(np.arange(index, index + n)),
            "task_index": pa.array(np.full(n, 0 if "pick" in task else 1)),
        }))
        episodes.append({"episode_index": e, "tasks": [task], "length": n,
                         "data/chunk_index": 0, "data/file_index": file,
                         "dataset_from_index": index, "dataset_to_index": index + n,
                         "videos/observation.images.top/chunk_index": 0,
                         "videos/observation.images.top/file_index": file,
                         "videos/observation.images.top/from_timestamp": start_frame / fps,
                         "videos/observation.images.top/to_timestamp": (start_frame + n) / fps,
                         "meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0})
        index += n
    for file in (0, 1):
        path = root / f"data/chunk-000/file-{file:03d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.concat_tables(tables[file]), path)
        _mp4(root / f"videos/observation.images.top/chunk-000/file-{file:03d}.mp4", np.concatenate(videos[file]), fps)
    (root / "meta/episodes/chunk-000").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(episodes), root / "meta/episodes/chunk-000/file-000.parquet")
    pd.DataFrame({"task_index": [0, 1]}, index=pd.Index(["pick the cube", "place the cube"], name="task")).to_parquet(
        root / "meta/tasks.parquet")
    scalar = {"shape": [1], "names": None}
    info = {
        "codebase_version": "v3.0", "robot_type": "so100", "total_episodes": 3, "total_frames": index, "total_tasks": 2,
        "chunks_size": 1000, "data_files_size_in_mb": 100, "video_files_size_in_mb": 500, "fps": fps,
        "splits": {"train": "0:3"},
        "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
        "video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
        "features": {
            "observation.state": {"dtype": "float32", "shape": [6], "names": [f"j{i}" for i in range(6)]},
            "observation.environment_state": {"dtype": "float32", "shape": [3], "names": None},
            "action": {"dtype": "float64", "shape": [6], "names": [f"j{i}" for i in range(6)]},
            "next.done": {"dtype": "bool", **scalar},
            "language_instruction": {"dtype": "string", **scalar},
            "observation.images.top": {"dtype": "video", "shape": [3, H, W], "names": ["channels", "height", "width"],
                                       "info": {"video.fps": fps, "video.codec": "h264"}},
            **{k: {"dtype": "float32" if k == "timestamp" else "int64", **scalar}
               for k in ("timestamp", "frame_index", "episode_index", "index", "task_index")},
        },
    }
    (root / "meta/info.json").write_text(json.dumps(info, indent=4))
    return truth


def test_import_of_a_dataset_in_lerobots_conventions(tmp_path):
    truth = lerobot_dataset(tmp_path / "ds")
    s = import_lerobot(tmp_path / "ds", tmp_path / "run")
    assert (s.episodes, s.frames) == (3, sum(n for _, n, _ in EPISODES))
    assert s.skipped == ["language_instruction"] and s.defaulted == ["reward", "success", "intervention"]
    assert s.features == {"proprio": "observation.state", "state": "observation.environment_state",
                          "action": "action", "done": "next.done", "image_top": "observation.images.top"}
    store = EpisodeStore(tmp_path / "run")
    sch = store.schema("demo")
    assert sch.keys["image_top"].shape == (H, W, 3) and sch.keys["image_top"].camera == "top"
    assert sch.keys["proprio"].shape == (6,) and sch.keys["state"].shape == (3,) and sch.action_dim == 6
    reader = store.reader("demo", cache=False)
    for (e, n, task), rec in zip(EPISODES, reader.episode_records(), strict=True):
        got, t = reader.episode(rec.episode), truth[e]
        assert rec.length == n and rec.extra["task"] == task and rec.extra["control_rate_hz"] == 15
        np.testing.assert_array_equal(got["proprio"], t["state"])
        np.testing.assert_array_equal(got["state"], t["env"])
        np.testing.assert_array_equal(got["action"], t["action"].astype(np.float32))
        np.testing.assert_array_equal(got["done"], t["done"])
        np.testing.assert_array_equal(got["image_top"], t["frames"])  # exact: the file is lossless
        assert not got["reward"].any() and not got["success"].any()
        assert rec.terminated  # next.done at the last frame


def test_an_imported_dataset_exports_again(tmp_path):
    lerobot_dataset(tmp_path / "ds")
    import_lerobot(tmp_path / "ds", tmp_path / "run")
    s = export_lerobot(tmp_path / "run", tmp_path / "again", codec_name="lossless")
    assert (s.fps, s.fps_source, s.episodes) == (15, "control_rate_hz", 3)  # the dataset's fps came along
    eps = pq.read_table(tmp_path / "again/meta/episodes/chunk-000/file-000.parquet").column("tasks").to_pylist()
    assert eps == [["pick the cube"], ["place the cube"], ["pick the cube"]]


# -- input refused at the boundary, nothing written ------------------------------------------------
def _break(root: Path, how: str) -> str:
    info_path = root / "meta/info.json"
    info = json.loads(info_path.read_text())
    data0 = root / "data/chunk-000/file-000.parquet"
    if how == "no info.json":
        info_path.unlink()
        return "no meta/info.json"
    if how == "garbled info.json":
        info_path.write_text(info_path.read_text()[:40])
        return "not valid JSON"
    if how == "version 2.1":
        info["codebase_version"] = "v2.1"
    elif how == "shape mismatch":
        info["features"]["action"]["shape"] = [7]
    elif how == "no fps":
        del info["fps"]
    elif how == "no action":
        del info["features"]["action"]
    elif how == "missing column":
        pq.write_table(pq.read_table(data0).drop_columns(["observation.state"]), data0)
    elif how == "episode length":
        path = root / "meta/episodes/chunk-000/file-000.parquet"
        rows = pq.read_table(path).to_pylist()
        rows[1]["length"] += 2
        pq.write_table(pa.Table.from_pylist(rows), path)
    elif how == "garbled data":
        data0.write_bytes(b"PAR1" + b"\0" * 64)
    elif how == "missing video":
        (root / "videos/observation.images.top/chunk-000/file-001.mp4").unlink()
    elif how == "short video":  # the last episode's file lost its tail
        _mp4(root / "videos/observation.images.top/chunk-000/file-001.mp4", np.zeros((5, H, W, 3), np.uint8), 15)
    elif how == "garbled video":
        path = root / "videos/observation.images.top/chunk-000/file-001.mp4"
        path.write_bytes(path.read_bytes()[:200])
    info_path.write_text(json.dumps(info))
    return {"version 2.1": "codebase_version 'v2.1'", "shape mismatch": "shape says 7", "no fps": "fps is None",
            "no action": "no `action` feature", "missing column": "no column(s) ['observation.state']",
            "episode length": "episode 1: the data files hold 9 rows", "garbled data": "not a readable parquet",
            "missing video": "file-001.mp4 is missing", "short video": "needs frames 0..14",
            "garbled video": "file-001.mp4"}[how]


BREAKS = ["no info.json", "garbled info.json", "version 2.1", "shape mismatch", "no fps", "no action",
          "missing column", "episode length", "garbled data", "missing video", "short video", "garbled video"]


@pytest.mark.parametrize("how", BREAKS)
def test_a_broken_dataset_is_refused_and_a_new_run_stays_absent(tmp_path, how):
    lerobot_dataset(tmp_path / "ds")
    words = _break(tmp_path / "ds", how)
    with pytest.raises(DatasetError, match=words.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        import_lerobot(tmp_path / "ds", tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("how", ["short video", "missing column"])
def test_a_broken_dataset_adds_nothing_to_an_existing_demo_group(tmp_path, how):
    lerobot_dataset(tmp_path / "ds")
    import_lerobot(tmp_path / "ds", tmp_path / "run")  # the demo group exists now, with 3 episodes
    before = sorted(p.name for p in (tmp_path / "run/store/demo/commits").iterdir())
    _break(tmp_path / "ds", how)
    with pytest.raises(DatasetError):
        import_lerobot(tmp_path / "ds", tmp_path / "run")
    assert sorted(p.name for p in (tmp_path / "run/store/demo/commits").iterdir()) == before
    assert EpisodeStore(tmp_path / "run").reader("demo", cache=False).num_episodes == 3


def test_a_second_import_appends_and_another_schema_is_refused(run, tmp_path):
    lerobot_dataset(tmp_path / "ds")
    import_lerobot(tmp_path / "ds", tmp_path / "other")
    s = import_lerobot(tmp_path / "ds", tmp_path / "other")
    assert s.ids == [3, 4, 5] and not s.staged
    with pytest.raises(SchemaError, match="another schema"):
        import_lerobot(tmp_path / "ds", run.run_dir)  # run's demo group has two cameras and 4-dim proprio
    assert run.reader("demo", cache=False).num_episodes == 3


def test_a_foreign_sidecar_is_refused(run, tmp_path):
    export_lerobot(run.run_dir, tmp_path / "ds", codec_name="lossless")
    (tmp_path / "ds/meta/worldsample.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(DatasetError, match="remove it to import by the features"):
        import_lerobot(tmp_path / "ds", tmp_path / "back")


# -- export errors -----------------------------------------------------------------------------
def test_export_refuses_an_existing_out_an_empty_group_and_damage(run, tmp_path):
    out = tmp_path / "ds"
    out.mkdir()
    (out / "keep").write_text("x")
    with pytest.raises(ExportError, match="exists"):
        export_lerobot(run.run_dir, out)
    assert (out / "keep").read_text() == "x"
    export_lerobot(run.run_dir, out, overwrite=True, codec_name="lossless")
    assert not (out / "keep").exists() and (out / "meta/info.json").is_file()

    run.ensure_group("sim", schema(SIZE, chunk_len=CHUNK))
    with pytest.raises(ExportError, match="no committed episodes"):
        export_lerobot(run.run_dir, tmp_path / "empty", group="sim")

    rec = run.reader("demo", cache=False).records[2]
    chunk_path(run.root / "demo", "image_wrist", rec.start // CHUNK + 1).joinpath("0", "0", "0").unlink()
    with pytest.raises(StoreCorruptError, match="not on disk"):
        export_lerobot(run.run_dir, tmp_path / "damaged")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "run"]  # no dataset, no temp dir


def test_cli_export_then_import(run, tmp_path):
    out = tmp_path / "ds"
    res = runner.invoke(app, ["store", "export-lerobot", str(run.run_dir), str(out), "--codec", "lossless",
                              "--task", "push", "--robot-type", "sawyer"])
    assert res.exit_code == 0, res.output
    assert f"3 episodes, {sum(LENGTHS)} frames at {FPS} fps" in res.output
    info = json.loads((out / "meta/info.json").read_text())
    assert info["robot_type"] == "sawyer"
    assert pd.read_parquet(out / "meta/tasks.parquet").index.tolist() == ["push"]
    res = runner.invoke(app, ["store", "export-lerobot", str(run.run_dir), str(out)])
    assert res.exit_code == 2 and res.output.startswith("error:") and "exists" in res.output

    res = runner.invoke(app, ["store", "import-lerobot", str(out), str(tmp_path / "back")])
    assert res.exit_code == 0, res.output
    assert f"imported 3 episodes, {sum(LENGTHS)} frames" in res.output and "ids 0..2" in res.output
    assert EpisodeStore(tmp_path / "back").reader("demo", cache=False).num_episodes == 3
    shutil.rmtree(out / "meta")
    res = runner.invoke(app, ["store", "import-lerobot", str(out), str(tmp_path / "back")])
    assert res.exit_code == 2 and "no meta/info.json" in res.output


def test_importing_the_modules_loads_neither_pyarrow_nor_av():
    code = ("import sys, worldsample.export.lerobot_write, worldsample.export.lerobot_import, "
            "worldsample.export.video, services.cli.main; "
            "bad = [m for m in ('pyarrow', 'av') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_image_features_stored_as_png_in_the_parquet(tmp_path):
    import io

    from PIL import Image

    rng = np.random.default_rng(5)
    pics = rng.integers(0, 255, (4, 6, 8, 3), dtype=np.uint8)
    root = tmp_path / "ds"
    png = []
    for p in pics:
        buf = io.BytesIO()
        Image.fromarray(p).save(buf, format="PNG")
        png.append({"bytes": buf.getvalue(), "path": None})
    (root / "data/chunk-000").mkdir(parents=True)
    pq.write_table(pa.table({"observation.image": pa.array(png), "action": pa.array(list(np.ones((4, 2))),
                                                                                   pa.list_(pa.float64())),
                             "frame_index": pa.array(np.arange(4)), "episode_index": pa.array(np.zeros(4, int))}),
                   root / "data/chunk-000/file-000.parquet")
    (root / "meta/episodes/chunk-000").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{"episode_index": 0, "length": 4, "data/chunk_index": 0,
                                          "data/file_index": 0}]), root / "meta/episodes/chunk-000/file-000.parquet")
    image = {"dtype": "image", "shape": [6, 8, 3], "names": ["height", "width", "channel"]}
    info = {"codebase_version": "v3.0", "fps": 10,
            "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
            "features": {"observation.image": image, "action": {"dtype": "float64", "shape": [2], "names": None}}}
    (root / "meta/info.json").write_text(json.dumps(info))
    s = import_lerobot(root, tmp_path / "run")
    assert s.features["image_image"] == "observation.image"
    (got,) = stored(EpisodeStore(tmp_path / "run"))
    np.testing.assert_array_equal(got["image_image"], pics)
