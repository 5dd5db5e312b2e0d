"""rosbag2 (MCAP or sqlite3) export from the episode store and import into it.

Export writes each step's observations on the profile's topics and types (header stamps and log
times at the step's tick), the action on the action topic, and two WorldSample topics that let a
bag come back without loss: `/worldsample/episode` (start/end markers carrying the episode
record) and `/worldsample/step` (reward, done, success, intervention per step).

Import runs the bridge's own decoders and stamp alignment over the bag: ticks are the step
markers when present, else the action messages; the observation of a tick is each stream's newest
message stamped at or before it. Without episode markers the whole bag is one episode.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np

from robot_bridge.codec import (
    CompressedImage,
    Header,
    Image,
    JointState,
    String,
    Time,
    Vector3,
    Wrench,
    WrenchStamped,
    array_msg,
    decode,
    encode,
)
from robot_bridge.core.streams import StreamInput
from robot_bridge.errors import BagError, DecodeError
from robot_bridge.profile import CameraStream, JointStream, RobotProfile, VectorStream, stream_typename
from worldsample.store import EpisodeRecord, EpisodeStore, GroupSchema

EPISODE_TOPIC, STEP_TOPIC = "/worldsample/episode", "/worldsample/step"
STRING = "std_msgs/msg/String"


def parse_episodes(spec: str | None) -> list[int] | None:
    """"0,3-5" -> [0, 3, 4, 5]; None -> None (all)."""
    if not spec:
        return None
    out: list[int] = []
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m:
            raise BagError(f"episode list {spec!r}: {part!r} is not N or N-M")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        out.extend(range(lo, hi + 1))
    return out


def _typestore(distro: str):
    from rosbags.typesys import Stores, get_typestore

    stores = {"jazzy": Stores.ROS2_JAZZY, "humble": Stores.ROS2_HUMBLE}
    if distro not in stores:
        raise BagError(f"distro {distro!r}: use one of {sorted(stores)}")
    return get_typestore(stores[distro])


# -- export ---------------------------------------------------------------------------------------
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


def export_bag(run_dir: Path, out: Path, profile: RobotProfile, episodes: list[int] | None = None,
               group: str | None = None, storage: str = "mcap", distro: str = "jazzy") -> int:
    from rosbags.rosbag2 import StoragePlugin, Writer

    plugins = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}
    if storage not in plugins:
        raise BagError(f"storage {storage!r}: use mcap or sqlite3")
    if Path(out).exists():
        raise BagError(f"{out} exists; rosbag2 writes a new directory")
    group = group or profile.episode.group
    reader = EpisodeStore(run_dir).reader(group, cache=False)
    records = {r.episode: r for r in reader.episode_records()}
    wanted = sorted(records) if episodes is None else episodes
    missing = [e for e in wanted if e not in records]
    if missing:
        raise BagError(f"episodes {missing} are not committed in group {group!r} of {run_dir}")
    ts = _typestore(distro)
    with Writer(out, version=9, storage_plugin=plugins[storage]) as w:
        conns = {s.key: w.add_connection(s.topic, stream_typename(s), typestore=ts) for s in profile.streams}
        c_action = w.add_connection(profile.action.topic, profile.action.type, typestore=ts)
        c_episode = w.add_connection(EPISODE_TOPIC, STRING, typestore=ts)
        c_step = w.add_connection(STEP_TOPIC, STRING, typestore=ts)
        t_free = 0
        for eid in wanted:
            rec, data = records[eid], reader.episode(eid)
            period = int(1e9 / rec.extra.get("control_rate_hz", profile.control_rate_hz))
            t0 = max(int(rec.extra.get("t0_ns") or rec.wall_time_start * 1e9), t_free)
            marker = rec.model_dump(mode="json", exclude={"start", "checksums"})
            w.write(c_episode, t0 - 1, encode(String(json.dumps({"event": "start", "record": marker}))))
            for k in range(rec.length):
                t = t0 + k * period
                for s in profile.streams:
                    w.write(conns[s.key], t, encode(_stream_message(s, data[s.key][k], t)))
                w.write(c_action, t, encode(array_msg(profile.action.type, data["action"][k], "action")))
                flags = {f: (bool(data[f][k]) if f != "reward" else float(data[f][k]))
                         for f in ("reward", "done", "success", "intervention")}
                w.write(c_step, t, encode(String(json.dumps({"episode": eid, "step": k, **flags}))))
            t_end = t0 + rec.length * period
            w.write(c_episode, t_end - 1, encode(String(json.dumps({"event": "end", "episode": eid}))))
            t_free = t_end + period  # no two markers share a timestamp
    return len(wanted)


# -- import ---------------------------------------------------------------------------------------
class _Importer:
    def __init__(self, profile: RobotProfile, writer, source: str):
        from robot_bridge.bridge import stream_converter

        self.p, self.w, self.source = profile, writer, source
        self.inputs = {
            s.topic: StreamInput(s.key, stream_typename(s), stream_converter(s), depth=256) for s in profile.streams
        }
        self.specs = profile.obs_specs()
        self.action = np.asarray(profile.action.hold or [0.0] * profile.action.dim, np.float32)
        self.ep = None
        self.meta: dict = {}
        self.pending: list[tuple[int, dict]] = []  # ticks waiting for their observations
        self.records: list[EpisodeRecord] = []
        self.skipped = 0

    def begin(self, meta: dict) -> None:
        self.flush(None)
        if self.ep is not None:
            self.end()
        self.ep, self.meta = self.w.begin_episode(), meta

    def flush(self, before: int | None) -> None:
        """Record every pending tick older than `before` (all when None)."""
        while self.pending and (before is None or self.pending[0][0] < before):
            t, flags = self.pending.pop(0)
            obs = {}
            for inp in self.inputs.values():
                s = inp.buffer.at(t)
                if s is None and next(x.required for x in self.p.streams if x.key == inp.key):
                    self.skipped += 1
                    break
                spec = self.specs[inp.key]
                obs[inp.key] = s.value if s is not None else np.zeros(spec.shape, spec.np_dtype)
            else:
                if self.ep is None:
                    self.begin({})
                self.ep.add_step({**obs, "action": flags.pop("action", self.action), **flags})

    def end(self) -> None:
        self.flush(None)
        ep, self.ep = self.ep, None
        if ep is None:
            return
        if ep.length == 0:
            ep.discard()
            return
        r = self.meta
        kept = ("success", "terminated", "policy_version", "wm_version", "domain", "domain_info")
        meta = {k: r[k] for k in kept if k in r}
        extra = dict(r.get("extra", {}))
        extra.update(
            imported_from=self.source,
            original_episode=r.get("episode"),
            original_wall_time_start=r.get("wall_time_start"),
        )
        self.records.append(ep.commit(**meta, extra=extra))


def import_bag(bag: Path, run_dir: Path, profile: RobotProfile, group: str | None = None) -> list[EpisodeRecord]:
    from rosbags.highlevel import AnyReader

    group = group or profile.episode.group
    store = EpisodeStore(run_dir, create=True)
    store.ensure_group(group, GroupSchema.build(profile.obs_specs(), profile.action.dim, profile.episode.chunk_len))
    try:
        reader = AnyReader([Path(bag)])
        reader.open()
    except Exception as e:  # rosbags raises several unrelated types for unreadable bags
        raise BagError(f"cannot open {bag} as a rosbag2: {e}") from e
    with store.writer(group) as writer:
        imp = _Importer(profile, writer, str(bag))
        try:
            topics = {c.topic for c in reader.connections}
            has_steps = STEP_TOPIC in topics
            wanted = [c for c in reader.connections if c.topic in imp.inputs or c.topic in (
                profile.action.topic, EPISODE_TOPIC, STEP_TOPIC)]
            for conn, t, raw in reader.messages(connections=wanted):
                imp.flush(t)
                try:
                    if conn.topic in imp.inputs:
                        imp.inputs[conn.topic](raw, t)
                    elif conn.topic == profile.action.topic:
                        imp.action = np.asarray(decode(raw, profile.action.type).data, np.float32)
                        if not has_steps:
                            imp.pending.append((t, {"action": imp.action, "reward": 0.0}))
                    elif conn.topic == STEP_TOPIC:
                        step = json.loads(decode(raw, STRING).data)
                        imp.pending.append((t, {k: step[k] for k in ("reward", "done", "success", "intervention")}))
                    else:
                        ev = json.loads(decode(raw, STRING).data)
                        if ev["event"] == "start":
                            imp.begin(ev["record"])
                        elif ev["event"] == "end":
                            imp.end()
                except (DecodeError, ValueError, KeyError) as e:
                    raise BagError(f"{bag}: bad message on {conn.topic} at {t}: {e}") from e
            imp.end()
        finally:
            reader.close()
    return imp.records
