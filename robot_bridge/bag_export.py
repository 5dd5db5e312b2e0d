"""rosbag2 (MCAP or sqlite3) export from the episode store.

Writes each step's observations on the profile's topics and types (header stamps and log times at
the step's tick), the action on the action topic (in arm units: the inverse of the store's normalised
action, robot_bridge/core/limits.py ActionScale), and two WorldSample topics that let a bag come
back without loss: `/worldsample/episode` (start/end markers carrying the episode record) and
`/worldsample/step` (reward, done, success, intervention per step).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from robot_bridge.bag_common import EPISODE_TOPIC, STEP_TOPIC, STRING, _types
from robot_bridge.codec import (
    CompressedImage,
    Header,
    Image,
    JointState,
    MessageTypes,
    String,
    Time,
    Vector3,
    Wrench,
    WrenchStamped,
    array_msg,
)
from robot_bridge.codec.fields import FieldMapping
from robot_bridge.core.limits import ActionScale
from robot_bridge.errors import BagError
from robot_bridge.profile import CameraStream, JointStream, RobotProfile, VectorStream, stream_typename
from worldsample.store import EpisodeRecord, EpisodeStore, GroupSchema


def _stream_message(s, value: np.ndarray, stamp: int):
    h = Header(Time.from_ns(stamp), s.key)
    if isinstance(s, CameraStream):
        if s.type.endswith("CompressedImage"):
            from PIL import Image as PILImage

            buf = io.BytesIO()
            PILImage.fromarray(value.squeeze(-1) if s.channels == 1 else value).save(buf, format="png")
            return CompressedImage(header=h, format="png", data=np.frombuffer(buf.getvalue(), np.uint8))
        return Image(header=h, height=s.height, width=s.width, encoding="rgb8" if s.channels == 3 else "mono8",
                     step=s.width * s.channels, data=value.reshape(-1))
    if isinstance(s, JointStream):
        parts = dict(zip(s.fields, value.astype(np.float64).reshape(len(s.fields), len(s.names)), strict=True))
        return JointState(header=h, name=list(s.names), **parts)
    if isinstance(s, VectorStream):
        return array_msg(s.type, value, s.key)
    v = value.astype(float)
    return WrenchStamped(header=h, wrench=Wrench(Vector3(*v[:3]), Vector3(*v[3:])))


def check_export_schema(store: EpisodeStore, group: str, profile: RobotProfile) -> None:
    """The profile must describe the group's data (same observation keys, shapes and action size)."""
    have = store.schema(group)
    want = GroupSchema.build(profile.obs_specs(), profile.action.dim, have.chunk_len)
    if have.compatible_with(want):
        return
    def desc(s: GroupSchema, k: str) -> str:
        return "absent" if k not in s.keys else f"{s.keys[k].dtype}{list(s.keys[k].shape)}"
    diff = [f"{k}: store {desc(have, k)}, profile {desc(want, k)}" for k in sorted(set(have.keys) | set(want.keys))
            if have.keys.get(k) != want.keys.get(k)]
    raise BagError(f"profile {profile.name!r} does not match group {group!r} of {store.run_dir}: "
                   + ("; ".join(diff) or "observation keys are in another order") + "; nothing written")


def _step_times(rec: EpisodeRecord, period: int) -> list[int]:
    """Tick times of an episode: the bag's own for an imported one, else t0 + k * period."""
    offsets = rec.extra.get("step_offsets_ns")
    t0 = int(rec.extra.get("t0_ns") or rec.wall_time_start * 1e9)
    if isinstance(offsets, list) and len(offsets) == rec.length:
        return [t0 + int(o) for o in offsets]
    return [t0 + k * period for k in range(rec.length)]


def export_bag(run_dir: Path, out: Path, profile: RobotProfile, episodes: list[int] | None = None,
               group: str | None = None, storage: str = "mcap", distro: str = "jazzy") -> int:
    """Write episodes of `run_dir` as a new rosbag2 at `out`, built in a temporary directory next to it
    and renamed into place at the end: a failure leaves nothing at `out`."""
    from rosbags.rosbag2 import StoragePlugin

    plugins = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}
    if storage not in plugins:
        raise BagError(f"storage {storage!r}: use mcap or sqlite3")
    out = Path(out)
    if out.exists() or out.is_symlink():
        raise BagError(f"{out} exists; rosbag2 writes a new directory")
    if not out.parent.is_dir():
        raise BagError(f"{out.parent} is not a directory; the bag is written as a new directory inside one")
    group = group or profile.episode.group
    store = EpisodeStore(run_dir)
    check_export_schema(store, group, profile)
    reader = store.reader(group, cache=False)
    records = {r.episode: r for r in reader.episode_records()}
    wanted = sorted(records) if episodes is None else episodes
    missing = [e for e in wanted if e not in records]
    if missing:
        raise BagError(f"episodes {missing} are not committed in group {group!r} of {run_dir}")
    types = _types(distro, profile)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp-"))
    try:
        _write_bag(tmp / out.name, plugins[storage], types, profile, reader, records, wanted)
        os.rename(tmp / out.name, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return len(wanted)


def _write_bag(path: Path, plugin, types: MessageTypes, profile: RobotProfile, reader, records,
               wanted: list[int]) -> None:
    from rosbags.rosbag2 import Writer

    ts, encode = types.store, types.encode
    a = profile.action
    action_msg = FieldMapping(types, a.type, a.fields, a.dim, a.constants, a.stamp, "action")
    scale = ActionScale(a)  # the store's normalised actions go out in arm units, as the bridge sends them
    vector_msg = {v.key: FieldMapping(types, v.type, v.fields, v.dim, label=v.key) for v in profile.vectors}
    with Writer(path, version=9, storage_plugin=plugin) as w:
        conns = {s.key: w.add_connection(s.topic, stream_typename(s), typestore=ts) for s in profile.streams}
        c_action = w.add_connection(profile.action.topic, profile.action.type, typestore=ts)
        c_episode = w.add_connection(EPISODE_TOPIC, STRING, typestore=ts)
        c_step = w.add_connection(STEP_TOPIC, STRING, typestore=ts)
        t_free = 0
        for eid in wanted:
            rec, data = records[eid], reader.episode(eid)
            period = int(1e9 / rec.extra.get("control_rate_hz", profile.control_rate_hz))
            times = _step_times(rec, period)
            shift = max(0, t_free - times[0])  # episodes never overlap in the bag
            times = [t + shift for t in times]
            marker = rec.model_dump(mode="json", exclude={"start", "checksums"})
            w.write(c_episode, times[0] - 1, encode(String(json.dumps({"event": "start", "record": marker}))))
            for k, t in enumerate(times):
                for s in profile.streams:
                    m = vector_msg.get(s.key)
                    raw = m.encode(data[s.key][k], t) if m else encode(_stream_message(s, data[s.key][k], t))
                    w.write(conns[s.key], t, raw)
                w.write(c_action, t, action_msg.encode(scale.to_arm(data["action"][k]), t))
                flags = {f: (bool(data[f][k]) if f != "reward" else float(data[f][k]))
                         for f in ("reward", "done", "success", "intervention")}
                last = k == rec.length - 1
                flags["truncated"] = last and not flags["done"]
                w.write(c_step, t, encode(String(json.dumps({"episode": eid, "step": k, **flags}))))
            w.write(c_episode, times[-1] + 1, encode(String(json.dumps({"event": "end", "episode": eid}))))
            t_free = times[-1] + period  # no two markers share a timestamp
