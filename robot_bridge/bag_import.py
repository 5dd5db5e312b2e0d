"""rosbag2 (MCAP or sqlite3) import into the episode store.

Runs the bridge's own decoders and stamp alignment over the bag: ticks are the step markers when
present, else the action messages; the observation of a tick is each stream's newest message
stamped at or before it. Without episode markers the whole bag is one episode. All or nothing:
a failed import leaves the store as it was.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from robot_bridge.bag_common import EPISODE_TOPIC, STEP_TOPIC, STRING, open_bag
from robot_bridge.codec import decode
from robot_bridge.core.limits import ActionLimiter, ActionScale
from robot_bridge.core.streams import StreamInput, TopicCounters
from robot_bridge.errors import BagError, DecodeError, MessageRejected
from robot_bridge.profile import RobotProfile, stream_typename
from worldsample.store import EpisodeRecord, EpisodeStore, GroupSchema
from worldsample.store.layout import store_path


@dataclass
class ImportOptions:
    """How an import treats what does not fit the profile (`bag import` options)."""

    strict: bool = False  # any rejected message fails the import (nothing is kept)
    allow_duplicate: bool = False  # import a bag whose content hash is already in the group
    action_limits: Literal["clip", "reject"] = "clip"  # out-of-limit actions: clipped (counted) or the step dropped
    split_long: bool = False  # past max_steps: start a new episode (True) or drop the rest (False)


@dataclass
class ImportReport:
    bag: str
    sha256: str
    episodes: list[EpisodeRecord] = field(default_factory=list)
    topics: dict[str, TopicCounters] = field(default_factory=dict)
    steps: Counter = field(default_factory=Counter)  # ticks, recorded, dropped:<why>, clipped_actions
    details: dict[str, dict[str, str]] = field(default_factory=dict)  # topic -> reason -> first example
    problems: list[str] = field(default_factory=list)  # why nothing (or less) was imported

    def as_dict(self) -> dict:
        return {"bag": self.bag, "sha256": self.sha256, "episodes": [r.episode for r in self.episodes],
                "steps": dict(self.steps), "topics": {t: c.as_dict() for t, c in self.topics.items()},
                "details": self.details, "problems": self.problems}

    def lines(self) -> list[str]:
        out = []
        for topic, c in self.topics.items():
            rej = ", ".join(f"{r} {n} ({self.details.get(topic, {}).get(r, '')})".replace(" ()", "")
                            for r, n in sorted(c.rejected.items()))
            out.append(f"{topic}: received {c.received}, accepted {c.accepted}" + (f", rejected {rej}" if rej else ""))
        s = self.steps
        dropped = ", ".join(f"{k.split(':', 1)[1]} {n}" for k, n in sorted(s.items()) if k.startswith("dropped:"))
        out.append(f"steps: {s['ticks']} ticks, {s['recorded']} recorded" + (f", dropped {dropped}" if dropped else "")
                   + (f", {s['clipped_actions']} actions clipped to the limits" if s["clipped_actions"] else ""))
        return out


class BagImportError(BagError):
    def __init__(self, message: str, report: ImportReport):
        super().__init__("\n".join([message, *report.problems, *report.lines()]))
        self.report = report


def bag_sha256(bag: Path) -> str:
    """Content hash of a bag (all files of a bag directory, by relative name; or the one file)."""
    h = hashlib.sha256()
    files = sorted(p for p in bag.rglob("*") if p.is_file()) if bag.is_dir() else [bag]
    for p in files:
        h.update(str(p.relative_to(bag) if bag.is_dir() else p.name).encode() + b"\0")
        with open(p, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
    return h.hexdigest()


def _topic_hint(topic: str, present: set[str]) -> str:
    name = topic.rsplit("/", 1)[-1]
    near = sorted(t for t in present if t.strip("/") == topic.strip("/") or t.rsplit("/", 1)[-1] == name)
    hint = " (ROS topics start with '/')" if not topic.startswith("/") else ""
    return hint + (f"; the bag has {', '.join(near)}" if near else f"; the bag's topics: {', '.join(sorted(present))}")


class _Sink:
    """The store side of one import: created at the first step, removed again if the import fails."""

    def __init__(self, run_dir: Path, group: str, schema: GroupSchema, sha: str, allow_duplicate: bool):
        self.run_dir, self.group, self.schema = Path(run_dir), group, schema
        self.writer = None
        self.committed: list[int] = []
        self.created = None  # the path this import created (run dir, store or group), removed on failure
        if self.run_dir.exists() and not self.run_dir.is_dir():
            raise BagError(f"run directory {self.run_dir} is a file")
        root = store_path(self.run_dir)
        if (root / group / "zarr.json").exists():
            store = EpisodeStore(self.run_dir)
            have = store.schema(group)
            if not have.compatible_with(schema):
                diff = sorted(k for k in set(have.keys) | set(schema.keys) if have.keys.get(k) != schema.keys.get(k))
                raise BagError(f"group {group!r} in {self.run_dir} has another schema than this profile "
                               f"(keys differ: {diff}); import into a new run directory or use the run's profile")
            if not allow_duplicate:
                dup = [r.episode for r in store.reader(group, cache=False).episode_records()
                       if r.extra.get("bag_sha256") == sha]
                if dup:
                    raise BagError(f"this bag (sha256 {sha[:12]}) was already imported into group {group!r} of "
                                   f"{self.run_dir} as episodes {dup}; pass --allow-duplicate to import it again")

    def begin(self):
        if self.writer is None:
            root = store_path(self.run_dir)
            self.created = next((p for p in (self.run_dir, root, root / self.group) if not p.exists()), None)
            store = EpisodeStore(self.run_dir, create=True)
            store.ensure_group(self.group, self.schema)
            self.writer = store.writer(self.group)
        return self.writer.begin_episode()

    def commit(self, ep, **meta) -> EpisodeRecord:
        rec = ep.commit(**meta)
        self.committed.append(rec.episode)
        return rec

    def close(self, ok: bool) -> None:
        w, self.writer = self.writer, None
        if w is None:
            return
        try:
            if not ok and self.created is None:
                for e in self.committed:  # into an existing group: take back what this import committed
                    w.delete_episode(e)
        finally:
            w.close()
        if not ok and self.created is not None:
            shutil.rmtree(self.created, ignore_errors=True)


class _Importer:
    def __init__(self, profile: RobotProfile, sink: _Sink, report: ImportReport, opts: ImportOptions,
                 action_type: str | None):
        from robot_bridge.bridge import stream_converter

        self.p, self.sink, self.r, self.opts = profile, sink, report, opts
        self.inputs: dict[str, StreamInput] = {}
        for s in profile.streams:
            self.inputs[s.topic] = StreamInput(s.key, stream_typename(s),
                                               self._noting(s.topic, stream_converter(s, profile)), depth=256,
                                               decode=profile.msg_types.decode)
            report.topics[s.topic] = self.inputs[s.topic].counters
        self.action_counters = report.topics.setdefault(profile.action.topic, TopicCounters())
        self.action_type = action_type
        self.action_map = profile.action_mapping()
        self.required = {s.key for s in profile.streams if s.required}
        self.specs = profile.obs_specs()
        self.limiter = ActionLimiter(profile.action)  # the bag's actions are in arm units
        self.scale = ActionScale(profile.action)  # and are stored normalised, as the bridge stores them
        self.action: np.ndarray | None = None
        self.ep = None
        self.meta: dict = {}
        self.over = False  # past max_steps (or a terminal step) until the next episode starts
        self.stamps: list[int] = []
        self.pending: list[tuple[int, dict]] = []  # ticks waiting for their observations

    def _noting(self, topic: str, fn):
        def convert(msg):
            try:
                return fn(msg)
            except MessageRejected as e:
                self.r.details.setdefault(topic, {}).setdefault(e.reason, str(e))
                raise
        return convert

    def reject(self, topic: str, reason: str, detail: str, counters: TopicCounters | None = None) -> None:
        c = counters or self.r.topics.setdefault(topic, TopicCounters())
        c.rejected[reason] += 1
        self.r.details.setdefault(topic, {}).setdefault(reason, detail)
        if self.opts.strict:
            raise BagError(f"--strict: message on {topic} rejected ({reason}: {detail})")

    def sensor(self, topic: str, raw: bytes, t: int) -> None:
        inp = self.inputs[topic]
        before = Counter(inp.counters.rejected)
        inp(raw, t)
        if inp.counters.rejected != before:
            reason = next(iter(inp.counters.rejected - before))
            if reason == "malformed":  # the decoders' own rejections carry their detail already
                self.r.details.setdefault(topic, {}).setdefault(reason, f"not valid CDR for {inp.typename}")
            if self.opts.strict:
                raise BagError(f"--strict: message on {topic} at {t} rejected ({reason})")

    def action_msg(self, raw: bytes, t: int, ticks: bool) -> None:
        c = self.action_counters
        c.received += 1
        try:
            a = self.action_map.decode(raw, finite=False).astype(np.float32)  # NaN: the limiter's
        except DecodeError as e:
            return self.reject(self.p.action.topic, "malformed", str(e), c)
        except MessageRejected as e:
            return self.reject(self.p.action.topic, e.reason, str(e).removeprefix(e.reason + ": "), c)
        if a.shape != (self.p.action.dim,):
            return self.reject(self.p.action.topic, "wrong_size", f"{a.size} values, profile says "
                               f"{self.p.action.dim}", c)
        c.accepted += 1
        self.action = a
        if ticks:
            self.pending.append((t, {"action": a, "reward": 0.0}))

    def begin(self, meta: dict) -> None:
        self.end()
        self.meta, self.over = meta, False

    def _limit(self, a: np.ndarray) -> np.ndarray | None:
        prev = self.limiter.prev.copy()
        clipped = self.limiter.clipped + self.limiter.non_finite
        out = self.limiter(a)
        if self.limiter.clipped + self.limiter.non_finite == clipped:
            return out
        if self.opts.action_limits == "reject":
            self.limiter.prev = prev
            self.r.steps["dropped:action_out_of_limits"] += 1
            if self.opts.strict:
                raise BagError(f"--strict: action {a.tolist()} is outside the profile's limits")
            return None
        self.r.steps["clipped_actions"] += 1
        return out

    def flush(self, before: int | None) -> None:
        """Record every pending tick older than `before` (all when None)."""
        while self.pending and (before is None or self.pending[0][0] < before):
            t, flags = self.pending.pop(0)
            self.r.steps["ticks"] += 1
            if self.over:
                self.r.steps["dropped:over_max_steps"] += 1
                continue
            obs = {}
            for inp in self.inputs.values():
                s = inp.buffer.at(t)
                if s is None and inp.key in self.required:
                    break
                spec = self.specs[inp.key]
                obs[inp.key] = s.value if s is not None else np.zeros(spec.shape, spec.np_dtype)
            else:
                a = flags.pop("action", self.action)
                if a is None:
                    self.r.steps["dropped:no_action_yet"] += 1
                    continue
                if self.ep is None:
                    self.ep, self.stamps = self.sink.begin(), []
                    self.limiter.reset()
                a = self._limit(a)
                if a is None:
                    continue
                self.ep.add_step({**obs, "action": self.scale.to_policy(a), **flags})
                self.stamps.append(t)
                self.r.steps["recorded"] += 1
                if flags.get("done") or self.ep.length >= self.p.episode.max_steps:
                    cut = not flags.get("done")
                    self._commit(cut_at_max=cut)
                    self.over = not (cut and self.opts.split_long)
                continue
            self.r.steps[f"dropped:no_observation_{inp.key}"] += 1

    def end(self) -> None:
        self.flush(None)
        self._commit(cut_at_max=False)
        self.meta = {}

    def _commit(self, cut_at_max: bool) -> None:
        ep, self.ep = self.ep, None
        if ep is None:
            return
        if ep.length == 0:  # every step it began with was dropped
            ep.discard()
            return
        r = self.meta
        terminated = bool(ep.collected("done")[-1])
        kept = ("success", "policy_version", "wm_version", "domain", "domain_info")
        meta = {k: r[k] for k in kept if k in r}
        extra = dict(r.get("extra", {}))
        if cut_at_max:
            extra["outcome"] = "max_steps"
        elif not terminated:
            extra.setdefault("outcome", "truncated")
        t0 = self.stamps[0]
        extra.update(
            imported_from=self.r.bag,
            bag_sha256=self.r.sha256,
            original_episode=r.get("episode"),
            original_wall_time_start=r.get("wall_time_start"),
            truncated=not terminated,
            t0_ns=t0,
            step_offsets_ns=[s - t0 for s in self.stamps],
        )
        self.r.episodes.append(self.sink.commit(ep, **meta, terminated=terminated, extra=extra))


def import_bag(bag: Path, run_dir: Path, profile: RobotProfile, group: str | None = None,
               options: ImportOptions | None = None) -> ImportReport:
    """Import `bag` into group `group` of `run_dir`'s store; all or nothing.

    Raises BagError (nothing written) when the bag cannot be read, was imported before, yields no
    episode (the message says why, with the per-topic counts), or, with `strict`, has a bad message."""
    opts = options or ImportOptions()
    bag, group = Path(bag), group or profile.episode.group
    reader = open_bag(bag)
    try:
        report = ImportReport(str(bag), bag_sha256(bag))
        schema = GroupSchema.build(profile.obs_specs(), profile.action.dim, profile.episode.chunk_len)
        sink = _Sink(run_dir, group, schema, report.sha256, opts.allow_duplicate)
        types = {c.topic: c.msgtype for c in reader.connections}
        act = profile.action
        imp = _Importer(profile, sink, report, opts, types.get(act.topic))
        has_steps = STEP_TOPIC in types
        for s in profile.streams:
            if s.required and s.topic not in types:
                report.problems.append(f"required stream {s.topic} is not in the bag{_topic_hint(s.topic, set(types))}")
        if act.topic not in types:
            report.problems.append(f"action topic {act.topic} is not in the bag{_topic_hint(act.topic, set(types))}")
        wrong_type = {t for t in [*imp.inputs, act.topic] if t in types and types[t] != (
            act.type if t == act.topic else imp.inputs[t].typename)}
        for t in sorted(wrong_type):
            want = act.type if t == act.topic else imp.inputs[t].typename
            report.problems.append(f"{t} is {types[t]} in the bag, the profile says {want}")
        wanted = [c for c in reader.connections if c.topic in imp.inputs or c.topic in (act.topic, EPISODE_TOPIC,
                                                                                          STEP_TOPIC)]
        ok = False
        try:
            for conn, t, raw in reader.messages(connections=wanted):
                imp.flush(t)
                topic = conn.topic
                if topic in wrong_type:
                    c = report.topics[topic]
                    c.received += 1
                    imp.reject(topic, "wrong_type", f"{conn.msgtype}, profile says "
                               f"{act.type if topic == act.topic else imp.inputs[topic].typename}", c)
                elif topic in imp.inputs:
                    imp.sensor(topic, raw, t)
                elif topic == act.topic:
                    imp.action_msg(raw, t, ticks=not has_steps)
                else:
                    c = report.topics.setdefault(topic, TopicCounters())
                    c.received += 1
                    try:
                        msg = json.loads(decode(raw, STRING).data)
                        if topic == STEP_TOPIC:
                            flags = {k: msg[k] for k in ("reward", "done", "success", "intervention")}
                            flags = {k: (float(v) if k == "reward" else bool(v)) for k, v in flags.items()}
                            imp.pending.append((t, flags))
                        elif msg["event"] == "start":
                            imp.begin(dict(msg["record"]))
                        elif msg["event"] == "end":
                            imp.end()
                        c.accepted += 1
                    except (DecodeError, ValueError, KeyError, TypeError) as e:
                        imp.reject(topic, "malformed", f"{type(e).__name__}: {e}", c)
            imp.end()
            if not report.episodes:
                if not report.problems:
                    for topic, c in report.topics.items():
                        if c.received and not c.accepted:
                            report.problems.append(f"every message on {topic} was rejected")
                    if not report.steps["ticks"]:
                        report.problems.append(
                            f"no steps: the bag has no {STEP_TOPIC} markers and no accepted message on {act.topic}")
                raise BagImportError(f"{bag}: no episode imported, nothing written", report)
            ok = True
        finally:
            sink.close(ok)
    finally:
        reader.close()
    return report
