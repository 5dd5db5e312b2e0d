"""A LeRobotDataset v3.0 directory checked at the boundary and read episode by episode.

`open_dataset(root)` reads meta/info.json, the episode table and the data parquet files and
checks them against each other: the version ("v3.x"), fps, features with dtype and shape, the
columns each feature needs and their widths, the episode table's columns, every episode's rows
(frame_index 0..length-1) and, when an episode is read, its video frames (count and size). Any
mismatch is a DatasetError that names the file and what is wrong.

The store schema comes from meta/worldsample.json when the dataset was written by
`store export-lerobot` (the group's schema and key map, so the import gives back the same keys);
otherwise from the features by LeRobot's conventions (lerobot_format.py): video and image
features become cameras, observation.* the observation keys, and `action` the action. Absent
step features default: reward 0, done/success/intervention false (`DatasetPlan.defaulted`).
Features the store has no place for are listed in `DatasetPlan.skipped`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from worldsample.errors import DatasetError
from worldsample.export import lerobot_format as fmt
from worldsample.export.video import iter_frames
from worldsample.store import GroupSchema, KeySpec
from worldsample.store.schema import STEP_KEYS

MAX_JSON_BYTES = 16 << 20
SCALAR_STEP_KEYS = ("reward", "done", "success", "intervention")


@dataclass
class DatasetPlan:
    root: Path
    info: dict
    fps: int
    schema: GroupSchema
    features: dict[str, str]  # store key -> feature (present in the dataset)
    layouts: dict[str, str]  # image key -> "hwc" or "chw" (the feature's declared shape)
    episodes: list[dict]  # the episode table's rows, by episode_index
    data: dict[str, np.ndarray]  # store key (lowdim) -> all rows; "_episode", "_frame" the index columns
    rows: dict[int, np.ndarray]  # episode_index -> its row numbers in `data`, in frame order
    images: dict[str, list]  # image key -> all rows (dtype "image" features: encoded bytes)
    sidecar: dict | None
    skipped: list[str] = field(default_factory=list)
    defaulted: list[str] = field(default_factory=list)

    @property
    def frames(self) -> int:
        return sum(int(e["length"]) for e in self.episodes)


def _json(path: Path, what: str) -> Any:
    if not path.is_file():
        raise DatasetError(f"{path.parent.parent} is not a LeRobot dataset: no {what}")
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            raise DatasetError(f"{path} is larger than {MAX_JSON_BYTES >> 20} MiB; not a dataset's metadata")
        return json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise DatasetError(f"{path} is not valid JSON: {str(e)[:200]}") from e


def _shape(name: str, ft: Any) -> tuple[int, ...]:
    if not isinstance(ft, dict) or not isinstance(ft.get("dtype"), str):
        raise DatasetError(f"meta/info.json: feature {name!r} has no dtype")
    shape = ft.get("shape")
    if not isinstance(shape, list | tuple) or not shape or not all(isinstance(d, int) and d > 0 for d in shape):
        raise DatasetError(f"meta/info.json: feature {name!r} has shape {shape!r}; expected a list of positive sizes")
    return tuple(shape)


def read_info(root: Path) -> dict:
    if not root.is_dir():
        raise DatasetError(f"{root} is not a directory; name a LeRobot dataset's root (it holds meta/info.json)")
    info = _json(root / fmt.INFO_PATH, fmt.INFO_PATH)
    if not isinstance(info, dict):
        raise DatasetError(f"{root / fmt.INFO_PATH} holds {type(info).__name__}, not an object")
    version = info.get("codebase_version")
    if not isinstance(version, str) or not version.startswith("v3."):
        raise DatasetError(f"{root} is a LeRobot dataset of codebase_version {version!r}; this import reads v3.0 "
                           "(convert an older one with LeRobot's convert_dataset_v21_to_v30 first)")
    fps = info.get("fps")
    if isinstance(fps, bool) or not isinstance(fps, int | float) or fps <= 0 or not float(fps).is_integer():
        raise DatasetError(f"meta/info.json: fps is {fps!r}; expected a positive whole number")
    info["fps"] = int(fps)
    feats = info.get("features")
    if not isinstance(feats, dict) or not feats:
        raise DatasetError("meta/info.json has no features")
    for name, ft in feats.items():
        ft["shape"] = _shape(name, ft)
    for key in ("data_path", *(("video_path",) if any(f["dtype"] == "video" for f in feats.values()) else ())):
        p = info.get(key)
        if not isinstance(p, str) or "{chunk_index" not in p or "{file_index" not in p:
            raise DatasetError(f"meta/info.json: {key} is {p!r}; expected a template with chunk_index and file_index")
    return info


def _image_spec(name: str, ft: dict, camera: str) -> tuple[KeySpec, str]:
    shape, names = ft["shape"], ft.get("names") or []
    if len(shape) != 3:
        raise DatasetError(f"meta/info.json: camera feature {name!r} has shape {list(shape)}; expected 3 dimensions")
    chw = shape[0] == 3 and (list(names)[:1] in (["channels"], ["channel"]) or shape[2] != 3)
    h, w, c = (shape[1], shape[2], shape[0]) if chw else shape
    if c != 3:
        raise DatasetError(f"meta/info.json: camera feature {name!r} has {c} channels; the import reads RGB")
    return KeySpec(dtype="uint8", shape=(h, w, 3), kind="image", camera=camera), "chw" if chw else "hwc"


def _schema_from_features(feats: dict) -> tuple[GroupSchema, dict[str, str], dict[str, str], list[str]]:
    obs: dict[str, KeySpec] = {}
    names: dict[str, str] = {}
    layouts: dict[str, str] = {}
    skipped: list[str] = []
    for f, ft in feats.items():
        if f in fmt.INDEX_FEATURES:
            continue
        image = ft["dtype"] in ("video", "image")
        key = fmt.store_key(f, image)
        if key is None or (not image and ft["dtype"] in ("string", "str")):
            skipped.append(f)
            continue
        if key in names:
            raise DatasetError(f"meta/info.json: features {names[key]!r} and {f!r} both map to the store key {key!r}")
        names[key] = f
        if image:
            obs[key], layouts[key] = _image_spec(f, ft, key.removeprefix("image_"))
        elif key not in STEP_KEYS:
            obs[key] = KeySpec(dtype="float32", shape=(int(np.prod(ft["shape"])),), finite=True)
    if "action" not in names:
        raise DatasetError(f"the dataset has no `action` feature; its features: {sorted(feats)}")
    if not obs:
        raise DatasetError(f"the dataset has no observation features (observation.*); its features: {sorted(feats)}")
    for k in SCALAR_STEP_KEYS:
        if k in names and int(np.prod(feats[names[k]]["shape"])) != 1:
            raise DatasetError(f"meta/info.json: {names[k]!r} has shape {list(feats[names[k]]['shape'])}; "
                               "expected one value per frame")
    action_dim = int(np.prod(feats[names["action"]]["shape"]))
    try:
        return GroupSchema.build(obs, action_dim), names, layouts, skipped
    except ValueError as e:
        raise DatasetError(f"the dataset's features do not make a store schema: {e}") from e


def _schema_from_sidecar(side: dict, feats: dict) -> tuple[GroupSchema, dict[str, str], dict[str, str], list[str]]:
    try:
        schema = GroupSchema.model_validate(side["schema"])
        names = {str(k): str(v) for k, v in dict(side["features"]).items()}
    except (KeyError, TypeError, ValueError) as e:
        raise DatasetError(f"{fmt.SIDECAR_PATH} is not a schema and key map: {str(e)[:300]}") from e
    if set(names) != set(schema.keys):
        raise DatasetError(f"{fmt.SIDECAR_PATH}: the key map names {sorted(names)}, "
                           f"the schema has {sorted(schema.keys)}")
    layouts = {}
    for k, f in names.items():
        spec = schema.keys[k]
        if f not in feats:
            raise DatasetError(f"meta/info.json has no feature {f!r} (store key {k!r} in {fmt.SIDECAR_PATH})")
        have = feats[f]["shape"]
        if spec.kind == "image":
            got, layouts[k] = _image_spec(f, feats[f], spec.camera or k)
            if got.shape[:2] != spec.shape[:2]:
                raise DatasetError(f"feature {f!r} has shape {list(have)}, the store key {k!r} {list(spec.shape)}")
        elif int(np.prod(have)) != int(np.prod(spec.shape)):
            raise DatasetError(f"feature {f!r} has shape {list(have)}, the store key {k!r} {list(spec.shape)}")
    skipped = [f for f in feats if f not in names.values() and f not in fmt.INDEX_FEATURES]
    return schema, names, layouts, skipped


def _read_parquet(path: Path, columns: list[str] | None = None):
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not path.is_file():
        raise DatasetError(f"{path} is missing")
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as e:
        raise DatasetError(f"{path} is not a readable parquet file: {str(e)[:200]}") from e
    missing = [c for c in columns or () if c not in table.column_names]
    if missing:
        raise DatasetError(f"{path} has no column(s) {missing}; it has {table.column_names}")
    return table


def _numeric(table, name: str, width: int | None, path: Path) -> np.ndarray:
    """Column `name` as (N,) (width None) or (N, width); DatasetError for nulls or other widths."""
    import pyarrow as pa

    col = table.column(name).combine_chunks()
    if col.null_count:
        raise DatasetError(f"{path}: column {name!r} has {col.null_count} empty value(s)")
    if pa.types.is_list(col.type) or pa.types.is_fixed_size_list(col.type) or pa.types.is_large_list(col.type):
        lengths = set(np.unique(col.value_lengths().to_numpy(zero_copy_only=False)).tolist()) if len(col) else set()
        if width is None and lengths <= {1}:
            width = 1
        if width is None or lengths - {width}:
            raise DatasetError(f"{path}: column {name!r} holds lists of length {sorted(lengths)}; the feature's "
                               f"shape says {width if width is not None else 'one value'}")
        return col.flatten().to_numpy(zero_copy_only=False).reshape(len(col), width)
    if width not in (None, 1):
        raise DatasetError(f"{path}: column {name!r} holds one value per row; the feature's shape says {width}")
    a = col.to_numpy(zero_copy_only=False)
    return a if width is None else a.reshape(-1, 1)


def _steps(a: np.ndarray, key: str, spec: KeySpec, where: str) -> np.ndarray:
    """Rows of one key in the store's shape and a dtype the store accepts."""
    a = a.reshape(len(a), *spec.shape)
    if spec.np_dtype == np.bool_ and a.dtype != np.bool_:
        if a.dtype.kind not in "biuf" or not np.isin(a, (0, 1)).all():
            raise DatasetError(f"{where}: {key} holds values other than 0 and 1; the store keeps it as a flag")
        a = a.astype(bool)
    if a.dtype.kind not in "biuf":
        raise DatasetError(f"{where}: {key} is {a.dtype}, not numbers")
    return a


def _load_episodes(root: Path, info: dict, video_features: list[str]) -> list[dict]:
    files = sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet"))
    if not files:
        raise DatasetError(f"{root} has no episode table ({fmt.EPISODES_PATH.format(chunk_index=0, file_index=0)})")
    need = ["episode_index", "length", "data/chunk_index", "data/file_index"]
    for f in video_features:
        need += [f"videos/{f}/chunk_index", f"videos/{f}/file_index", f"videos/{f}/from_timestamp"]
    rows: list[dict] = []
    for path in files:
        table = _read_parquet(path, need)
        keep = [c for c in table.column_names if not c.startswith("stats/")]
        rows += table.select(keep).to_pylist()
    for r in rows:
        bad = [c for c in need if not isinstance(r[c], int | float) or isinstance(r[c], bool)]
        if bad or r["length"] < 1:
            raise DatasetError(f"episode table: episode {r.get('episode_index')!r} has no valid {bad or ['length']}")
    rows.sort(key=lambda r: r["episode_index"])
    ids = [r["episode_index"] for r in rows]
    if len(set(ids)) != len(ids):
        raise DatasetError("episode table: an episode_index appears twice")
    total = info.get("total_episodes")
    if isinstance(total, int) and total != len(rows):
        raise DatasetError(f"meta/info.json says {total} episodes, the episode table has {len(rows)}")
    return rows


def open_dataset(root: Path | str) -> DatasetPlan:
    """Read and check a dataset's metadata and tabular data (module docstring); frames are read
    per episode by `episode_data`."""
    root = Path(root)
    info = read_info(root)
    feats = info["features"]
    side_path = root / fmt.SIDECAR_PATH
    sidecar = _json(side_path, fmt.SIDECAR_PATH) if side_path.exists() else None
    if sidecar is not None and not (isinstance(sidecar, dict) and sidecar.get("format") == fmt.SIDECAR_FORMAT):
        raise DatasetError(f"{side_path} is not a {fmt.SIDECAR_FORMAT} file; remove it to import by the features")
    if sidecar is not None:
        schema, names, layouts, skipped = _schema_from_sidecar(sidecar, feats)
    else:
        schema, names, layouts, skipped = _schema_from_features(feats)
    videos = [names[k] for k in schema.image_keys if feats[names[k]]["dtype"] == "video"]
    episodes = _load_episodes(root, info, videos)
    lowdim = [k for k in schema.keys if k not in schema.image_keys and k in names]
    pixels = [k for k in schema.image_keys if feats[names[k]]["dtype"] == "image"]
    cols: dict[str, list] = {k: [] for k in [*lowdim, *pixels, "_episode", "_frame"]}
    files = sorted({(int(e["data/chunk_index"]), int(e["data/file_index"])) for e in episodes})
    for c, f in files:
        path = root / info["data_path"].format(chunk_index=c, file_index=f)
        table = _read_parquet(path, ["episode_index", "frame_index", *(names[k] for k in [*lowdim, *pixels])])
        cols["_episode"].append(_numeric(table, "episode_index", None, path).reshape(-1))
        cols["_frame"].append(_numeric(table, "frame_index", None, path).reshape(-1))
        for k in lowdim:
            width = int(np.prod(feats[names[k]]["shape"]))
            cols[k].append(_steps(_numeric(table, names[k], width, path), k, schema.keys[k], str(path)))
        for k in pixels:
            cols[k] += table.column(names[k]).to_pylist()
    data = {k: np.concatenate(v) if v and k not in pixels else v for k, v in cols.items() if k not in pixels}
    images = {k: cols[k] for k in pixels}
    order = np.lexsort((data["_frame"], data["_episode"]))
    ep_sorted = data["_episode"][order]
    rows: dict[int, np.ndarray] = {}
    for e in episodes:
        i = int(e["episode_index"])
        lo, hi = np.searchsorted(ep_sorted, i, "left"), np.searchsorted(ep_sorted, i, "right")
        r = order[lo:hi]
        if len(r) != e["length"] or not np.array_equal(data["_frame"][r], np.arange(e["length"])):
            raise DatasetError(f"episode {i}: the data files hold {len(r)} rows (frame_index "
                               f"{_span(data['_frame'][r])}); the episode table says {e['length']} frames 0..")
        rows[i] = r
    defaulted = [k for k in SCALAR_STEP_KEYS if k not in names]
    return DatasetPlan(root, info, info["fps"], schema, names, layouts, episodes, data, rows, images, sidecar,
                       skipped, defaulted)


def _span(a: np.ndarray) -> str:
    return f"{int(a.min())}..{int(a.max())}" if len(a) else "none"


class _Frames:
    """Frames of one video feature, read in order; reopens a file only to go back."""

    def __init__(self, plan: DatasetPlan, feature: str):
        self.plan, self.feature = plan, feature
        self.path: Path | None = None
        self.it: Iterator[tuple[int, np.ndarray]] | None = None
        self.next = 0

    def read(self, e: dict) -> np.ndarray:
        f, fps = self.feature, self.plan.fps
        path = self.plan.root / self.plan.info["video_path"].format(
            video_key=f, chunk_index=int(e[f"videos/{f}/chunk_index"]), file_index=int(e[f"videos/{f}/file_index"]))
        a = round(float(e[f"videos/{f}/from_timestamp"]) * fps)
        n = int(e["length"])
        if path != self.path or a < self.next:
            if not path.is_file():
                raise DatasetError(f"{path} is missing (episode {e['episode_index']}'s {f})")
            self.path, self.it, self.next = path, iter_frames(path, fps), 0
        out = []
        for k, frame in self.it:
            self.next = k + 1
            if k < a:
                continue
            if k != a + len(out):
                break
            out.append(frame)
            if len(out) == n:
                break
        if len(out) != n:
            raise DatasetError(f"{path}: episode {e['episode_index']} needs frames {a}..{a + n - 1} "
                               f"(from_timestamp {e[f'videos/{f}/from_timestamp']} at {fps} fps), found {len(out)}")
        return np.stack(out)


def _decode_images(values: list, where: str) -> np.ndarray:
    import io

    from PIL import Image

    out = []
    for v in values:
        raw = v.get("bytes") if isinstance(v, dict) else v
        if not isinstance(raw, bytes):
            raise DatasetError(f"{where}: an image row holds no encoded bytes")
        try:
            out.append(np.asarray(Image.open(io.BytesIO(raw)).convert("RGB")))
        except OSError as e:
            raise DatasetError(f"{where}: an image does not decode: {e}") from e
    return np.stack(out)


def episode_data(plan: DatasetPlan) -> Iterator[tuple[dict, dict[str, np.ndarray]]]:
    """(episode table row, {store key: steps}) for each episode in episode_index order; frames
    checked for count and size."""
    schema, feats = plan.schema, plan.info["features"]
    videos = [k for k in schema.image_keys if feats[plan.features[k]]["dtype"] == "video"]
    readers = {k: _Frames(plan, plan.features[k]) for k in videos}
    for e in plan.episodes:
        i = int(e["episode_index"])
        r = plan.rows[i]
        steps = {k: plan.data[k][r] for k in schema.keys if k in plan.data}
        for k in schema.image_keys:
            spec = schema.keys[k]
            frames = (readers[k].read(e) if k in readers
                      else _decode_images([plan.images[k][j] for j in r], f"episode {i} {plan.features[k]}"))
            if frames.shape[1:3] != spec.shape[:2]:
                raise DatasetError(f"episode {i} {plan.features[k]}: frames are {frames.shape[2]}x{frames.shape[1]}, "
                                   f"the feature says {spec.shape[1]}x{spec.shape[0]}")
            steps[k] = frames[..., :1] if spec.shape[2] == 1 else frames
        n = int(e["length"])
        for k in plan.defaulted:
            steps[k] = np.zeros((n,), np.float32 if k == "reward" else bool)
        yield e, steps
